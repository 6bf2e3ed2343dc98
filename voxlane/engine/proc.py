"""The engine process: entry point, IO threads and the busy loop.

Threads and their one job each:
- ``voxlane-engine-in``: receives from the API process's socket and puts decoded messages on a
  ``queue.Queue``; the loop never blocks on the socket.
- ``voxlane-engine-out``: takes results from a queue and sends them.
- the main thread: drains the input queue, updates the core, calls ``step`` and hands results out.
- ``voxlane-engine-N`` (in EngineCore): run batches on the model.
- ``voxlane-speaker`` (in EngineCore): speaker embeddings of diarized transcriptions.
- ``voxlane-tts_N`` (in TtsCore): synthesise speech units, one per slot (``--tts-slots``) at a time.
- ``voxlane-engine-probe``: checks uploaded voices (loads each and makes it speak), one at a time, and
  puts its verdict on the output queue; the loop only hands it the request, so it never waits on a load.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import zmq

from voxlane.config import EngineConfig
from voxlane.engine.core import EngineCore
from voxlane.engine.tts import SpeechChunk
from voxlane.heap import freeze_startup_heap, keep_freed_memory, resident_bytes
from voxlane.messages import (
    Abort,
    EngineFailed,
    EngineOutput,
    LoadModel,
    ModelLoaded,
    ProbeVoice,
    Ready,
    Shutdown,
    SpeakerWindow,
    SpeechUnit,
    UnloadModel,
    VoiceProbed,
    WindowRequest,
    decode_input,
    encode_output,
)
from voxlane.runners.cuda import CudaUnavailable

log = logging.getLogger("voxlane.engine")

_WAKE = object()  # put on the input queue when a batch finishes
_PARENT_CHECK_S = 1.0
_STATS_INTERVAL_S = 1.0  # EngineStats to the API process at most this often (the loop wakes at least as often)
ENGINE_NICENESS = 5
T = TypeVar("T")


def _input_thread(sock: zmq.Socket, inbox: queue.Queue[Any]) -> None:
    while True:
        try:
            frames = sock.recv_multipart(copy=False)
        except zmq.ContextTerminated:
            return
        try:
            inbox.put(decode_input([f.buffer for f in frames]))
        except Exception:
            log.exception("dropping a malformed message from the API process")


def _output_thread(sock: zmq.Socket, outbox: queue.Queue[EngineOutput | SpeechChunk | None]) -> None:
    while True:
        msg = outbox.get()
        if msg is None:
            return
        try:
            if isinstance(msg, SpeechChunk):
                sock.send_multipart(encode_output(msg.msg, msg.pcm), copy=False)
            else:
                sock.send_multipart(encode_output(msg))
        except zmq.ContextTerminated:
            return


def _probe_thread(
    probes: queue.Queue[ProbeVoice | None], outbox: queue.Queue[EngineOutput | SpeechChunk | None]
) -> None:
    from voxlane.runners.piper import BadVoice, probe_voice

    while True:
        msg = probes.get()
        if msg is None:
            return
        try:
            probe_voice(msg.model_path, msg.config_path, threads=1)
            outbox.put(VoiceProbed(msg.request_id))
        except BadVoice as exc:
            outbox.put(VoiceProbed(msg.request_id, exc.part, exc.reason))
        except Exception as exc:
            log.exception("probing voice %s failed", msg.model_path)
            outbox.put(VoiceProbed(msg.request_id, "model", type(exc).__name__))


def run_engine(config: EngineConfig, input_addr: str, output_addr: str, log_level: str = "info") -> None:
    """The engine process's main, once ``voxlane.engine.entry.run`` has made it a child of the API process."""
    # The engine is throughput work, the API process's event loop is latency work: when both want a core,
    # the loop should win at once (on 2 cores, CTranslate2's threads otherwise delay it by tens of ms).
    os.nice(ENGINE_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the API process decides when we stop
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s [engine] %(message)s")
    if config.engine_keep_freed_memory and not keep_freed_memory():  # before any other thread starts
        log.warning("--engine-keep-freed-memory: glibc's malloc options could not be set; the defaults stay")
    parent = os.getppid()
    ctx = zmq.Context()
    in_sock = ctx.socket(zmq.PULL)
    in_sock.connect(input_addr)
    out_sock = ctx.socket(zmq.PUSH)
    out_sock.connect(output_addr)
    out_sock.setsockopt(zmq.LINGER, 1000)
    inbox: queue.Queue[Any] = queue.Queue()
    outbox: queue.Queue[EngineOutput | SpeechChunk | None] = queue.Queue()
    threading.Thread(target=_output_thread, args=(out_sock, outbox), name="voxlane-engine-out", daemon=True).start()
    try:
        config = _place(config)
        runner, tts_runners, tts_solo, default_memory = _load_runners(config)
    except Exception as exc:
        if isinstance(exc, CudaUnavailable):
            log.error("%s", exc)  # the one line says it all: no traceback
        else:
            log.exception("could not load the models")
        outbox.put(EngineFailed(str(exc)))
        outbox.put(None)
        time.sleep(0.5)  # let the output thread send the reason
        return
    speaker_encoder, speaker_problem = _load_speaker_encoder(config)
    check_encoder = _load_check_encoder(config, speaker_encoder)
    core = EngineCore(
        runner,
        config,
        on_batch_done=lambda: inbox.put(_WAKE),
        tts_runners=tts_runners,
        tts_solo_runner=tts_solo,
        load_runner=_whisper_loader(config),
        default_memory_bytes=default_memory,
        speaker_encoder=speaker_encoder,
        check_encoder=check_encoder,
    )
    freeze_startup_heap()  # full collections would otherwise walk the loaded runtimes' objects each time
    threading.Thread(target=_input_thread, args=(in_sock, inbox), name="voxlane-engine-in", daemon=True).start()
    probes: queue.Queue[ProbeVoice | None] = queue.Queue()
    threading.Thread(target=_probe_thread, args=(probes, outbox), name="voxlane-engine-probe", daemon=True).start()
    outbox.put(ready_message(config, runner, speaker_problem, speaker_encoder, check_encoder))
    log.info(
        "engine ready: %s (%s on %s, %d worker(s) x %d thread(s), decoder %d thread(s), batch <= %d, live <= %d); "
        "speech on %s: %d slot(s) x %d onnxruntime thread(s) (%d while ASR works), alone %d thread(s), %s order",
        config.model_path,
        config.compute_type,
        config.device,
        config.engine_workers,
        config.engine_threads,
        config.decoder_threads,
        config.max_batch_size,
        config.live_batch_size,
        config.tts_device,
        config.tts_slots,
        config.tts_threads,
        config.tts_mixed_slots,
        config.tts_solo_threads,
        config.tts_order,
    )
    code = 0
    try:
        _loop(core, inbox, outbox, probes, parent)
    except BaseException:
        # A bug in the loop: said here, since os._exit below leaves no traceback, and a non-zero code tells
        # the supervisor (and a reader of its log) that the engine crashed rather than stopped.
        log.exception("the engine loop failed")
        code = 1
    finally:
        # Exit now, without closing sockets under the IO threads' feet (ZMQ sockets are not thread-safe:
        # that asserted in signaler.cpp) and without waiting for a batch still running on a worker thread
        # (the interpreter joins non-daemon threads at exit): nothing it computes is wanted any more.
        logging.shutdown()
        os._exit(code)


def ready_message(
    config: EngineConfig, runner: Any, speaker_problem: str | None, speaker_encoder: Any, check_encoder: Any
) -> Ready:
    """What the engine tells the API process once its models are loaded. An encoder with ``feature_columns``
    (CAM++) reads only the filterbanks of the speaker features, so the API process computes what it reads."""
    return Ready(
        config.model_path,
        runner.is_multilingual,
        runner.n_mels,
        speaker_problem,
        count_check=check_encoder is not None,
        speaker_fbank=getattr(speaker_encoder, "feature_columns", None) is not None,
        check_fbank=getattr(check_encoder, "feature_columns", None) is not None,
    )


def _in_nicer_thread(load: Callable[[], T], extra_niceness: int) -> T:
    """Run ``load`` on a new thread ``extra_niceness`` nicer than this one. CTranslate2 starts its worker
    threads (and they their OpenMP threads) while loading, and Linux threads inherit the niceness of the
    thread that creates them: so the whole Whisper compute runs that much nicer."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + extra_niceness)
        except OSError:
            pass
        try:
            result.append(load())
        except BaseException as exc:  # handed to the caller
            errors.append(exc)

    thread = threading.Thread(target=run, name="voxlane-engine-load")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def _place(config: EngineConfig) -> EngineConfig:
    """Resolve --device and --compute-type (runners/cuda.py); raises CudaUnavailable for --device cuda
    without a usable GPU, whose one-line message the API process prints before it exits."""
    from voxlane.runners.cuda import place, set_jit_cache

    if config.device != "cpu":
        set_jit_cache(os.path.expanduser(config.cuda_cache_dir))  # before the first CUDA call
    from voxlane.runners.piper import place_voices

    placement = place(config.device, config.compute_type)
    log.info("Whisper on %s (%s): %s", placement.device, placement.compute_type, placement.reason)
    tts_device, why = place_voices(config.tts_device, placement.device)
    log.info("speech on %s: %s", tts_device, why)
    return replace(config.placed(placement.device, placement.compute_type), tts_device=tts_device)


def _whisper_loader(config: EngineConfig) -> Callable[[str], Any]:
    """Loads another Whisper model (a directory) with the default model's settings, its threads as nice."""
    from voxlane.runners.whisper import WhisperRunner

    def load(model_path: str) -> Any:
        return _in_nicer_thread(lambda: WhisperRunner.load(replace(config, model_path=model_path)), config.asr_niceness)

    return load


def _load_runners(config: EngineConfig) -> tuple[Any, list[Any], Any, int]:
    """The Whisper runner, one Piper runner per speech slot, the solo Piper runner (None when
    --tts-solo-threads is 1) and the resident memory the Whisper model took, or an exception whose message
    tells the operator which model failed and why."""
    from voxlane.runners.piper import PiperRunner
    from voxlane.runners.whisper import WhisperRunner

    try:
        import ctranslate2  # noqa: F401  the runtime's own memory is not the model's

        before = resident_bytes()
        runner = _in_nicer_thread(lambda: WhisperRunner.load(config), config.asr_niceness)
        memory = max(0, resident_bytes() - before)
    except Exception as exc:
        raise RuntimeError(f"could not load the Whisper model from {config.model_path}: {exc}") from exc
    try:
        device = config.tts_device
        tts_runners = [
            PiperRunner(config.tts_threads, config.tts_max_loaded_voices, device) for _ in range(config.tts_slots)
        ]
        # The solo session gives a lone unit the idle cores; on the GPU a unit has the device's.
        solo = (
            PiperRunner(config.tts_solo_threads, config.tts_max_loaded_voices)
            if config.tts_solo_threads > 1 and device == "cpu"
            else None
        )
        if config.tts_preload is not None:
            for tts_runner in [*tts_runners, *([solo] if solo else [])]:
                tts_runner.voice(*config.tts_preload)
    except Exception as exc:
        raise RuntimeError(f"could not load the Piper voice {config.tts_preload}: {exc}") from exc
    return runner, tts_runners, solo, memory


def _load_speaker_encoder(config: EngineConfig) -> tuple[Any, str | None]:
    """Diarization's speaker encoder, or None and why not (the server still transcribes without it). Its
    onnxruntime threads are --speaker-threads, numpy's BLAS too (the encoders' small products around the
    graphs); CTranslate2 has its own."""
    from voxlane.blas import limit_blas_threads
    from voxlane.runners.speaker import load_encoder
    from voxlane.speakers.weights import INSTALL_HINT, weights_path

    limit_blas_threads(config.speaker_threads)
    path = weights_path(config.speaker_model)
    try:
        return load_encoder(path, config.speaker_threads), None
    except FileNotFoundError:
        log.warning("no speaker encoder at %s: diarized_json is off until it is fetched (%s)", path, INSTALL_HINT)
        return None, f"the speaker encoder's weights are not installed (no {path}); run {INSTALL_HINT}"
    except Exception as exc:
        log.exception("could not load the speaker encoder from %s", path)
        return None, f"the speaker encoder at {path} could not be loaded ({exc}); run {INSTALL_HINT}"


def _load_check_encoder(config: EngineConfig, speaker_encoder: Any) -> Any:
    """The count check's encoder (--speaker-check-model), or None: none asked for, no speaker encoder to
    diarize with, or its weights missing (the count then comes from the clustering's embeddings alone)."""
    from voxlane.runners.speaker import load_encoder
    from voxlane.speakers.weights import INSTALL_HINT, weights_path

    if config.speaker_check_model == "none" or speaker_encoder is None:
        return None
    path = weights_path(config.speaker_check_model)
    if path == weights_path(config.speaker_model):
        return speaker_encoder
    try:
        return load_encoder(path, config.speaker_threads)
    except Exception as exc:
        log.warning(
            "no count check encoder (%s): diarization counts speakers from its embeddings alone; run %s (%s)",
            path,
            INSTALL_HINT,
            exc,
        )
        return None


def _loop(
    core: EngineCore,
    inbox: queue.Queue[Any],
    outbox: queue.Queue[EngineOutput | SpeechChunk | None],
    probes: queue.Queue[ProbeVoice | None],
    parent: int,
) -> None:
    stats_due = 0.0
    while True:
        timeout = core.next_timeout(time.monotonic())
        try:
            item = inbox.get(timeout=_PARENT_CHECK_S if timeout is None else min(timeout, _PARENT_CHECK_S))
        except queue.Empty:
            item = None
            if os.getppid() != parent:
                log.warning("the API process is gone; exiting")
                return
        items = [] if item is None else [item]
        while True:  # drain whatever else arrived: one step sees all of it
            try:
                items.append(inbox.get_nowait())
            except queue.Empty:
                break
        now = time.monotonic()
        for item in items:
            if item is _WAKE:
                continue
            msg, features = item
            if isinstance(msg, WindowRequest):
                core.add_window(msg, features, now)
            elif isinstance(msg, SpeakerWindow):
                core.add_speaker_window(msg, features)
            elif isinstance(msg, SpeechUnit):
                core.add_unit(msg, now)
            elif isinstance(msg, ProbeVoice):
                probes.put(msg)
            elif isinstance(msg, LoadModel):
                answer = core.load_model(msg, now)
                if answer is not None:
                    outbox.put(answer)
            elif isinstance(msg, UnloadModel):
                unloaded = core.unload_model(msg)
                outbox.put(core.stats())  # first, so the API side's /v1/models already shows it unloaded
                outbox.put(unloaded)
            elif isinstance(msg, Abort):
                core.abort(msg.request_id)
            elif isinstance(msg, Shutdown):
                return
        results = core.step(now)
        if any(isinstance(result, ModelLoaded) for result in results):
            outbox.put(core.stats())  # first, so the API side's /v1/models already shows the model loaded
        for result in results:
            outbox.put(result)
        if now >= stats_due:
            outbox.put(core.stats())
            stats_due = now + _STATS_INTERVAL_S
