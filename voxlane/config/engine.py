"""The engine process's settings: where Whisper runs, its threads, the batching policy and speech synthesis."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from voxlane.config.device import CORES, fill_by_device, shown_by_device
from voxlane.config.flags import setting

CUDA_CACHE_DIR_DEFAULT = "~/.cache/voxlane/cuda"


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
        group="GPU",
        user=True,
    )
    """With cuda, the server refuses to start when CUDA cannot be used, with one line saying what is missing
    (runners/cuda.py); auto then runs on the CPU and logs why."""
    compute_type: str = setting(
        "auto",
        "CTranslate2 compute type (int8, int8_float32, float16, float32, ...); auto: float16 on CUDA, int8 on CPU",
        group="GPU",
        user=True,
    )
    cuda_cache_dir: str = setting(
        os.path.expanduser(CUDA_CACHE_DIR_DEFAULT),
        "directory of CUDA's compiled-kernel (JIT) cache, kept across restarts; empty leaves CUDA's own",
        shown_default=CUDA_CACHE_DIR_DEFAULT,
        group="GPU",
    )
    """CUDA compiles CTranslate2's kernels for a GPU newer than the wheel knows at their first use (14 s for the
    first decode on an H100; start to ready 55.5 s with an empty cache, 42.4 s with it); the next start reads
    them from here (docs/gpu.md)."""
    engine_workers: int = setting(
        None,
        "Whisper batches that run in parallel in the engine (CTranslate2 inter_threads)",
        minimum=1,
        by_device=True,
        shown_default=shown_by_device("engine_workers"),
        group="GPU",
        user=True,
    )
    """One model replica each. Two workers x 2 threads measured best on 2 cores: +30% throughput at 16
    clients over one worker, and a lone request still gets 2 threads (docs/engine-config.md). On a GPU the
    replicas share the device: one batch's host work (prompts, segments) overlaps another's kernels."""
    engine_threads: int = setting(2, "threads per engine worker (CTranslate2 intra_threads)", minimum=1, group="ASR")
    decoder_threads: int = 1
    """Threads per engine worker for Whisper's token-by-token decoding, on a second set of replicas of the model
    when it differs from ``engine_threads`` (tiny.en int8: +65 MB); no flag: 2 threads measured slower in every
    workload (docs/engine-config.md, "Whisper workers and threads")."""
    engine_keep_freed_memory: bool = setting(
        True,
        "whether the engine keeps the memory it frees for its next window (glibc malloc: one arena, no mmap, "
        "no trim) instead of giving it back to the system and faulting it in again",
        group="ASR",
    )
    """On: a 30 s window's encoder pass 363 -> 286 ms on 1 thread and 208 -> 135 ms on 2 (no page faults
    after the first window), and the engine's resident memory stays at its peak (docs/engine-config.md)."""
    beam_size: int = setting(
        5,
        "beam size of a window's decode while the engine keeps up (--adaptive-queue-s), for windows read "
        "without timestamp tokens (a one-window request whose response shows no times); 1 = greedy decoding "
        "always, the fastest",
        minimum=1,
        group="ASR",
        user=True,
    )
    adaptive_queue_s: float = setting(
        4.0,
        "seconds of queued work (one window for each request waiting, at the engine's measured cost per "
        "window) past which a batch is decoded greedily, with the doubt beam (--doubt-beam-size), instead of "
        "at --beam-size on 30 s windows; 0 = every window at --beam-size, with or without timestamp tokens",
        minimum=0.0,
        group="ASR",
    )
    """Load-adaptive decoding (engine/scheduler.py ``decode_beam``): a lone request read without timestamp
    tokens gets beam 5 on 30 s windows, and a queue long enough that the beam would slow the engine down gets
    greedy decodes. On the wide dev
    set's core, 16 at once, 4 s beamed a third of the windows: 22.51% WER at RTFx 13.6, against 23.26% at 20.3
    all greedy and 22.40% at 9.3 with 8 s (docs/decoding.md)."""
    short_window_pad_s: float = setting(
        None,
        "seconds of silence after the audio of a window with at most 8 s of audio (a short request, the last "
        "window of a long one): it is encoded on 8 s plus this much instead of 30 s, and its decode capped by "
        "its length; 0 = every window takes 30 s",
        minimum=0.0,
        maximum=22.0,
        by_device=True,
        shown_default=shown_by_device("short_window_pad_s"),
        group="ASR",
    )
    """Whisper pads every window to 30 s: a 3 s clip pays for 30 s of encoder. Windows of at most 8 s
    (runners/base.py SHORT_MAX_S) encoded on 13 s: at 16 clients the dev set's files of 15 s or less ran at
    RTFx 37.7-40.6 against 20.7-22.0 on 30 s windows (15.6% WER against 19.0%), all its files at
    70.7-77.1 against 61.4-69.6 with 30 s windows (5.70% against 5.86%), a lone 2.8 s clip in 184-205 ms
    against 291-300 ms. Windows of up to 25 s encoded on their own length plus 5 s read worse (7.56% against
    7.28% on 124 pieces), so they are not (docs/asr-engine.md). Not measured on a GPU, where it
    stays 0: there the decoder, not the encoder, is the cost (docs/gpu.md)."""
    short_final_pad_s: float = setting(
        None,
        "seconds of silence after the audio of a live turn's final (/v1/realtime) with at most 8 s of audio, "
        "its context included: it is encoded on 8 s plus this much instead of 30 s, and decoded again on 30 s "
        "where the short read loops; 0 = every final takes 30 s",
        minimum=0.0,
        maximum=22.0,
        by_device=True,
        shown_default=shown_by_device("short_final_pad_s"),
        group="realtime",
    )
    """A final's context (forced words) makes it loop more often than a batch window on a short encoding: of 30
    finals of at most 8 s recorded from `voxlane bench realtime`, 8 looped at 5 s of pad and 1 at 10 s, and at
    10 s every final read as on 30 s, in 44% of the time (docs/asr-engine.md)."""
    doubt_beam_size: int = setting(
        5,
        "beam size of a second decode of the windows (not live ones) whose first decode the model doubts (mean "
        "log-probability under -0.5, compression ratio over 2.4); 0 = none",
        minimum=0,
        group="ASR",
    )
    """About one window in five is doubted at -0.5 (22 of the 112 pieces above); their second decode reuses
    the encoder's output. Pieces: 6.90% WER against 7.24% greedy in the same time; the dev set through the
    server: 5.9% (80/9/18) against 6.1% (86/8/17) at 1.07x the wall time (docs/asr-engine.md)."""
    doubt_log_prob: float = -0.5
    """Mean token log-probability under which a window's first decode is doubted (``doubt_beam_size``); no flag:
    -0.7, -0.3, -0.2 and 0 all read the dev set worse or slower (docs/asr-engine.md)."""
    max_batch_size: int = setting(
        None,
        "30 s windows per engine batch",
        minimum=1,
        by_device=True,
        shown_default=shown_by_device("max_batch_size"),
        group="GPU",
        user=True,
    )
    max_batch_wait_ms: float = setting(
        5.0, "milliseconds the oldest window may wait for its batch to fill", minimum=0, group="ASR"
    )
    live_batch_size: int = setting(
        None,
        "live decodes (/v1/realtime finals, or partials) of different sessions queued together that may share one "
        "engine batch; a live decode never waits for others",
        minimum=1,
        by_device=True,
        shown_default=shown_by_device("live_batch_size"),
        group="realtime",
    )
    """On a CPU a batch costs about the sum of its windows, so finals that share one finish no sooner than
    they would alone, and the first waits for the last (engine/scheduler.py; 2, 3 and 4 finals on 18 s cost
    147, 212 and 273 ms in one batch against 155 ms for one 30 s window, docs/asr-engine.md). On a GPU a
    batch of 16 costs about what one window costs (docs/gpu.md), so finals due together share one."""
    tts_slots: int = setting(
        CORES,
        "speech units synthesised at once, each on its own execution thread and onnxruntime session "
        "(units of different streams; one stream's units stay in order)",
        minimum=1,
        shown_default="usable cores",
        group="TTS",
        user=True,
    )
    """One 1-thread session per core: on an idle 2-core machine 2 slots gave 1.52x raw Piper's audio per second
    and first audio p50 0.17-0.19 s at 8 streams, where 1 slot gave 0.80x and 0.5-0.7 s; the event loop's
    largest stall under 16 streams stayed at 10-11 ms (docs/tts.md, "Core budget")."""
    tts_threads: int = setting(1, "onnxruntime threads of each speech slot's session", minimum=1, group="TTS")
    tts_device: str = setting(
        "auto",
        "where Piper voices run: cpu, cuda (onnxruntime's CUDA provider: onnxruntime-gpu) or auto (cuda when "
        "Whisper runs on CUDA and onnxruntime can use the GPU, else cpu)",
        choices=("cpu", "cuda", "auto"),
        group="GPU",
        user=True,
    )
    """With cuda, the server refuses to start when onnxruntime cannot run on the GPU, with one line saying why
    (runners/piper.py ``place_voices``); auto then keeps the voices on the CPU and logs why."""
    tts_mixed_slots: int = setting(
        CORES,
        "speech slots used while Whisper windows are queued or running (the rest of the cores stay for ASR)",
        minimum=1,
        shown_default="usable cores",
        group="TTS",
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
        group="TTS",
    )
    """A lone stream's units cannot run in parallel (they play in order), so the idle cores go into that
    unit instead: its first audio comes sooner."""
    asr_niceness: int = setting(
        10,
        "how much nicer (lower CPU priority) Whisper's threads run than the speech threads in the engine",
        minimum=0,
        maximum=19,
        group="TTS",
    )
    """Speech plays in real time and transcription is batch work: when both want a core, speech should win.
    Linux gives a thread 1.25x less CPU weight per step of niceness (docs/tts.md)."""
    tts_max_loaded_voices: int = setting(
        4, "Piper voices kept loaded in the engine (least recently used unloaded)", minimum=1, group="TTS", user=True
    )
    tts_order: str = setting(
        "deadline",
        "order of speech units: deadline (earliest playback deadline first) or fifo (first come, first served)",
        choices=("deadline", "fifo"),
        group="TTS",
    )
    tts_cost_headroom: float = 1.25
    """Factor on the estimated synthesis time of speech units when the scheduler decides whether a new stream can
    start now without making a playing stream run dry; no flag: 1.15 started the last of 16 streams a little
    sooner, but under mixed load a speech stream stalled in 3 of 4 rounds at 1.15 and in none at 1.25
    (docs/tts.md)."""
    max_loaded_models: int = setting(
        2,
        "Whisper models loaded in the engine at once, the default one included; another model's first request "
        "unloads the one least recently used that has no work",
        minimum=1,
        group="models",
        user=True,
    )
    """Each loaded model holds its weights once per --engine-workers replica (tiny.en int8: 95 MB, base: 160 MB
    resident, measured in docs/models.md)."""
    model_ttl_s: float = setting(
        300.0,
        "seconds a Whisper model other than the default (the first --model) stays loaded with no work; 0 = until "
        "--max-loaded-models makes room",
        minimum=0,
        group="models",
    )
    speaker_model: str = setting(
        "",
        "the speaker encoder for diarization (response_format=diarized_json): ge2e or campplus (the weights "
        "python -m voxlane.speakers.weights --model NAME fetched into the environment), or a .npz it made; "
        "empty: the default encoder",
        shown_default="ge2e (the environment's share/voxlane/ge2e-resemblyzer-0.1.4.npz)",
        group="models",
        user=True,
    )
    """Without the file the server still starts and transcribes; diarized_json is then a 400 that says how to get it."""
    speaker_check_model: str = setting(
        "campplus",
        "the encoder that decides diarization's speaker count: each candidate speaker's speech joined into a few "
        "seconds, embedded whole and compared with its nearest speakers' (campplus, ge2e or a .npz, as "
        "--speaker-model); none: the count from --speaker-model's embeddings alone",
        group="models",
    )
    """Without its weights the engine logs a warning and the count comes from the embeddings alone."""
    speaker_threads: int = setting(
        1,
        "threads of the speaker encoders (onnxruntime's) in the engine process, on their own executor thread",
        minimum=1,
        group="ASR",
    )
    """The encoder costs about 0.7 s of one core per minute of speech (docs/diarization.md): one thread beside
    Whisper's is enough on 2 cores."""
    tts_preload: tuple[str, str] | None = None
    """(model, config) paths of the voice to load at start, so the first request does not pay for it."""
    warm_up_beam_sizes: tuple[int, ...] = ()
    """Beam sizes besides --beam-size that requests ask for (a live turn's final: --realtime-beam-size),
    decoded once on a GPU before the engine says it is ready (runners/whisper.py ``warm_up``)."""

    def __post_init__(self) -> None:
        if self.device in ("cpu", "cuda"):
            fill_by_device(self, self.device)

    @property
    def is_placed(self) -> bool:
        """Whether the device and the compute type are resolved (and so the settings by device)."""
        return self.device in ("cpu", "cuda") and self.compute_type != "auto"

    def placed(self, device: str, compute_type: str) -> EngineConfig:
        """This config once the engine knows where Whisper runs (runners/cuda.place): ``device`` and
        ``compute_type`` resolved, and the settings by device still unset given their defaults on ``device``
        (config/device.py ``defaults_for``)."""
        return replace(self, device=device, compute_type=compute_type)
