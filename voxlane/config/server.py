"""The API process's settings: where to listen, its pools and limits, scale-out on Ray, live sessions."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from voxlane.config.device import fill_by_device, host_device, shown_by_device
from voxlane.config.engine import EngineConfig
from voxlane.config.flags import setting
from voxlane.models import DEFAULT_WHISPER, HubCache, VoiceFiles, WhisperModel

DEFAULT_MODEL_NAME = DEFAULT_WHISPER
DATA_DIR_DEFAULT = "~/.local/share/voxlane"


@dataclass(frozen=True)
class ServerConfig:
    """What the API process needs: where to listen, its pools and limits, and the engine's config."""

    host: str = setting("127.0.0.1", "address to bind", group="server", user=True)
    port: int = setting(8000, "TCP port", minimum=0, maximum=65535, group="server", user=True)
    model: tuple[str, ...] = setting(
        (DEFAULT_MODEL_NAME,),
        "Whisper model to serve: an installed model (whisper-tiny.en, bundled; whisper-base with "
        "voxlane[multilingual]), a CTranslate2 model directory, or a Hugging Face repo id in its cache "
        "(Systran/faster-whisper-small); repeat for several: the first is the default and is preloaded, the others "
        "load on first use",
        shown_default=DEFAULT_MODEL_NAME,
        group="models",
        user=True,
    )
    """Any other model a request names (installed, a directory, a repo id in the cache) loads on first use too;
    these are listed by GET /v1/models even before that (docs/models.md)."""
    voice: tuple[str, ...] = setting(
        (),
        "Piper voice to serve by name besides the bundled joe: a voice directory or .onnx file, or a voice name "
        "in the Hugging Face cache's rhasspy/piper-voices (en_US-lessac-medium); repeat for several",
        shown_default="none",
        group="models",
        user=True,
    )
    model_alias: tuple[str, ...] = setting(
        (),
        "NAME=MODEL: requests for model NAME get MODEL (a model reference, or piper); changes the built-in "
        "aliases (whisper-1, gpt-4o-transcribe, gpt-4o-mini-transcribe, gpt-transcribe: the default Whisper "
        "model; tts-1, tts-1-hd, gpt-4o-mini-tts: piper) or adds one; repeat for several",
        shown_default="none",
        group="models",
        user=True,
    )
    model_load_wait_s: float = setting(
        30.0,
        "seconds a request for a Whisper model that is loading waits for it before a 503 with Retry-After "
        "(the load goes on)",
        minimum=0,
        group="models",
    )
    log_level: str = setting(
        "info",
        "debug, info, warning or error",
        choices=("debug", "info", "warning", "error"),
        group="server",
        user=True,
    )
    data_dir: str = setting(
        os.path.expanduser(DATA_DIR_DEFAULT),
        "directory for uploaded voices (voices/ inside, kept across restarts)",
        shown_default=DATA_DIR_DEFAULT,
        group="server",
        user=True,
    )
    audio_preprocess_workers: int = setting(
        None,
        "workers decoding, resampling, splitting and computing log-mel features",
        minimum=1,
        shown_default="min(cpu count, 2); usable cores - 2 on a GPU machine",
        by_device=True,
        group="server",
    )
    audio_preprocess_pool: str = setting(
        None,
        "kind of the audio preprocessing pool: thread or process (process on a GPU machine: docs/gpu.md)",
        choices=("thread", "process"),
        shown_default=shown_by_device("audio_preprocess_pool"),
        by_device=True,
        group="server",
    )
    """Threads measured about 3x the uploads per second of processes on 2 cores (docs/engine-config.md). On a
    GPU machine (--device cuda, or auto with an NVIDIA driver present) the front end must feed the GPU from
    every core: 64 clients of long audio on an H100 with 16 cores, 14 threads gave RTFx 528, 14 processes
    1274, in the same run (the threads wait for each other's GIL; docs/gpu.md)."""
    worker_niceness: int = 5
    """How much nicer (lower CPU priority) than the event loop the API process's worker threads and audio
    processes run, so that the loop wins a contended core; no flag: 15 on a GPU machine left /health's tail
    within the runs' spread (docs/gpu.md)."""
    blas_threads: int = 1
    """Threads of numpy's BLAS (log-mel features' matrix product) in the API process and its worker processes;
    no flag: OpenBLAS's idle threads spin, and 2 threads measured worse than 1 in every workload
    (voxlane/blas.py, docs/engine-config.md)."""
    max_upload_mb: float = setting(
        25.0, "largest upload accepted, in MiB (OpenAI's limit is 25 MB)", positive=True, group="limits", user=True
    )
    upload_spool_mb: float = setting(
        8.0,
        "MiB of an upload held in memory; a larger one goes to a temporary file, each of its later chunks "
        "written on a worker thread",
        minimum=0,
        group="limits",
    )
    """Starlette's own is 1 MiB: a 5 MB upload then costs about 60 hand-offs between the event loop and a
    thread, each a wake-up of the loop and a wait for the GIL. At the --max-transcription-requests default of
    64 the uploads held in memory are at most 512 MiB."""
    max_audio_duration_s: float = setting(
        3 * 3600.0, "longest audio accepted after decoding, in seconds", positive=True, group="limits", user=True
    )
    split_search_s: float = setting(
        8.0,
        "seconds before each 30 s boundary searched for the quietest 100 ms to cut long audio at",
        minimum=0,
        group="ASR",
    )
    chunking_strategy: str = setting(
        "none",
        "what a transcription without chunking_strategy gets: none (all of the audio, in 30 s windows) "
        "or auto (Silero VAD regions, silence of 4 s or more not decoded)",
        choices=("none", "auto"),
        group="ASR",
        user=True,
    )
    """'none' is OpenAI's default and measured more accurate on the dev set: Silero missed seconds of real
    speech there."""
    decode_timestamps: str = setting(
        "when-asked",
        "when Whisper decodes with its timestamp tokens: always, or when-asked (only where the response shows "
        "times: verbose_json, srt, vtt, diarized_json, word timestamps); without them a window is read in one "
        "pass, as one segment",
        choices=("always", "when-asked"),
        group="ASR",
        user=True,
    )
    """On the wide dev set's core, beam 5 on 30 s windows read 21.82% without the timestamp tokens against
    23.17% with them: 69 fewer insertions (docs/decoding.md). A decode without them also costs fewer steps."""
    max_transcription_requests: int = setting(
        64,
        "transcription and translation requests at once (from the upload to the answer, or to the start of "
        "a stream) before new ones get 429",
        minimum=1,
        group="limits",
        user=True,
    )
    """Each holds its upload (up to --max-upload-mb) while it waits for the audio pool."""
    max_queued_audio_s: float = setting(
        21600.0,
        "seconds of audio with sound admitted and not yet transcribed, over all requests, before new "
        "transcriptions get 429 (one request over it alone is admitted when nothing else is queued)",
        positive=True,
        group="limits",
    )
    """Six hours: two of the longest uploads (--max-audio-duration-s), about 9 minutes of work at the 40x
    real time of this project's 2-core machine. Silent windows are not queued (audio/pipeline.py)."""
    max_queued_windows: int = setting(
        4096, "30 s windows waiting in the engine before new requests get 429 (queue depth)", minimum=1, group="limits"
    )
    request_timeout_s: float = setting(
        600.0, "seconds a request may wait for the engine before a 503", positive=True, group="limits", user=True
    )
    max_speech_input_chars: int = setting(
        4096, "longest text accepted by /v1/audio/speech, in characters (OpenAI's limit)", minimum=1, group="limits"
    )
    max_speech_streams: int = setting(
        256, "speech streams at once before new requests get 429", minimum=1, group="limits", user=True
    )
    speech_clause_chars: int = setting(
        60,
        "speech units longer than this many characters are cut at clause boundaries (, ; : dashes), never "
        "inside a clause; 300 or more turns this off",
        minimum=1,
        group="TTS",
    )
    """A speech slot runs a unit to its end, so shorter units let other streams' next units and first units
    in sooner: at 16 streams on 2 cores the last stream's first audio came after 2.3-2.9 s with 60, 4.2-6.4 s
    with whole sentences, in the same run (docs/tts.md)."""
    max_queued_speech_chars: int = setting(
        32768,
        "characters of /v1/audio/speech input admitted and not yet spoken, over all streams, before new "
        "requests get 429 (one request over it alone is admitted when nothing else is queued)",
        minimum=1,
        group="limits",
    )
    """Eight of the longest inputs, about 4 minutes of speech work at the 10 s of audio per second this
    project's 2-core machine synthesises (docs/tts.md)."""
    max_voice_upload_mb: float = setting(
        256.0, "largest voice model (.onnx) accepted by POST /v1/audio/voices, in MiB", positive=True, group="limits"
    )
    encode_workers: int = setting(
        2,
        "worker processes encoding speech to mp3, opus, aac, flac, wav or pcm (each stream stays on one)",
        minimum=1,
        group="TTS",
    )
    loop_stall_report_ms: float = setting(
        50.0,
        "milliseconds the event loop may fall behind before a warning logs its stack, each thread's CPU "
        "and the machine's steal time; 0 = off",
        minimum=0,
        group="server",
    )
    engine_restart_backoff_s: float = setting(
        0.5,
        "seconds before a dead engine process is started again; doubles with each death within "
        "--engine-crash-loop-window-s",
        positive=True,
        group="server",
    )
    engine_restart_backoff_max_s: float = setting(
        8.0, "longest wait, in seconds, before a dead engine process is started again", positive=True, group="server"
    )
    engine_crash_loop_deaths: int = setting(
        5,
        "engine deaths within --engine-crash-loop-window-s after which the server stops restarting it "
        "(/health says failed); 1 = never restart",
        minimum=1,
        group="server",
    )
    engine_crash_loop_window_s: float = setting(
        60.0, "seconds over which engine deaths count toward --engine-crash-loop-deaths", positive=True, group="server"
    )
    drain_timeout_s: float = setting(
        30.0,
        "seconds that requests in flight may take to finish after SIGTERM or Ctrl-C (new ones get 503 "
        "meanwhile, and so do those still waiting on the engine when it is up); a second signal exits at once",
        minimum=0,
        group="server",
    )
    api_key: str = setting(
        "",
        "API keys, comma-separated; when any is set, every /v1 route needs 'Authorization: Bearer KEY'",
        secret=True,
        shown_default="none",
        group="server",
        user=True,
    )
    """Prefer the variable or --api-keys-file: a flag is visible to every user of the machine in ``ps``."""
    api_keys_file: str = setting(
        "",
        "file of API keys, one per line (blank lines and # comments skipped), read once at start",
        shown_default="none",
        group="server",
        user=True,
    )
    metrics_need_key: bool = setting(
        False, "whether /metrics needs an API key too (/health never does)", group="server"
    )
    cors_allow_origins: str = setting(
        "",
        "web origins allowed to call the API from a browser, comma-separated (https://app.example.com), or * for "
        "any; empty: no CORS headers. API keys are still checked",
        shown_default="none",
        group="server",
        user=True,
    )
    """For web apps that call the server directly. Preflight (OPTIONS) requests are answered without a key, as
    browsers send them without one; the request that follows needs its key as any other."""
    ray_address: str = setting(
        "",
        "a running Ray cluster (auto, or HOST:PORT of its head); when set, voxlane serve deploys on Ray Serve "
        "(engine replicas behind one endpoint, docs/scale-out.md) instead of starting its own engine",
        shown_default="none",
        group="scale-out",
        user=True,
    )
    replicas: int = setting(
        2,
        "engine replicas on Ray (fixed; --max-replicas turns autoscaling on)",
        minimum=1,
        group="scale-out",
        user=True,
    )
    min_replicas: int = setting(1, "fewest engine replicas on Ray while autoscaling", minimum=1, group="scale-out")
    max_replicas: int = setting(
        0,
        "most engine replicas on Ray; above 0, autoscaling on load between --min-replicas and this",
        minimum=0,
        group="scale-out",
        user=True,
    )
    target_ongoing_requests: float = setting(
        4.0,
        "windows and speech units in flight per engine replica that Ray's autoscaling aims at",
        positive=True,
        group="scale-out",
    )
    """A replica runs --engine-workers batches of up to --max-batch-size windows; a few in flight per worker
    keep its batches full without queueing behind them."""
    downscale_delay_s: float = setting(
        60.0,
        "seconds of lower load before Ray's autoscaling removes an engine replica (drained first)",
        minimum=0,
        group="scale-out",
    )
    cpus_per_replica: float = setting(
        2.0,
        "CPUs each engine replica reserves on its Ray node (its engine's Whisper and speech threads)",
        positive=True,
        group="scale-out",
    )
    gpus_per_replica: float = setting(
        0.0, "GPUs each engine replica reserves on its Ray node", minimum=0, group="scale-out", user=True
    )
    max_ongoing_per_replica: int = setting(
        64,
        "windows and speech units sent to one engine replica at once before Ray queues the rest",
        minimum=1,
        group="scale-out",
    )
    ingress_replicas: int = setting(
        1,
        "replicas of the HTTP front end on Ray (upload decode, log-mel features, speech encoding); "
        "Ray places them on any node",
        minimum=1,
        group="scale-out",
    )
    realtime_max_connections: int = setting(
        32,
        "live transcription WebSockets (/v1/realtime) open at once; more are refused with an error event",
        minimum=1,
        group="realtime",
        user=True,
    )
    """Each live stream costs the engine a partial decode about twice a second and a 30 s window per turn; on
    2 cores 8 streams of long speech at once use about 1.3 cores of the engine (docs/benchmarks.md), so this
    bounds memory and sockets rather than promising speed."""
    realtime_max_buffer_s: float = setting(
        120.0,
        "seconds of audio a live transcription session holds uncommitted (manual commits) before appends "
        "are refused with an error event",
        positive=True,
        group="realtime",
    )
    realtime_idle_timeout_s: float = setting(
        60.0,
        "seconds a live transcription session may send nothing, with no text on its way, before the server closes it",
        positive=True,
        group="realtime",
    )
    realtime_max_session_s: float = setting(
        1800.0,
        "longest live transcription session, in seconds (OpenAI's is 30 minutes)",
        positive=True,
        group="realtime",
        user=True,
    )
    realtime_max_speed: float = setting(
        4.0,
        "how many times faster than real time a live session may send audio (after a first 10 s) before "
        "appends are refused with a rate_limit_exceeded error event",
        positive=True,
        group="realtime",
    )
    realtime_partial_interval_s: float = setting(
        0.5,
        "seconds between partial decodes of a live turn still open (each sends the new text as delta events)",
        positive=True,
        group="realtime",
    )
    """8 streams of long speech on 2 cores, 0.5 against 1.0 (A B B A): partial text 1.05 times a second per
    open turn against 0.74-0.75 (the text changes every 0.60 s at the median against 0.89-0.90 s), for 17%
    more engine CPU; final text 0.32-0.35 s after the turn's end at the median against 0.26-0.35 s, the same
    WER (docs/benchmarks.md)."""
    realtime_context_s: float = setting(
        20.0,
        "seconds of a live session's earlier turns that a turn's final decode reads first, their text forced as "
        "the start of its transcript (0: each turn alone; at most 29, so that context and turn fit one window)",
        minimum=0.0,
        maximum=29.0,
        group="realtime",
    )
    """Whisper tiny reads a turn of a few words worse than the same words inside 30 s of speech (turns.py
    ``CONTEXT_S``); the encoder's cost is the same either way, the decoder pays a step per forced token."""
    realtime_beam_size: int = setting(
        3,
        "beam size of a live turn's final decode (partials are always greedy); 0 takes --beam-size",
        minimum=0,
        shown_default="3",
        group="realtime",
        user=True,
    )
    """8 streams of long speech on 2 cores (docs/benchmarks.md): 3 reads the finals at 6.11% WER in every run against
    6.62-7.07% greedy (the batch endpoint: 5.66%), for final text 0.28-0.38 s after the turn's end at the median
    against 0.25-0.27 s greedy in the same session (0.54 s against 0.47 s on a slower host), partials 1.03-1.05 a
    second against 1.08-1.10: each forced context token costs the decoder a step per beam. 1 (greedy) for more
    streams on few cores."""
    diarize_threshold: float = setting(
        0.65,
        "diarization: average cosine similarity down to which speech regions are joined into one speaker's "
        "cluster (first stage; higher: more speakers)",
        minimum=0.0,
        maximum=1.0,
        group="ASR",
    )
    """Tuned on the dev set's synthetic conversations (docs/diarization.md)."""
    diarize_merge_threshold: float = setting(
        0.8,
        "diarization: cosine similarity of two clusters' centroids down to which they are merged as one "
        "speaker (second stage; higher: more speakers)",
        minimum=0.0,
        maximum=1.0,
        group="ASR",
    )
    diarize_known_threshold: float = setting(
        0.7,
        "diarization: cosine similarity between a speaker's centroid and a known_speaker_references clip at "
        "which the speaker takes that name",
        minimum=0.0,
        maximum=1.0,
        group="ASR",
    )
    diarize_max_speakers: int = setting(
        16,
        "diarization: the most speakers a request's num_speakers or max_speakers may ask for (the count found "
        "without them is not capped)",
        minimum=1,
        maximum=600,
        group="ASR",
    )
    """Bounds what one request can make the clustering do; 16 is more than a meeting's speakers, far under the
    600 points clustered (its maximum: MAX_POINTS, voxlane/speakers/diarize.py)."""
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

    def __post_init__(self) -> None:
        # The API process's pools are made before the engine places Whisper: they follow the likely device.
        fill_by_device(self, host_device(self.engine.device))

    @property
    def model_name(self) -> str:
        """The id clients use in ``model=`` for the default Whisper model."""
        return self.whisper[0].name if self.whisper else DEFAULT_MODEL_NAME

    @property
    def models_dir(self) -> Path:
        """Where voxlane writes models it assembles (whisper-base's joined halves)."""
        return Path(self.data_dir) / "models"
