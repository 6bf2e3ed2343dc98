"""EngineClient against a fake engine: the test holds the other ends of the client's two ZMQ sockets and
plays the engine (no engine process, no models)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
import zmq
import zmq.asyncio

from voxlane.config import ServerConfig
from voxlane.engine.client import EngineClient, EngineHandle
from voxlane.engine.client.supervisor import EngineProcess
from voxlane.errors import EngineUnavailable, QueueFull
from voxlane.messages import (
    Abort,
    EngineInput,
    EngineOutput,
    ProbeVoice,
    Ready,
    SpeechAudio,
    SpeechUnit,
    TranscribeOptions,
    VoiceProbed,
    WindowRequest,
    WindowResult,
    decode_input,
    encode_output,
)


class FakeProcess(EngineProcess):
    """Stands in for the engine process: alive until the test kills it."""

    def __init__(self, config: ServerConfig, input_addr: str, output_addr: str) -> None:
        super().__init__(config, input_addr, output_addr)
        self.dead = False

    def start(self) -> None:
        pass

    @property
    def alive(self) -> bool:
        return not self.dead

    @property
    def exitcode(self) -> int | None:
        return -9 if self.dead else None

    async def stop(self, grace_s: float = 1.0) -> None:
        self.dead = True


class FakeEngine:
    """The engine's ends of the sockets: receives what the client sends, sends what the test says."""

    def __init__(self, client: EngineClient) -> None:
        self.ctx = zmq.asyncio.Context()
        self.inbox = self.ctx.socket(zmq.PULL)
        self.inbox.connect(client.socket.input_addr)
        self.outbox = self.ctx.socket(zmq.PUSH)
        self.outbox.connect(client.socket.output_addr)

    async def send(self, msg: EngineOutput, pcm: np.ndarray | None = None) -> None:
        await self.outbox.send_multipart(encode_output(msg, pcm))

    async def recv(self, timeout_s: float = 2.0) -> EngineInput:
        frames = await asyncio.wait_for(self.inbox.recv_multipart(), timeout_s)
        return decode_input(frames)[0]

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def run(
    scenario: Callable[[EngineClient, FakeEngine], Awaitable[None]],
    on_restart: Callable[[], None] | None = None,
    **config: Any,
) -> None:
    async def main() -> None:
        client = EngineClient(ServerConfig(**config), launch=FakeProcess, on_restart=on_restart)
        engine = FakeEngine(client)
        try:
            await engine.send(Ready("fake", False, 80))
            await client.start(timeout_s=5)
            await scenario(client, engine)
        finally:
            await client.close()
            engine.close()

    asyncio.run(main())


def window(request_id: str, index: int, count: int) -> WindowRequest:
    return WindowRequest(request_id, index, count, 0.0, 30.0, 3000, 80, TranscribeOptions())


def unit(request_id: str, index: int, last: bool) -> SpeechUnit:
    return SpeechUnit(request_id, index, last, "/m.onnx", "/m.onnx.json", [1, 2, 3], 1.0, 0.667, 0.8)


async def collect(stream_results: Any) -> list[Any]:
    return [item async for item in stream_results]


def test_the_client_is_an_engine_handle() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        assert isinstance(client, EngineHandle)

    run(scenario)


def test_results_reach_their_own_stream_in_index_order() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("asr", [30.0] * 2) as asr, client.speech("tts", [10] * 2) as tts:
            features = np.ones((80, 3000), dtype=np.float32)
            await client.send(window("asr", 0, 2), features)
            await client.send(unit("tts", 0, False))
            sent = [await engine.recv(), await engine.recv()]
            assert [type(m) for m in sent] == [WindowRequest, SpeechUnit]
            # The engine finishes out of order and interleaves the two requests.
            await engine.send(WindowResult("asr", 1, "en", []))
            await engine.send(SpeechAudio("tts", 1, 22050), np.full(5, 1, dtype=np.int16))
            await engine.send(SpeechAudio("tts", 0, 22050), np.full(3, 0, dtype=np.int16))
            await engine.send(WindowResult("asr", 0, "en", []))
            windows = await collect(asr.results(5))
            audio = await collect(tts.results(5))
        assert [r.index for r in windows] == [0, 1] and all(r.request_id == "asr" for r in windows)
        assert [(m.index, len(pcm)) for m, pcm in audio] == [(0, 3), (1, 5)]
        assert asr.finished and tts.finished
        assert client.queued_windows == 0 and client.speech_streams == 0

    run(scenario)


def test_a_stream_left_early_is_aborted_and_a_finished_one_is_not() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("done", [30.0] * 1) as done:
            await engine.send(WindowResult("done", 0, "en", []))
            assert len(await collect(done.results(5))) == 1
        async with client.speech("left", [10] * 3) as left:
            await engine.send(SpeechAudio("left", 0, 22050), np.zeros(4, dtype=np.int16))
            async for _ in left.results(5):
                break  # the reader goes away after the first unit
        assert await engine.recv() == Abort("left")  # the first thing sent: no abort for the finished one

    run(scenario)


def test_the_engines_death_fails_every_open_stream() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("asr", [30.0] * 2) as asr, client.speech("tts", [10] * 1) as tts:
            await engine.send(WindowResult("asr", 0, "en", []))
            probe = asyncio.ensure_future(client.probe_voice("/m.onnx", "/m.onnx.json", timeout_s=30))
            assert isinstance(await engine.recv(), ProbeVoice)
            readers = [asyncio.ensure_future(collect(s.results(30))) for s in (asr, tts)]
            for _ in range(5):  # loop steps, not time: the readers reach their wait for results
                await asyncio.sleep(0)
            assert isinstance(client.process, FakeProcess)
            client.process.dead = True
            outcomes = await asyncio.wait_for(asyncio.gather(*readers, probe, return_exceptions=True), 5)
        assert all(isinstance(o, EngineUnavailable) for o in outcomes), outcomes
        assert all(o.status_code == 503 and "the engine stopped" in o.message for o in outcomes)
        assert all(
            o.retry_after_s is not None and o.headers() == {"Retry-After": str(o.retry_after_s)} for o in outcomes
        )
        assert not client.healthy and client.state == "restarting"
        with pytest.raises(EngineUnavailable, match="restarting") as raised:
            client.check_alive()
        assert raised.value.retry_after_s is not None and raised.value.retry_after_s >= 1
        with pytest.raises(EngineUnavailable):
            async with client.request("late", [30.0] * 1):
                pass

    run(scenario)


def test_a_dead_engine_is_started_again_on_fresh_sockets() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        old_process, old_addr = client.process, client.socket.input_addr
        assert isinstance(old_process, FakeProcess)
        old_process.dead = True
        while client.process is old_process:  # the backoff (10 ms), then a new process on new sockets
            await asyncio.sleep(0.01)
        assert client.state == "restarting" and client.restarts == 1 and restarts == [1]
        assert client.socket.input_addr != old_addr
        reborn = FakeEngine(client)
        try:
            await reborn.send(Ready("fake", False, 80))
            while not client.healthy:
                await asyncio.sleep(0.01)
            async with client.request("again", [30.0]) as again:
                await client.send(window("again", 0, 1), np.ones((80, 3000), dtype=np.float32))
                assert isinstance(await reborn.recv(), WindowRequest)
                await reborn.send(WindowResult("again", 0, "en", []))
                assert len(await collect(again.results(5))) == 1
        finally:
            reborn.close()

    restarts: list[int] = []
    run(scenario, on_restart=lambda: restarts.append(1), engine_restart_backoff_s=0.01)


def test_a_crash_loop_stops_the_restarts_and_says_why() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        assert isinstance(client.process, FakeProcess)
        client.process.dead = True
        while client.state != "failed":
            await asyncio.sleep(0.01)
        assert client.restarts == 0
        assert client.failure is not None and "--engine-crash-loop-deaths" in client.failure
        with pytest.raises(EngineUnavailable, match="stopped restarting it") as raised:
            client.check_alive()
        assert raised.value.retry_after_s is None  # it will not come back by itself

    run(scenario, engine_crash_loop_deaths=1)


def test_a_result_for_an_unknown_request_is_dropped() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("asr", [30.0] * 1) as asr:
            await engine.send(WindowResult("nobody", 0, "en", []))
            await engine.send(SpeechAudio("asr", 0, 22050), np.zeros(2, dtype=np.int16))  # no such speech stream
            await engine.send(VoiceProbed("gone-probe"))
            await engine.send(WindowResult("asr", 0, "en", []))
            results = await collect(asr.results(5))
        assert [(r.request_id, r.index) for r in results] == [("asr", 0)]
        assert client.healthy

    run(scenario)


def test_a_stream_that_times_out_says_so() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("slow", [30.0] * 2) as slow:
            await engine.send(WindowResult("slow", 0, "en", []))
            got: list[WindowResult] = []
            with pytest.raises(EngineUnavailable) as raised:
                async for result in slow.results(0.3):
                    got.append(result)
        assert [r.index for r in got] == [0]
        error = raised.value
        assert error.status_code == 503 and error.code == "engine_unavailable"
        assert error.message.startswith("the engine did not finish this audio within 0.3 s (--request-timeout-s)")
        assert await engine.recv() == Abort("slow")

    run(scenario)


def test_a_voice_probe_gets_the_engines_verdict() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        probe = asyncio.ensure_future(client.probe_voice("/v/model.onnx", "/v/model.onnx.json", timeout_s=5))
        msg = await engine.recv()
        assert isinstance(msg, ProbeVoice) and (msg.model_path, msg.config_path) == (
            "/v/model.onnx",
            "/v/model.onnx.json",
        )
        await engine.send(VoiceProbed(msg.request_id, "model", "not an ONNX file"))
        verdict = await asyncio.wait_for(probe, 5)
        assert (verdict.problem, verdict.reason) == ("model", "not an ONNX file")
        with pytest.raises(EngineUnavailable, match="checking this voice"):
            await client.probe_voice("/v/model.onnx", "/v/model.onnx.json", timeout_s=0.2)

    run(scenario)


def test_admission_limits_answer_429_with_retry_after() -> None:
    async def scenario(client: EngineClient, engine: FakeEngine) -> None:
        async with client.request("big", [30.0] * 3):
            with pytest.raises(QueueFull) as raised:
                async with client.request("more", [30.0] * 2):
                    pass
            assert (raised.value.status_code, raised.value.code) == (429, "queue_full")
            assert 1 <= int(raised.value.headers()["Retry-After"]) <= 60
        async with client.speech("one", [10]):
            with pytest.raises(QueueFull, match="--max-speech-streams"):
                async with client.speech("two", [10]):
                    pass

    run(scenario, max_queued_windows=4, max_speech_streams=1)
