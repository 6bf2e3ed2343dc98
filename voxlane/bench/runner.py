"""The load generator: one timed run of one backend at one concurrency level.

Each concurrency slot owns one ``RawClient`` (bench/http.py) holding one connection, so slots never wait on a
shared pool. A dispatcher releases requests at Poisson arrival times (or all at once for an infinite
rate); a free slot takes the next released request, and its latency is measured from when it is sent.
The health probe runs in its own process (see health_probe.py). Inputs are read before the clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from voxlane.bench import server_counters
from voxlane.bench.backends import RequestOutput, RequestSpec, finish, prepare, request_fn, transcribe
from voxlane.bench.datasets import AudioSample, load_audio_dataset, load_text_dataset, request_order
from voxlane.bench.health_probe import HealthProbe, ProbeResult
from voxlane.bench.http import RawClient
from voxlane.bench.options import BenchOptions

READY_POLL_S = 0.5
ASR_CHECK_CONCURRENCY = 2


@dataclass
class RunOutcome:
    outputs: list[RequestOutput]
    wall_s: float
    client_cpu_s: float
    """CPU time of the thread running the load generator's event loop during the timed run."""
    process_cpu_s: float
    """CPU time of the whole benchmark process (generator, probe thread) during the timed run."""
    probe: ProbeResult | None
    ready: bool
    ready_error: str
    dataset_size: int
    asr_outputs: list[RequestOutput] | None = None
    server_windows: dict[str, Any] | None = None
    """The server's Whisper windows over the timed run (bench/server_counters.py; transcription only)."""


def load_inputs(opts: BenchOptions) -> list[Any]:
    """The dataset items, read into memory. Raises DatasetError."""
    if opts.backend == "openai-audio":
        if not opts.dataset:
            raise ValueError(
                "--backend openai-audio needs --dataset (a manifest .jsonl, a directory of audio files "
                "or hf:NAME[:split])"
            )
        return load_audio_dataset(opts.dataset, min_duration_s=opts.min_duration_s, max_duration_s=opts.max_duration_s)
    return load_text_dataset(opts.dataset)


def request_spec(opts: BenchOptions) -> RequestSpec:
    return RequestSpec(
        base_url=opts.base_url,
        model=opts.model,
        extra_body=opts.extra_body,
        timeout_s=opts.request_timeout_s,
        voice=opts.voice,
        response_format=opts.response_format,
        sample_rate=opts.sample_rate,
        keep_audio=opts.asr_check_url is not None,
    )


def run(opts: BenchOptions, items: Sequence[Any]) -> RunOutcome:
    return asyncio.run(_run(opts, items))


async def _run(opts: BenchOptions, items: Sequence[Any]) -> RunOutcome:
    headers = {"Authorization": f"Bearer {opts.api_key}"} if opts.api_key else {}
    ready, ready_error = True, ""
    if opts.ready_check_timeout_s > 0:
        ready, ready_error = await wait_ready(opts.base_url, opts.ready_check_timeout_s, headers)
        if not ready:
            print(f"voxlane bench: warning: {ready_error}; running anyway, failures will be counted", file=sys.stderr)
    n = opts.num_prompts or len(items)
    order = request_order(len(items), n, opts.seed)
    spec = request_spec(opts)
    fn = request_fn(opts.backend)
    bodies = [prepare(opts.backend, spec, item) for item in items]

    if opts.num_warmups and ready:
        async with _client(headers) as client:
            for i in range(opts.num_warmups):
                await fn(client, spec, bodies[order[i % n]])

    probe = None
    if opts.probe_health:
        probe = HealthProbe(opts.base_url + opts.probe_health, opts.probe_interval_ms / 1000.0)
    outputs: list[RequestOutput | None] = [None] * n
    queue: asyncio.Queue[int | None] = asyncio.Queue()
    slots = min(opts.max_concurrency, n)
    progress = _progress(n, opts.show_progress)
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(_client(headers)) for _ in range(slots)]

        async def worker(client: RawClient) -> None:
            while (i := await queue.get()) is not None:
                outputs[i] = await fn(client, spec, bodies[order[i]])
                if progress is not None:
                    progress.update(1)

        counting = opts.backend == "openai-audio"
        before = await asyncio.to_thread(server_counters.scrape, opts.base_url, headers) if counting else None
        if probe:
            probe.start()
        cpu0, proc0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
        workers = [asyncio.create_task(worker(c)) for c in clients]
        await _dispatch(queue, n, slots, opts.request_rate, opts.seed)
        await asyncio.gather(*workers)
        wall = time.perf_counter() - t0
        cpu, proc = time.thread_time() - cpu0, time.process_time() - proc0
    after = await asyncio.to_thread(server_counters.scrape, opts.base_url, headers) if before is not None else None
    probe_result = probe.stop() if probe else None
    if progress is not None:
        progress.close()
    done = [o for o in outputs if o is not None]
    for o in done:
        finish(o)
    outcome = RunOutcome(done, wall, cpu, proc, probe_result, ready, ready_error, len(items))
    outcome.server_windows = server_counters.window_figures(before, after)
    if opts.asr_check_url:
        outcome.asr_outputs = await _asr_check(opts, done, headers)
    return outcome


async def _dispatch(queue: asyncio.Queue[int | None], n: int, slots: int, rate: float, seed: int) -> None:
    """Release request i at its arrival time (Poisson with ``rate`` per second; all at once for inf)."""
    rng = random.Random(seed + 1)
    start = time.perf_counter()
    arrival = 0.0
    for i in range(n):
        if not math.isinf(rate):
            if i:
                arrival += rng.expovariate(rate)
            delay = start + arrival - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        queue.put_nowait(i)
    for _ in range(slots):
        queue.put_nowait(None)


_TLS: ssl.SSLContext | None = None


def _client(headers: dict[str, str]) -> RawClient:
    """One connection. The TLS context is built once and shared: loading the CA store costs ~30 ms a client."""
    global _TLS
    if _TLS is None:
        import certifi  # what httpx itself verifies against

        _TLS = ssl.create_default_context(cafile=certifi.where())
    return RawClient(headers, _TLS)


async def wait_ready(base_url: str, timeout_s: float, headers: dict[str, str] | None = None) -> tuple[bool, str]:
    """Poll GET /health until it answers 200; (ready, what was last seen)."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    async with httpx.AsyncClient(headers=headers or {}, timeout=min(5.0, timeout_s)) as client:
        while True:
            try:
                response = await client.get(base_url + "/health")
                if response.status_code == 200:
                    return True, ""
                last = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if time.monotonic() + READY_POLL_S > deadline:
                return False, f"{base_url}/health did not answer 200 within {timeout_s:g} s (last: {last})"
            await asyncio.sleep(READY_POLL_S)


async def _asr_check(
    opts: BenchOptions, outputs: Sequence[RequestOutput], headers: dict[str, str]
) -> list[RequestOutput]:
    """Transcribe every returned audio (after the timed run, so it does not load the server under test)."""
    assert opts.asr_check_url is not None
    spec = RequestSpec(
        base_url=opts.asr_check_url, model=opts.asr_check_model, extra_body={}, timeout_s=opts.request_timeout_s
    )
    todo = [o for o in outputs if o.success and o.audio]
    results: list[RequestOutput] = []
    queue: asyncio.Queue[RequestOutput] = asyncio.Queue()
    for o in todo:
        queue.put_nowait(o)

    async def worker() -> None:
        async with _client(headers) as client:
            while not queue.empty():
                o = queue.get_nowait()
                sample = AudioSample("speech.wav", o.audio or b"", o.output_audio_s, o.reference)
                results.append(await transcribe(client, spec, prepare("openai-audio", spec, sample)))

    await asyncio.gather(*(worker() for _ in range(ASR_CHECK_CONCURRENCY)))
    return results


def _progress(total: int, enabled: bool) -> Progress | None:
    """A progress line on stderr, only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None
    return Progress(total)


class Progress:
    """``done/total requests, percent, elapsed`` on one stderr line, redrawn at most every 0.1 s."""

    REDRAW_S = 0.1

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.start = time.perf_counter()
        self.drawn = 0.0
        self._draw()

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.drawn >= self.REDRAW_S or self.done == self.total:
            self._draw()

    def close(self) -> None:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()

    def _draw(self) -> None:
        self.drawn = time.perf_counter()
        width = 30
        filled = width * self.done // max(1, self.total)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} requests "
            f"{100 * self.done / max(1, self.total):3.0f}%  {self.drawn - self.start:6.1f} s"
        )
        sys.stderr.flush()
