"""EngineSocket: the API process's two ZMQ sockets to the engine, and the framing of what crosses them.

Both sockets are bound here, on ipc paths in a private temp dir, and the engine connects. Sends and
receives go through zmq.asyncio and never block the event loop; control messages (abort, shutdown) go
out at once without awaiting, on the same underlying socket, so a ``finally`` block can send them.
"""

from __future__ import annotations

import logging
import shutil
import tempfile

import numpy as np
import zmq
import zmq.asyncio

from voxlane.messages import EngineInput, EngineOutput, decode_output, encode_input

log = logging.getLogger(__name__)


class EngineSocket:
    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="voxlane-")
        self._ctx = zmq.asyncio.Context()
        self._to_engine = self._ctx.socket(zmq.PUSH)
        self._from_engine = self._ctx.socket(zmq.PULL)
        self._to_engine.setsockopt(zmq.LINGER, 0)
        self._from_engine.setsockopt(zmq.LINGER, 0)
        self.input_addr = f"ipc://{self._dir}/input"
        """Where the engine connects to receive (its PULL)."""
        self.output_addr = f"ipc://{self._dir}/output"
        """Where the engine connects to send (its PUSH)."""
        self._to_engine.bind(self.input_addr)
        self._control: zmq.Socket[bytes] = zmq.Socket.shadow(self._to_engine.underlying)
        self._from_engine.bind(self.output_addr)

    async def send(self, msg: EngineInput, features: np.ndarray | None = None) -> None:
        await self._to_engine.send_multipart(encode_input(msg, features), copy=False)

    def send_now(self, msg: EngineInput) -> bool:
        """Send a control message without awaiting. False when it could not go out (the engine's queue is
        full or gone)."""
        try:
            self._control.send_multipart(encode_input(msg), flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    async def recv(self) -> tuple[EngineOutput, np.ndarray | None]:
        """The engine's next message and its PCM frame (speech audio only); malformed ones are logged and
        skipped."""
        while True:
            frames = await self._from_engine.recv_multipart()
            try:
                return decode_output(frames)
            except Exception:
                log.exception("malformed message from the engine")

    def close(self) -> None:
        self._ctx.destroy(linger=0)
        shutil.rmtree(self._dir, ignore_errors=True)
