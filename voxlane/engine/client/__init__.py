"""The API process's side of the engine: start and watch its process, talk to it over ZMQ, route its
results to the requests waiting for them. Imports no model runtime.

- ``router.py``: ``EngineClient``, the facade the routes hold (admission, sending, routing, voice probes)
- ``streams.py``: ``ResultStream``, one request's results in index order (windows, speech audio, a probe)
- ``transport.py``: ``EngineSocket``, the two ZMQ sockets and their framing
- ``supervisor.py``: ``EngineProcess``, spawning, watching and stopping the engine process
"""

from __future__ import annotations

from voxlane.engine.client.router import EngineClient, EngineStartFailed, SpeechResult
from voxlane.engine.client.streams import ResultStream

__all__ = ["EngineClient", "EngineStartFailed", "ResultStream", "SpeechResult"]
