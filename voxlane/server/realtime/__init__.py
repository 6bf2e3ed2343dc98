"""Live transcription over a WebSocket, OpenAI Realtime-compatible (docs/realtime.md)."""
