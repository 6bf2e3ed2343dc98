"""Audio front end: decode, resample, split into windows, log-mel features. Pure CPU functions:
callers run them on the audio preprocessing executor, never on the event loop."""
