"""EngineCore: ``step(now)`` = collect finished batches -> schedule -> execute. No I/O, no sleeps.

Batches run on ``engine_workers`` execution threads (CTranslate2 releases the GIL; with inter_threads
equal to the worker count each thread has its own model replica). ``step`` never waits for them: it
starts what the scheduler makes due while a worker is free, and returns the results of batches that
finished since the last call. The process loop (proc.py) wakes on new input, on a finished batch
(``on_batch_done``) or at the scheduler's next deadline.

A window whose decode stopped early, or whose words skipped speech, comes back from the runner with
``resume_s``: ``_collect`` queues its continuation (the rest of the window, carrying the segments so far) with
the scheduler, where it is due at once and shares batches with other requests' windows, and sends the window's
result after its last pass.

Several Whisper models: each window names its model (``WindowRequest.model``, "" for the
default). A window of a model that is not loaded waits beside the scheduler while ``ModelPool``
(model_pool.py) has it loaded on the loader thread, one load at a time, which never blocks ``step``; it then
joins the scheduler, whose batches never mix models. Idle models are unloaded after ``--model-ttl-s``, or
to make room within ``--max-loaded-models``, and the engine hands the freed memory back to the system.
Speaker embeddings (``SpeakerWindow``: a diarized transcription's windows and reference clips) run on
their own executor, ``voxlane-speaker`` (one thread), beside Whisper's workers, first come first served,
up to SPEAKER_WINDOWS queued windows in one call, a request's windows held until all of them (its
``count``) or SPEAKER_WINDOWS windows are queued, so that their partials share batches;
``step`` hands out their ``SpeakerResult``s as they finish.

Speech units go to ``self.tts`` (engine/tts.py), which has its own execution threads and thread budget;
``step`` tells it whether ASR has work (``asr_busy``), so speech uses all its slots only when ASR is idle.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from voxlane.audio.features import FRAMES_PER_SECOND
from voxlane.config import EngineConfig
from voxlane.engine.model_pool import ModelPool
from voxlane.engine.request import RequestState, WindowWork
from voxlane.engine.scheduler import AsrScheduler
from voxlane.engine.stats import StatsRecorder
from voxlane.engine.tts import SpeechChunk, TtsCore
from voxlane.heap import release_freed_memory, resident_bytes
from voxlane.messages import (
    EngineStats,
    LoadModel,
    ModelLoaded,
    ModelUnloaded,
    SpeakerResult,
    SpeakerWindow,
    SpeechUnit,
    UnloadModel,
    WindowRequest,
    WindowResult,
)
from voxlane.runners.base import Runner, SpeechRunner, WindowOutput
from voxlane.runners.speaker import SpeakerEncoder

log = logging.getLogger(__name__)

_ABORTED_MEMORY = 4096  # request ids remembered after an abort, so late windows are dropped too
LIVE_HOLD_S = 2.0
"""For this long after live work (a realtime session's decode) was last seen, batch work may take at most
``engine_workers - 1`` workers: one stays free for the next live decode, which would otherwise wait for a
batch of 30 s windows to finish (seconds on a CPU). Live sessions send a decode about every second."""
SPEAKER_WINDOWS = 4
"""Speaker windows embedded together: up to about 64 partials (16 a 30 s window) in one encoder call. With
onnxruntime's LSTM a partial costs about the same at any batch (5.2-5.6 ms, docs/diarization.md); fewer calls
spare the thread's per-call work."""


class EngineCore:
    def __init__(
        self,
        runner: Runner,
        config: EngineConfig,
        on_batch_done: Callable[[], None] = lambda: None,
        tts_runners: Sequence[SpeechRunner] = (),
        tts_solo_runner: SpeechRunner | None = None,
        load_runner: Callable[[str], Runner] | None = None,
        default_memory_bytes: int = 0,
        speaker_encoder: SpeakerEncoder | None = None,
        check_encoder: SpeakerEncoder | None = None,
        now: float | None = None,
    ) -> None:
        """``tts_runners``: one per speech slot (none: an engine without speech); ``tts_solo_runner``: the
        many-thread runner for a unit that runs alone (engine/tts.py); ``load_runner``: loads the Whisper model
        in a directory (called on the loader thread; None: only ``runner``, the default model, is served);
        ``speaker_encoder``: diarization's (None: an engine that cannot diarize); ``check_encoder``: the one
        that embeds the speaker count check's stretches (``SpeakerWindow.check``; None: there is none)."""
        self.runner = runner
        self.models = ModelPool(
            config.model_path,
            runner,
            config.max_loaded_models,
            config.model_ttl_s,
            time.monotonic() if now is None else now,
            default_memory_bytes,
        )
        self._load_runner = load_runner
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="voxlane-engine-loader")
        self._load: Future[tuple[Runner, int, float]] | None = None
        self._pending: dict[str, list[WindowWork]] = {}
        """Windows of models that are not loaded yet, by model: they join the scheduler once it is."""
        self._load_waiters: dict[str, list[str]] = {}
        """Request ids of LoadModel messages waiting for their model."""
        self._running_models: dict[Future[tuple[list[_Done], list[float]]], str] = {}
        self.speaker_encoder = speaker_encoder
        self.check_encoder = check_encoder
        self._speaker_executor = ThreadPoolExecutor(1, thread_name_prefix="voxlane-speaker")
        self._speaker_queue: list[tuple[SpeakerWindow, np.ndarray]] = []
        """Windows waiting for the speaker thread (under ``_lock``): it takes up to SPEAKER_WINDOWS at once."""
        self._speaker_jobs: dict[str, int] = {}
        """Windows queued or running, by request (the loop's thread only)."""
        self._speaker_arrived: dict[str, int] = {}
        """Windows received so far of requests that have more to send (the loop's thread only)."""
        self._speakers_done: list[SpeakerResult] = []
        if config.device == "auto":  # not placed (tests): on the CPU
            config = config.placed("cpu", config.compute_type)
        self.workers = config.engine_workers
        self.scheduler = AsrScheduler(
            config.max_batch_size,
            config.max_batch_wait_ms / 1000.0,
            short_pad_frames=round(config.short_window_pad_s * FRAMES_PER_SECOND),
            live_batch_size=config.live_batch_size,
            final_pad_frames=round(config.short_final_pad_s * FRAMES_PER_SECOND),
            beam_size=config.beam_size,
            adaptive_queue_s=config.adaptive_queue_s,
        )
        self.requests: dict[str, RequestState] = {}
        self._aborted: OrderedDict[str, None] = OrderedDict()
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="voxlane-engine")
        self._running: set[Future[tuple[list[_Done], list[float]]]] = set()
        self._batch_work: set[Future[tuple[list[_Done], list[float]]]] = set()
        """Running batches of batch (not live) work."""
        self._live_seen_s = -math.inf
        self._finished: list[Future[tuple[list[_Done], list[float]]]] = []
        self._reject: list[WindowResult] = []
        """Results of windows that cannot run (their model failed to load), sent by the next ``step``."""
        self.continuations = 0
        """Continuation passes queued since start (each costs one more window)."""
        self._lock = threading.Lock()
        self._on_batch_done = on_batch_done
        self._stats = StatsRecorder()
        self.tts = (
            TtsCore(
                tts_runners,
                config.tts_order,
                on_batch_done,
                config.tts_mixed_slots,
                tts_solo_runner,
                config.tts_cost_headroom,
            )
            if tts_runners
            else None
        )

    # --- input ---------------------------------------------------------------------------------

    def add_window(self, msg: WindowRequest, features: np.ndarray, now: float) -> None:
        if msg.request_id in self._aborted:
            log.debug("dropping window %d of aborted request %s", msg.index, msg.request_id)
            return
        state = self.requests.get(msg.request_id)
        if state is None:
            state = self.requests[msg.request_id] = RequestState(msg.request_id, now, msg.count)
        if msg.is_live:
            self._live_seen_s = now
        msg.model = msg.model or self.models.default
        work = WindowWork(msg, features, arrival_s=state.arrival_s, enqueued_s=now)
        if self.models.is_loaded(msg.model):
            self.models.touch(msg.model, now)
            self.scheduler.add(work, now)
        elif self._load_runner is None:
            self._reject.append(_error_result(work, "this engine serves only its default model"))
        else:
            self._pending.setdefault(msg.model, []).append(work)
            self.models.want(msg.model)

    def load_model(self, msg: LoadModel, now: float) -> ModelLoaded | None:
        """The answer now when the model is loaded; else None, and the answer comes from a later ``step``."""
        if self.models.is_loaded(msg.model):
            self.models.touch(msg.model, now)
            return ModelLoaded(msg.request_id, msg.model)
        if self._load_runner is None:
            return ModelLoaded(msg.request_id, msg.model, "this engine serves only its default model")
        self._load_waiters.setdefault(msg.model, []).append(msg.request_id)
        self.models.want(msg.model)
        return None

    def unload_model(self, msg: UnloadModel) -> ModelUnloaded:
        """Unload the model now, or say why not: the default model never unloads, and a model with work (windows
        waiting, queued or running, or its load under way) is refused rather than waited for, so that no
        window ever finds its model gone. A model not loaded is nothing to do."""
        model = msg.model
        if model == self.models.default:
            return ModelUnloaded(msg.request_id, model, refused="the default model (the first --model) stays loaded")
        if model == self.models.loading or model in self._busy_models():
            return ModelUnloaded(
                msg.request_id, model, refused="it has work in flight; retry once its requests have finished"
            )
        was_loaded = self.models.is_loaded(model)
        self._unload(model, "asked to")
        return ModelUnloaded(msg.request_id, model, was_loaded)

    def add_speaker_window(self, msg: SpeakerWindow, mel: np.ndarray) -> None:
        if msg.request_id in self._aborted:
            return
        with self._lock:
            self._speaker_queue.append((msg, mel))
            queued = len(self._speaker_queue)
        self._speaker_jobs[msg.request_id] = self._speaker_jobs.get(msg.request_id, 0) + 1
        complete = msg.check
        if not msg.check:
            arrived = self._speaker_arrived.get(msg.request_id, 0) + 1
            complete = arrived >= msg.count
            if complete:
                self._speaker_arrived.pop(msg.request_id, None)
            else:
                self._speaker_arrived[msg.request_id] = arrived
        # A request's first windows wait for its last (its features come a window at a time, far ahead of its
        # transcription), so that their partials share the encoder's calls. Runs take the oldest
        # SPEAKER_WINDOWS each: a full call gets one run, a request's last window as many as take the whole
        # queue (a run may then find none left).
        runs = -(-queued // SPEAKER_WINDOWS) if complete else int(queued >= SPEAKER_WINDOWS)
        for _ in range(runs):
            self._speaker_executor.submit(self._embed_queued)

    def _embed_queued(self) -> None:
        """On the speaker thread: the oldest SPEAKER_WINDOWS queued windows, their partials in shared batches;
        their results, or each one's error alone."""
        with self._lock:
            work = self._speaker_queue[:SPEAKER_WINDOWS]
            del self._speaker_queue[:SPEAKER_WINDOWS]
        if not work:
            return
        results = self._embed(work)
        with self._lock:
            self._speakers_done.extend(results)
        self._on_batch_done()

    def _embed(self, work: list[tuple[SpeakerWindow, np.ndarray]]) -> list[SpeakerResult]:
        checks = [item for item in work if item[0].check]
        if checks and len(checks) < len(work):  # one encoder a batch
            return self._embed([item for item in work if not item[0].check]) + self._embed(checks)
        encoder = self.check_encoder if checks else self.speaker_encoder
        if encoder is None:
            error = "this engine has no count check encoder" if checks else "this engine has no speaker encoder"
            return [SpeakerResult(msg.request_id, msg.index, b"", 0, [], error=error) for msg, _ in work]
        try:
            embedded = encoder.embed_windows([(mel, msg.spans) for msg, mel in work])
        except Exception:
            if len(work) > 1:  # find the window that fails: never its batch
                return [result for one in work for result in self._embed([one])]
            log.exception("speaker embeddings of %s window %d failed", work[0][0].request_id, work[0][0].index)
            return [
                SpeakerResult(work[0][0].request_id, work[0][0].index, b"", 0, [], error="the speaker encoder failed")
            ]
        return [
            SpeakerResult(msg.request_id, msg.index, vectors.astype(np.float32).tobytes(), vectors.shape[1], partials)
            for (msg, _), (vectors, partials) in zip(work, embedded, strict=True)
        ]

    def add_unit(self, msg: SpeechUnit, now: float) -> None:
        if msg.request_id in self._aborted:
            return
        if self.tts is None:
            raise RuntimeError("this engine has no speech runner")
        self.tts.add(msg, now)

    def abort(self, request_id: str) -> None:
        """Forget a request: queued windows are dropped, results of running ones discarded. Idempotent."""
        self.scheduler.abort(request_id)
        for model, works in list(self._pending.items()):
            works[:] = [w for w in works if w.request_id != request_id]
            if not works:
                del self._pending[model]
                if not self._load_waiters.get(model):
                    self.models.forget(model)
        self._speaker_arrived.pop(request_id, None)
        if self._speaker_jobs.pop(request_id, None) is not None:
            with self._lock:
                self._speaker_queue = [(m, mel) for m, mel in self._speaker_queue if m.request_id != request_id]
        if self.tts is not None:
            self.tts.abort(request_id)
        self.requests.pop(request_id, None)
        self._aborted[request_id] = None
        self._aborted.move_to_end(request_id)
        while len(self._aborted) > _ABORTED_MEMORY:
            self._aborted.popitem(last=False)

    # --- the step ------------------------------------------------------------------------------

    def step(self, now: float) -> list[WindowResult | SpeakerResult | SpeechChunk | ModelLoaded]:
        outputs: list[WindowResult | SpeakerResult | SpeechChunk | ModelLoaded] = list(self._collect(now))
        outputs += self._reject
        self._reject = []
        outputs += self._manage_models(now)
        outputs.extend(self._collect_speakers())
        if self.tts is not None:
            outputs.extend(self.tts.step(now, self.asr_busy))
        while len(self._running) < self.workers:
            batch = self.scheduler.next_batch(
                now,
                live_only=self._hold_for_live(now),
                free_workers=self.workers - len(self._running),
                active_requests=len(self.requests),
            )
            if not batch:
                break
            model = batch[0].msg.model
            runner = self.models.runner(model)
            assert runner is not None, "a model with queued windows is never unloaded"
            future = self._executor.submit(self._execute, batch, runner)
            self._running.add(future)
            self._running_models[future] = model
            if not batch[0].msg.is_live:
                self._batch_work.add(future)
            future.add_done_callback(self._batch_done)
        return outputs

    def _collect_speakers(self) -> list[SpeakerResult]:
        with self._lock:
            done, self._speakers_done = self._speakers_done, []
        out = []
        for result in done:
            left = self._speaker_jobs.get(result.request_id)
            if left is None:
                continue  # aborted meanwhile
            if left > 1:
                self._speaker_jobs[result.request_id] = left - 1
            else:
                del self._speaker_jobs[result.request_id]
            out.append(result)
        return out

    def _hold_for_live(self, now: float) -> bool:
        """Whether the free worker is kept for live work: live sessions are active (LIVE_HOLD_S) and batch
        work already holds every other worker. With one worker nothing is held."""
        recent = now - self._live_seen_s < LIVE_HOLD_S
        return recent and self.workers > 1 and len(self._batch_work) >= self.workers - 1

    def next_timeout(self, now: float) -> float | None:
        """Seconds until ``step`` has something to do without new input; None when only input can help."""
        if self.tts is not None and self.tts.idle_with_work(self.asr_busy):
            return 0.0
        expiry = self.models.next_expiry(self._busy_models())
        if len(self._running) >= self.workers:
            return None if expiry is None else max(0.0, expiry - now)  # a finishing batch wakes the loop
        deadline = self.scheduler.next_deadline()
        if deadline is not None and self._hold_for_live(now) and not self.scheduler.has_live:
            deadline = max(deadline, self._live_seen_s + LIVE_HOLD_S)  # batch work waits for the held worker
        if expiry is not None:
            deadline = expiry if deadline is None else min(deadline, expiry)
        return None if deadline is None else max(0.0, deadline - now)

    # --- models ----------------------------------------------------------------------------------

    def _busy_models(self) -> set[str]:
        """Models with work: windows waiting for them, queued or in a running batch."""
        return {*self._pending, *self.scheduler.models(), *self._running_models.values()}

    def _manage_models(self, now: float) -> list[ModelLoaded]:
        """Collect a finished load, unload expired models, start the next load. Never waits."""
        outputs: list[ModelLoaded] = []
        if self._load is not None and self._load.done():
            outputs += self._loaded(self._load, now)
            self._load = None
        busy = self._busy_models()
        for model in self.models.expired(busy, now):
            self._unload(model, "idle for --model-ttl-s")
        if self._load is None and self._load_runner is not None:
            nxt = self.models.next_load(busy)
            if nxt is not None:
                model, evict = nxt
                for old in evict:
                    self._unload(old, "to make room within --max-loaded-models")
                log.info("loading Whisper model %s", model)
                self._load = self._loader.submit(self._load_one, self._load_runner, model)
                self._load.add_done_callback(lambda _f: self._on_batch_done())
        return outputs

    @staticmethod
    def _load_one(load: Callable[[str], Runner], model: str) -> tuple[Runner, int, float]:
        """On the loader thread: the runner, the resident memory the process grew by, the seconds it took."""
        before, start = resident_bytes(), time.perf_counter()
        runner = load(model)
        return runner, max(0, resident_bytes() - before), time.perf_counter() - start

    def _loaded(self, future: Future[tuple[Runner, int, float]], now: float) -> list[ModelLoaded]:
        model = self.models.loading
        assert model is not None
        waiters = self._load_waiters.pop(model, [])
        pending = self._pending.pop(model, [])
        try:
            runner, memory, seconds = future.result()
        except Exception as exc:
            log.exception("could not load the Whisper model %s", model)
            self.models.load_failed(model, 0.0)
            reason = f"could not load the Whisper model: {exc}"
            self._reject += [_error_result(work, reason) for work in pending]
            return [ModelLoaded(request_id, model, reason) for request_id in waiters]
        self.models.loaded_ok(model, runner, memory, seconds, now)
        log.info("loaded Whisper model %s in %.2f s (+%.0f MB resident)", model, seconds, memory / 1e6)
        for work in pending:
            self.scheduler.add(work, now)
        return [ModelLoaded(request_id, model) for request_id in waiters]

    def _unload(self, model: str, why: str) -> None:
        runner = self.models.unload(model)
        if runner is None:
            return
        before = resident_bytes()
        runner.close()
        del runner
        gc.collect()  # a cycle through the runner would keep its CTranslate2 threads until the next full collection
        release_freed_memory()
        log.info(
            "unloaded Whisper model %s (%s): %.0f MB resident freed", model, why, (before - resident_bytes()) / 1e6
        )

    @property
    def asr_busy(self) -> bool:
        """Whisper windows queued or running: speech then keeps to its mixed-load share of the cores."""
        return bool(self._running) or len(self.scheduler) > 0

    @property
    def busy(self) -> bool:
        asr = bool(self._running) or len(self.scheduler) > 0 or bool(self._pending) or self._load is not None
        return asr or (self.tts is not None and self.tts.busy)

    def stats(self) -> EngineStats:
        """The engine's counters now, for /metrics."""
        waiting_units = len(self.tts.scheduler) if self.tts is not None else 0
        stats = self._stats.snapshot(len(self.scheduler), waiting_units, len(self._running))
        stats.models = self.models.states()
        return stats

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._loader.shutdown(wait=False, cancel_futures=True)
        self._speaker_executor.shutdown(wait=False, cancel_futures=True)
        if self.tts is not None:
            self.tts.shutdown()

    # --- execution (on a worker thread) --------------------------------------------------------

    def _execute(self, batch: Sequence[WindowWork], runner: Runner) -> tuple[list[_Done], list[float]]:
        """The batch's results, and what it cost: seconds of engine time per window, one sample per pass
        that ran clean. Touches no engine state: ``_collect`` folds the cost into the scheduler on the
        loop thread."""
        start = time.perf_counter()
        try:
            outputs = self._run_checked(batch, runner)
        except Exception:
            if len(batch) == 1:
                log.exception("window %d of %s failed", batch[0].msg.index, batch[0].request_id)
                return [(batch[0], WindowOutput(_error_result(batch[0], "the model failed on this audio window")))], []
            # Isolate the bad window: one bad item fails alone, never its batch.
            log.warning("a batch of %d failed; running its windows one by one", len(batch), exc_info=True)
            done: list[_Done] = []
            costs: list[float] = []
            for work in batch:
                one, cost = self._execute([work], runner)
                done += one
                costs += cost
            return done, costs
        elapsed = time.perf_counter() - start
        self._stats.batch(len(batch), elapsed)
        return list(zip(batch, outputs)), [elapsed / len(batch) / self.workers]

    def _run_checked(self, batch: Sequence[WindowWork], runner: Runner) -> list[WindowOutput]:
        outputs = runner.run(batch)
        if len(outputs) != len(batch):
            raise RuntimeError(f"runner returned {len(outputs)} results for a batch of {len(batch)}")
        for work, output in zip(batch, outputs):
            if (output.result.request_id, output.result.index) != (work.request_id, work.msg.index):
                raise RuntimeError("runner returned results out of order")
        return outputs

    def _batch_done(self, future: Future[tuple[list[_Done], list[float]]]) -> None:
        with self._lock:
            self._finished.append(future)
        self._on_batch_done()

    def _collect(self, now: float) -> list[WindowResult]:
        with self._lock:
            finished, self._finished = self._finished, []
        outputs: list[WindowResult] = []
        for future in finished:
            self._running.discard(future)
            self._batch_work.discard(future)
            model = self._running_models.pop(future, None)
            if model is not None:
                self.models.touch(model, now)  # its TTL counts from the end of its last batch
            if future.cancelled():
                continue
            done, costs = future.result()
            for cost in costs:
                # Seconds of engine time per window, smoothed: the scheduler's fairness clock.
                self.scheduler.window_cost_s = 0.8 * self.scheduler.window_cost_s + 0.2 * cost
            for work, output in done:
                result = output.result
                state = self.requests.get(result.request_id)
                if state is None:
                    log.debug("dropping result for gone request %s (window %d)", result.request_id, result.index)
                    continue
                if output.resume_s is not None and result.error is None:
                    self.scheduler.add(work.continuation(output.resume_s, result.segments), now)
                    self.continuations += 1
                    continue
                if work.earlier:
                    result.segments = work.earlier + result.segments
                result.passes = work.passes + 1
                state.emitted += 1
                if state.emitted >= state.window_count:
                    del self.requests[result.request_id]
                outputs.append(result)
        return outputs


_Done = tuple[WindowWork, WindowOutput]
"""A window and what its pass produced."""


def _error_result(work: WindowWork, message: str) -> WindowResult:
    return WindowResult(work.request_id, work.msg.index, work.options.language or "en", [], error=message)
