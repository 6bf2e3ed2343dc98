"""IPC messages between the API process and the engine process, and their framing. Nothing else.

A message crosses ZMQ as one multipart message: frame 0 is the msgpack-encoded struct (tagged, so the
receiver dispatches on type); a ``WindowRequest`` adds frame 1, the raw float32 log-mel buffer, and a
``SpeechAudio`` adds frame 1, the raw int16 PCM it synthesised; both sent without a copy and never pickled.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np


class TranscribeOptions(msgspec.Struct, frozen=True):
    task: str = "transcribe"
    """'transcribe' or 'translate'."""
    language: str | None = None
    """ISO code; None lets a multilingual model detect it."""
    prompt: str | None = None
    temperature: float = 0.0
    word_timestamps: bool = False
    prefix: str | None = None
    """Text forced as the start of the window's transcript: what was said in the audio that opens the
    window (a live final's previous turns, read again as context). The result holds only what follows it,
    without timestamps, and the window is decoded in one pass."""
    beam_size: int | None = None
    """Beam size of this window's decode (live work: 1 for a partial, ``--realtime-beam-size`` for a final);
    None: the engine's ``--beam-size``. The temperature fallback samples one candidate, as ever."""
    logprobs: bool = False
    """Give each segment its tokens' log-probabilities (``include[]=logprobs``), from the word alignment's
    pass (the same pass as ``word_timestamps``)."""
    timestamps: bool = True
    """Decode with Whisper's timestamp tokens: segments with their times, and continuation passes where a
    decode stops before its window's audio does. False where the response shows no times (json or text,
    no word timestamps; --decode-timestamps): a request of one window is then read as one segment, in one
    pass; a longer request keeps the timestamps (runners/whisper_prompts.py ``no_timestamps``)."""


class WindowRequest(msgspec.Struct, tag="window"):
    """One window (at most 30 s) of one request. ``features`` travels in frame 1, not here."""

    request_id: str
    index: int
    count: int
    """How many windows the request has in all."""
    offset_s: float
    """True start of the window in the original audio, in seconds."""
    duration_s: float
    n_frames: int
    """Mel frames that hold audio (the rest is padding up to 30 s)."""
    n_mels: int
    options: TranscribeOptions
    speech: list[tuple[float, float]] | None = None
    """(start, end) in seconds of the original audio of the speech that voice activity detection found in
    this window (audio/vad.py: the window's loud frames, or Silero's padded spans; clipped to the window);
    None when it did not run."""
    deadline_s: float | None = None
    """Live work (a realtime session's decode): the engine should start it within this many seconds of
    receiving it. It is ordered by that deadline among the batch windows' fair start times, so it jumps
    ahead of a long file's later windows but not of work that was due before it. None: batch work."""
    model: str = ""
    """Directory of the Whisper model that decodes this window; "" for the engine's default model (the first
    --model). The engine loads another model on its first window (a ``LoadModel`` usually came first)."""
    partial: bool = False
    """A live partial decode of a turn still open: its features are cut to the audio (not padded to 30 s,
    which costs the encoder ~10x less on a few seconds), and it is decoded once, with no temperature
    fallback and no continuation; the next partial or the turn's final decode replaces its text."""

    @property
    def is_live(self) -> bool:
        """A realtime session's decode (it has a deadline), not batch work."""
        return self.deadline_s is not None


class SpeakerWindow(msgspec.Struct, tag="speaker"):
    """Speaker embeddings of one window (or one known speaker's reference clip) of a diarized transcription:
    one embedding per span, the mean of the 1.6 s partials that cover it. Its 40-band mel power spectrogram
    (``n_frames`` x 40, 10 ms frames: voxlane/speakers/features.py) travels in frame 1. The engine answers
    with one ``SpeakerResult``."""

    request_id: str
    index: int
    count: int
    """How many windows and references the request has in all."""
    n_frames: int
    spans: list[tuple[int, int]]
    """(first, end) frames of the speech regions to embed."""
    check: bool = False
    """Embed with the count check's encoder (--speaker-check-model), each span whole: stretches of one
    cluster's speech joined, which decide whether a candidate speaker is one (server/diarized.py)."""


class SpeechUnit(msgspec.Struct, tag="speech"):
    """One unit (a sentence, or a clause of a long one) of a speech stream, already phonemised.

    The voice is named by path, resolved once at admission: replacing or deleting a voice gives it a
    new path, so a unit never runs on a voice it did not ask for.
    """

    request_id: str
    index: int
    last: bool
    """True for the stream's final unit: the engine forgets the stream after it."""
    model_path: str
    config_path: str
    phoneme_ids: list[int]
    length_scale: float
    """Piper's length scale: the voice's own divided by the requested speed."""
    noise_scale: float
    noise_w_scale: float
    speaker_id: int | None = None
    marks: list[int] = []
    """Phoneme id indices whose start sample the engine reports back (``SpeechAudio.marks``): where each
    word of the unit starts and ends; empty when the request asked for no timings."""


class LoadModel(msgspec.Struct, tag="load"):
    """Load the Whisper model in directory ``model`` unless it is loaded (it then counts as used now). The
    engine answers with one ``ModelLoaded`` once it is ready, or failed to load."""

    request_id: str
    model: str


class UnloadModel(msgspec.Struct, tag="unload"):
    """Unload the Whisper model in directory ``model`` now, unless it is the default or has work (windows
    waiting, queued or running, or its load under way). The engine answers at once with one ``ModelUnloaded``."""

    request_id: str
    model: str


class Abort(msgspec.Struct, tag="abort"):
    request_id: str


class Shutdown(msgspec.Struct, tag="shutdown"):
    pass


class ProbeVoice(msgspec.Struct, tag="probe"):
    """Load an uploaded voice and make it speak a few phonemes, to check it before it is accepted. The
    engine answers with one ``VoiceProbed``."""

    request_id: str
    model_path: str
    config_path: str


class Word(msgspec.Struct):
    word: str
    start: float
    end: float
    probability: float


class TokenLogprob(msgspec.Struct, array_like=True):
    token: str
    """The token's text (a piece of a character that UTF-8 spreads over several tokens reads as U+FFFD)."""
    bytes: list[int]
    """The token's own UTF-8 bytes."""
    logprob: float


class Segment(msgspec.Struct):
    start: float
    end: float
    text: str
    tokens: list[int]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    temperature: float
    words: list[Word] | None = None
    logprobs: list[TokenLogprob] | None = None
    """One per text token, when the request asked for them (TranscribeOptions.logprobs)."""
    beam_size: int = 1
    """The beam of the decode that read it (1: greedy, and the temperature fallback's sampled decodes)."""


class WindowResult(msgspec.Struct, tag="result"):
    request_id: str
    index: int
    language: str
    segments: list[Segment]
    error: str | None = None
    passes: int = 1
    """Decode passes the window took (more than 1 when its decode stopped early and was continued)."""
    short: bool = False
    """It was encoded on a short window (``--short-window-pad-s``, ``--short-final-pad-s``) and read there."""
    whole_retry: bool = False
    """A live final whose short read looped, decoded again on all 30 s (``--short-final-pad-s``)."""
    beam_size: int = 1
    """The beam of the window's first decode: the request's, or the scheduler's load-adaptive choice
    (``--beam-size`` while the engine keeps up, else 1 with the doubt beam)."""


class SpeakerResult(msgspec.Struct, tag="speakers"):
    """The embeddings of one ``SpeakerWindow``: ``vectors`` is float32, one row of ``dim`` per span."""

    request_id: str
    index: int
    vectors: bytes
    dim: int
    partials: list[int]
    """Partials embedded for each span (the span's weight in clustering)."""
    error: str | None = None

    def array(self) -> np.ndarray:
        return np.frombuffer(self.vectors, dtype=np.float32).reshape(len(self.partials), self.dim)


class SpeechAudio(msgspec.Struct, tag="audio"):
    """The audio of one ``SpeechUnit``: mono int16 PCM in frame 1 (empty on error)."""

    request_id: str
    index: int
    sample_rate: int
    error: str | None = None
    marks: list[int] | None = None
    """The sample offset in this unit's audio of each of ``SpeechUnit.marks``; None when the voice gives no
    alignment."""


class VoiceProbed(msgspec.Struct, tag="probed"):
    """The verdict on one ``ProbeVoice``."""

    request_id: str
    problem: str | None = None
    """None when the voice loads and speaks; else the file at fault: 'config' or 'model'."""
    reason: str = ""
    """What is wrong with that file, for the uploader."""


class ModelLoaded(msgspec.Struct, tag="loaded"):
    """The answer to one ``LoadModel``."""

    request_id: str
    model: str
    error: str | None = None
    """Why the model could not load; None when it is ready."""


class ModelUnloaded(msgspec.Struct, tag="unloaded"):
    """The answer to one ``UnloadModel``."""

    request_id: str
    model: str
    was_loaded: bool = False
    """It was loaded and is unloaded now; False: it was not loaded (nothing to do) or it was refused."""
    refused: str | None = None
    """Why it stays loaded (the default model, or work in flight on it); None when it is not loaded now."""


class ModelState(msgspec.Struct):
    """One Whisper model the engine has loaded since it started, for /metrics and GET /v1/models."""

    model: str
    """Its directory."""
    loaded: bool
    memory_bytes: int
    """Resident memory the engine grew by while it loaded (0 when not loaded)."""
    loads: int
    unloads: int
    load_seconds: float
    """Seconds its loads took, in all."""


class Ready(msgspec.Struct, tag="ready"):
    model_path: str
    is_multilingual: bool
    n_mels: int
    speakers: str | None = None
    """Why the engine cannot diarize (its speaker encoder did not load), for a 400's message; None: it can."""
    count_check: bool = False
    """Whether it loaded the count check's encoder (--speaker-check-model): ``SpeakerWindow.check``."""
    speaker_fbank: bool = False
    """Whether its regions' encoder reads the filterbanks of a window's speaker features (CAM++), not just the
    mel (GE2E): the API process computes them only then (voxlane/speakers/features.py)."""
    check_fbank: bool = False
    """Whether the count check's encoder reads only the filterbanks of a stretch's features (CAM++): the API
    process then leaves the mel's columns zero rather than compute them."""


class Histogram(msgspec.Struct):
    """Observations since the engine started, as Prometheus keeps them: ``buckets[i]`` counts the values
    at most ``bounds[i]`` (cumulative), ``count`` all of them, ``total`` their sum."""

    bounds: list[float]
    buckets: list[int]
    count: int = 0
    total: float = 0.0


class EngineStats(msgspec.Struct, tag="stats"):
    """The engine's counters, sent whole about once a second (cumulative: a lost one loses nothing). The
    API process keeps the latest and shows it on /metrics."""

    pid: int
    """The engine process, whose memory, CPU and open files the API process reads from /proc."""
    waiting_windows: int
    """Windows queued in the engine's scheduler, not yet in a batch."""
    waiting_speech_units: int
    running_batches: int
    batch_size: Histogram
    """Windows per Whisper batch."""
    batch_seconds: Histogram
    """How long each Whisper batch ran on the model."""
    models: list[ModelState] = msgspec.field(default_factory=list)


class EngineFailed(msgspec.Struct, tag="failed"):
    """The engine could not start (bad model, ...); the reason is for the operator."""

    reason: str


EngineInput = WindowRequest | SpeakerWindow | SpeechUnit | ProbeVoice | LoadModel | UnloadModel | Abort | Shutdown
EngineOutput = (
    WindowResult
    | SpeakerResult
    | SpeechAudio
    | VoiceProbed
    | ModelLoaded
    | ModelUnloaded
    | Ready
    | EngineFailed
    | EngineStats
)

_encoder = msgspec.msgpack.Encoder()
_input_decoder = msgspec.msgpack.Decoder(EngineInput)
_output_decoder = msgspec.msgpack.Decoder(EngineOutput)


def encode_input(msg: EngineInput, features: np.ndarray | None = None) -> list[bytes | memoryview]:
    frames: list[bytes | memoryview] = [_encoder.encode(msg)]
    if features is not None:
        frames.append(np.ascontiguousarray(features, dtype=np.float32).data.cast("B"))
    return frames


def decode_input(frames: Sequence[bytes | memoryview]) -> tuple[EngineInput, np.ndarray | None]:
    msg = _input_decoder.decode(frames[0])
    features = None
    if isinstance(msg, WindowRequest):
        features = np.frombuffer(frames[1], dtype=np.float32).reshape(msg.n_mels, -1)
    elif isinstance(msg, SpeakerWindow):
        features = np.frombuffer(frames[1], dtype=np.float32).reshape(msg.n_frames, -1)
    return msg, features


def encode_output(msg: EngineOutput, pcm: np.ndarray | None = None) -> list[bytes | memoryview]:
    frames: list[bytes | memoryview] = [_encoder.encode(msg)]
    if isinstance(msg, SpeechAudio):
        audio = np.empty(0, dtype=np.int16) if pcm is None else np.ascontiguousarray(pcm, dtype=np.int16)
        frames.append(audio.data.cast("B"))
    return frames


def decode_output(frames: Sequence[bytes | memoryview]) -> tuple[EngineOutput, np.ndarray | None]:
    msg = _output_decoder.decode(frames[0])
    pcm = None
    if isinstance(msg, SpeechAudio):
        pcm = np.frombuffer(frames[1], dtype=np.int16)
    return msg, pcm
