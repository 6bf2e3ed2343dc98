"""/metrics: the API process's Prometheus registry (prometheus-client), one per app.

What is on it, and who keeps it:
- HTTP, by method, route template (``/v1/models/{model_id}``, never the raw path; ``unmatched`` for a 404
  that matched no route) and status: ``voxlane_request_duration_seconds`` (from arrival to a response's
  last byte, a stream's included) and ``voxlane_requests_total``; ``RequestMetrics``, a pure ASGI
  middleware, observes them.
- Transcription and speech: audio seconds, windows, continuation passes, streams, stream errors, time to
  first text and to first audio, audio not yet transcribed; the routes update them on the event loop.
- The engine, read from the ``EngineClient`` at scrape time: up, queued windows, open speech streams, the
  counters the engine sends once a second (``EngineStats``: waiting windows and units, running batches,
  batch size and batch duration histograms) and its process (``voxlane_engine_process_*``: memory, CPU
  seconds, open files, read from /proc/<engine pid>). ``voxlane_engine_restarts_total`` is counted by
  whoever restarts the engine (``Metrics.engine_restarts.inc()``).
- The executors, read at scrape time: workers, busy workers and queued jobs per pool.
- The event loop's lag and stalls, garbage-collection pauses: loopmon.py's monitors.
- The API process itself: prometheus-client's ``process_*`` (memory, CPU seconds, open files).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxlane import messages
from voxlane.engine.client import EngineHandle
from voxlane.server.executors import Executors
from voxlane.server.loopmon import GcPauseMonitor, LoopStallMonitor

# No ``*_created`` series next to every counter and histogram: nothing here reads them, and they would
# double the page.
disable_created_metrics()

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Requests span 5 ms (/health) to minutes (a long transcription), as do their first text and audio."""
_HTTP_LABELS = ("method", "route", "status")


class Metrics:
    """Every metric the API process shows. The routes update theirs on the event loop; the rest is read
    when /metrics is scraped."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter("voxlane_requests", "HTTP requests.", _HTTP_LABELS, registry=registry)
        self.request_seconds = Histogram(
            "voxlane_request_duration_seconds",
            "From a request's arrival to its response's last byte (the whole stream for streamed responses).",
            _HTTP_LABELS,
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.audio_seconds = Counter(
            "voxlane_audio_seconds", "Seconds of audio transcribed successfully.", registry=registry
        )
        self.windows = Counter("voxlane_windows", "30 s windows transcribed.", registry=registry)
        self.windows_by_beam = Counter(
            "voxlane_windows_by_beam",
            "Windows transcribed, by the beam of their first decode (1: greedy; load-adaptive decoding, "
            "--adaptive-queue-s).",
            ["beam_size"],
            registry=registry,
        )
        self.continuations = Counter(
            "voxlane_continuation_passes",
            "Extra decode passes over windows whose decode stopped early or skipped speech.",
            registry=registry,
        )
        self.audio_transfers = Counter(
            "voxlane_audio_transfers",
            "Uploads, windows' samples and windows' features handed between the API process and its audio "
            "worker processes, by way: 'shared_memory' or 'pipe' (no room in /dev/shm; audio/shared.py).",
            ("way",),
            registry=registry,
        )
        for way in ("shared_memory", "pipe"):
            self.audio_transfers.labels(way)  # both on the page from the start, at 0
        self.first_text_seconds = Histogram(
            "voxlane_transcription_first_text_seconds",
            "From a transcription's arrival to its first window's text, streamed or not.",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.queued_audio_seconds = Gauge(
            "voxlane_engine_queued_audio_seconds",
            "Seconds of audio in admitted transcriptions' windows whose text has not come back yet.",
            registry=registry,
        )
        self.speaker_checks = Counter(
            "voxlane_speaker_count_checks",
            "Candidate speakers that diarization had the check encoder hear (--speaker-check-model), by step: "
            "'merge' (a speaker with little speech, against its nearest speakers), 'add' (the count step's next "
            "speaker), 'split' (a speaker's two halves) or 'regions' (a split its halves' speech left unsure, "
            "decided by each of the speaker's regions heard alone), and by verdict: 'speaker' (kept apart) or "
            "'same' (one voice: merged, or not added or split).",
            ["step", "verdict"],
            registry=registry,
        )
        self.speech_seconds = Counter(
            "voxlane_speech_seconds", "Seconds of speech synthesised and sent.", registry=registry
        )
        self.speech_streams = Counter("voxlane_speech_streams", "Speech streams that completed.", registry=registry)
        self.speech_encoders = Gauge(
            "voxlane_speech_encoders_open",
            "Speech streams whose encoder is open in an encode worker (back to 0 when no stream is running).",
            registry=registry,
        )
        self.first_audio_seconds = Histogram(
            "voxlane_speech_first_audio_seconds",
            "From a speech request's arrival to its first encoded audio.",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.stream_errors = Counter(
            "voxlane_stream_errors", "Streams that ended with an error after their first byte.", registry=registry
        )
        self.engine_restarts = Counter(
            "voxlane_engine_restarts", "Times the engine process was started again after it died.", registry=registry
        )
        self.realtime_sessions = Gauge(
            "voxlane_realtime_sessions", "Live transcription WebSockets (/v1/realtime) open now.", registry=registry
        )
        self.realtime_turns = Counter(
            "voxlane_realtime_turns", "Turns of live sessions committed and transcribed.", registry=registry
        )
        self.realtime_partials = Counter(
            "voxlane_realtime_partials", "Partial decodes of live turns still open.", registry=registry
        )
        self.realtime_decodes = Counter(
            "voxlane_realtime_decodes",
            "Decodes live sessions sent the engine, by kind ('partial' or 'final') and the beam size they asked "
            "for (partials: 1; finals: --realtime-beam-size, or --beam-size when it is 0).",
            ("kind", "beam_size"),
            registry=registry,
        )
        self.realtime_short_finals = Counter(
            "voxlane_realtime_short_finals",
            "Final decodes of live turns with at most 8 s of audio encoded short (--short-final-pad-s), by "
            "outcome: 'short' (read there) or 'whole_retry' (the short read looped; read again on 30 s).",
            ("outcome",),
            registry=registry,
        )
        self.realtime_pause_decodes = Counter(
            "voxlane_realtime_pause_decodes",
            "Final decodes started at a pause of a live turn, by outcome: 'final' (the silence ended the turn: "
            "the decode is its text) or 'speech_went_on' (its text went out as a delta).",
            ("outcome",),
            registry=registry,
        )
        self.realtime_context_seconds = Histogram(
            "voxlane_realtime_context_seconds",
            "Audio of a live session's previous turns that a final decode read before its own, their text "
            "forced as the start of its transcript (0: read alone).",
            buckets=(0.0, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0),
            registry=registry,
        )
        self.realtime_final_seconds = Histogram(
            "voxlane_realtime_final_seconds",
            "From a live turn's commit (by the client, or by turn detection) to its completed text.",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.realtime_errors = Counter(
            "voxlane_realtime_errors", "Error events sent to live sessions, by code.", ("code",), registry=registry
        )
        self.loop = LoopStallMonitor()
        self.gc = GcPauseMonitor()
        registry.register(self.loop)
        registry.register(self.gc)
        ProcessCollector(registry=registry)

    def watch(self, engine: EngineHandle, executors: Executors, name_of: Callable[[str], str] = str) -> None:
        """Show ``engine`` and ``executors`` too, read at each scrape; ``name_of`` names a model by its directory."""
        self.registry.register(_EngineCollector(engine, name_of))
        self.registry.register(_ExecutorCollector(executors))

        def engine_pid() -> int | str:
            stats = engine.stats
            return stats.pid if stats is not None and engine.healthy else "none"  # none: no /proc entry, no series

        ProcessCollector(namespace="voxlane_engine", pid=engine_pid, registry=self.registry)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.request_seconds.labels(*labels).observe(seconds)

    def render(self, accept: str) -> tuple[bytes, str]:
        """The page and its content type: Prometheus text, or OpenMetrics when ``accept`` asks for it."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


class RequestMetrics:
    """Pure ASGI middleware (no body buffering, no extra task): times each HTTP request from its arrival
    to the end of its response, and labels it with the route template the router matched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client gets when the app raises before it answers

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            state = getattr(scope["app"].state, "voxlane", None)
            if state is not None:
                # The router put the matched route in the scope; its template keeps the label set small.
                route = getattr(scope.get("route"), "path_format", None) or "unmatched"
                state.metrics.observe_request(scope["method"], route, status, time.perf_counter() - start)


class _EngineCollector:
    def __init__(self, engine: EngineHandle, name_of: Callable[[str], str]) -> None:
        self.engine = engine
        self.name_of = name_of
        """A Whisper model's name, from its directory."""

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        up = engine.healthy
        yield GaugeMetricFamily("voxlane_engine_up", "1 while the engine process serves, else 0.", value=int(up))
        yield GaugeMetricFamily(
            "voxlane_engine_queued_windows",
            "Windows of the transcriptions in flight, reserved at admission (--max-queued-windows bounds them).",
            value=engine.queued_windows,
        )
        yield GaugeMetricFamily(
            "voxlane_engine_speech_streams",
            "Speech streams open (--max-speech-streams bounds them).",
            value=engine.speech_streams,
        )
        stats = engine.stats
        if stats is None:
            return
        if up:  # a dead engine's queues are gone; its histograms stay as they were
            yield GaugeMetricFamily(
                "voxlane_engine_waiting_windows",
                "Windows in the engine's scheduler, waiting for a batch.",
                value=stats.waiting_windows,
            )
            yield GaugeMetricFamily(
                "voxlane_engine_waiting_speech_units",
                "Speech units (sentences) in the engine, waiting for the speech thread.",
                value=stats.waiting_speech_units,
            )
            yield GaugeMetricFamily(
                "voxlane_engine_running_batches", "Whisper batches running on the model.", value=stats.running_batches
            )
        yield from self._models(stats.models if up else [])
        yield _histogram("voxlane_engine_batch_size_windows", "Windows per Whisper batch.", stats.batch_size)
        yield _histogram(
            "voxlane_engine_batch_duration_seconds",
            "How long each Whisper batch ran on the model.",
            stats.batch_seconds,
        )

    def _models(self, models: list[messages.ModelState]) -> Iterator[Metric]:
        """The Whisper models the engine has loaded since it started, labelled by the name clients send."""
        yield GaugeMetricFamily(
            "voxlane_engine_models_loaded",
            "Whisper models loaded in the engine now.",
            value=sum(m.loaded for m in models),
        )
        label = ["model"]
        memory = GaugeMetricFamily(
            "voxlane_engine_model_memory_bytes",
            "Resident memory the engine grew by when it loaded each Whisper model loaded now.",
            labels=label,
        )
        loads = CounterMetricFamily("voxlane_engine_model_loads", "Loads of each Whisper model.", labels=label)
        unloads = CounterMetricFamily("voxlane_engine_model_unloads", "Unloads of each Whisper model.", labels=label)
        seconds = CounterMetricFamily(
            "voxlane_engine_model_load_seconds", "Seconds the loads of each Whisper model took.", labels=label
        )
        for m in models:
            name = [self.name_of(m.model)]
            if m.loaded:
                memory.add_metric(name, m.memory_bytes)
            loads.add_metric(name, m.loads)
            unloads.add_metric(name, m.unloads)
            seconds.add_metric(name, m.load_seconds)
        yield from (memory, loads, unloads, seconds)


def _histogram(name: str, documentation: str, histogram: messages.Histogram) -> HistogramMetricFamily:
    buckets = [(floatToGoString(bound), count) for bound, count in zip(histogram.bounds, histogram.buckets)]
    return HistogramMetricFamily(
        name, documentation, buckets=[*buckets, ("+Inf", histogram.count)], sum_value=histogram.total
    )


class _ExecutorCollector:
    def __init__(self, executors: Executors) -> None:
        self.executors = executors

    def collect(self) -> Iterator[Metric]:
        labels = ["pool"]
        workers = GaugeMetricFamily("voxlane_executor_workers", "Workers of each executor pool.", labels=labels)
        busy = GaugeMetricFamily("voxlane_executor_busy_workers", "Workers running a job.", labels=labels)
        queued = GaugeMetricFamily("voxlane_executor_queued_jobs", "Jobs waiting for a worker.", labels=labels)
        for load in self.executors.load():
            workers.add_metric([load.pool], load.workers)
            busy.add_metric([load.pool], load.busy)
            queued.add_metric([load.pool], load.queued)
        yield from (workers, busy, queued)
