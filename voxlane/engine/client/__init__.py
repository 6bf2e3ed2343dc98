"""The API process's side of the engine: start and watch its process, talk to it over ZMQ, route its
results to the requests waiting for them. Imports no model runtime.

- ``local.py``: ``EngineClient``, the client of the local engine process (admission, sending, routing,
  voice probes, restarts)
- ``streams.py``: ``ResultStream``, one request's results in index order (windows, speech audio, a probe)
- ``transport.py``: ``EngineSocket``, the two ZMQ sockets and their framing
- ``supervisor.py``: ``EngineProcess``, spawning, watching and stopping the engine process
"""

from __future__ import annotations

from voxlane.engine.client.local import EngineClient, EngineStartFailed, SpeechResult
from voxlane.engine.client.streams import ResultStream

__all__ = ["EngineClient", "EngineStartFailed", "ResultStream", "SpeechResult"]
