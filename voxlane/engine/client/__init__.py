"""The API process's side of the engine: start and watch its process, talk to it over ZMQ, route its
results to the requests waiting for them. Imports no model runtime.

- ``handle.py``: ``EngineHandle``, the Protocol the server holds (both engine clients satisfy it)
- ``front.py``: ``EngineFront``, what both clients share: admission, open streams, the serving state
- ``local.py``: ``EngineClient``, the client of the local engine process (sending, routing, voice probes,
  model loads, restarts)
- ``admission.py``: ``Admission``, the bounded queues and the Retry-After of a refusal
- ``streams.py``: ``ResultStream``, one request's results in index order (windows, speech audio, a probe)
- ``transport.py``: ``EngineSocket``, the two ZMQ sockets and their framing
- ``supervisor.py``: ``EngineProcess``, spawning, watching and stopping the engine process
"""

from __future__ import annotations

from voxlane.engine.client.front import EngineFront
from voxlane.engine.client.handle import EngineHandle, EngineState, SpeechResult
from voxlane.engine.client.local import EngineClient, EngineStartFailed
from voxlane.engine.client.streams import ResultStream

__all__ = [
    "EngineClient",
    "EngineFront",
    "EngineHandle",
    "EngineStartFailed",
    "EngineState",
    "ResultStream",
    "SpeechResult",
]
