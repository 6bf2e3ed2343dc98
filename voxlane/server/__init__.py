"""The API process: HTTP, the audio front end and the engine client."""
