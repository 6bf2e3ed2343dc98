"""HTTP wire types, with OpenAI's names and shapes. Nothing here touches the engine."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from voxlane.languages import LANGUAGES

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt"]
Task = Literal["transcribe", "translate"]
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
LANGUAGE_CODES = frozenset(LANGUAGES)


class ServerVad(BaseModel):
    """OpenAI's ``chunking_strategy`` object: cut the audio at pauses that voice activity detection finds."""

    model_config = {"extra": "forbid"}

    type: Literal["server_vad"]
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """Speech probability at which speech starts; higher needs louder, clearer speech."""
    prefix_padding_ms: int = Field(default=300, ge=0, le=10_000)
    """Audio kept before (and after) each stretch of speech, in milliseconds."""
    silence_duration_ms: int = Field(default=200, ge=0, le=10_000)
    """Silence that ends a stretch of speech, in milliseconds."""


ChunkingStrategy = Literal["auto", "none"] | ServerVad
"""``auto`` (VAD with the defaults above), a ``server_vad`` object, or ``none`` (voxlane's: no VAD, fixed
30 s windows cut at the quietest point; OpenAI's behaviour when the field is absent)."""


class TranscriptionRequest(BaseModel):
    """The form fields of /v1/audio/transcriptions and /v1/audio/translations, except ``file``."""

    model: str
    language: str | None = None
    prompt: str | None = Field(default=None, max_length=4096)
    response_format: ResponseFormat = "json"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    timestamp_granularities: list[Literal["segment", "word"]] = Field(default_factory=list)
    stream: bool = False
    chunking_strategy: ChunkingStrategy | None = None
    """None: the server's default (--chunking-strategy)."""

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        value = value.strip().lower()
        if value not in LANGUAGE_CODES:
            raise ValueError(f"'{value}' is not a Whisper language code; send an ISO-639-1 code such as 'en' or 'de'")
        return value


class TranscriptionWord(BaseModel):
    word: str
    start: float
    end: float


class TranscriptionSegment(BaseModel):
    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float


class Usage(BaseModel):
    type: Literal["duration"] = "duration"
    seconds: float


class Transcription(BaseModel):
    text: str
    usage: Usage | None = None


class VerboseTranscription(BaseModel):
    task: Task = "transcribe"
    language: str
    duration: float
    text: str
    segments: list[TranscriptionSegment] | None = None
    words: list[TranscriptionWord] | None = None
    usage: Usage | None = None


ModelKind = Literal["transcription", "speech"]


class ModelCard(BaseModel):
    """One id a client may send as ``model=``: OpenAI's four fields, then voxlane's ``kind`` (transcription:
    /v1/audio/transcriptions and translations; speech: /v1/audio/speech) and ``root``, the model the id
    names (an alias's root is another id)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "voxlane"
    kind: ModelKind
    root: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class SpeechRequest(BaseModel):
    """The JSON body of /v1/audio/speech. ``input``'s length limit is the server's (--max-speech-input-chars)."""

    model: str
    input: str
    voice: str
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    sample_rate: int | None = Field(default=None, ge=8000, le=48000)
    instructions: str | None = None
    """Accepted for compatibility with OpenAI's gpt-4o-mini-tts; Piper voices ignore it."""


class VoiceCard(BaseModel):
    id: str
    object: Literal["voice"] = "voice"
    model: str = "piper"
    builtin: bool
    aliases: list[str] = Field(default_factory=list)


class VoiceList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VoiceCard]
