"""HTTP wire types, with OpenAI's names and shapes, and the OpenAPI schema of the multipart forms that the
routes read by hand (``multipart_body``). Nothing here touches the engine."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from voxlane.languages import LANGUAGES

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt", "diarized_json", "rttm"]
Task = Literal["transcribe", "translate"]
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt", "diarized_json", "rttm")
DIARIZED_FORMATS = ("diarized_json", "rttm")
"""The response formats that say who spoke when: both run diarization."""
SPEAKER_COUNT_FIELDS = ("num_speakers", "min_speakers", "max_speakers")
"""voxlane's speaker-count hints, named as pyannote names them."""
MAX_KNOWN_SPEAKERS = 4
"""OpenAI's limit on known_speaker_names[] / known_speaker_references[]."""
KNOWN_SPEAKER_REFERENCE_S = (2.0, 10.0)
"""OpenAI's bounds on each reference clip's duration, in seconds."""
LANGUAGE_CODES = frozenset(LANGUAGES)


class ServerVad(BaseModel):
    """OpenAI's ``chunking_strategy`` object: cut the audio at pauses that voice activity detection finds."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

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

CHUNKING_HINT = (
    "send chunking_strategy='auto', 'none' or a server_vad object such as "
    '{"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 200} '
    "(threshold 0 to 1, durations 0 to 10000 ms)"
)

FORM_RULE = "voxlane_form_rule"
"""The pydantic error type of a request's own rules that a field's type cannot say (which fields go together,
how a form spells an object): its message is the whole message, its ``ctx["param"]`` the field to blame."""


def _rule(message: str, param: str) -> PydanticCustomError:
    return PydanticCustomError(FORM_RULE, message, {"param": param})


class TranscriptionRequest(BaseModel):
    """The form fields of /v1/audio/transcriptions and /v1/audio/translations, except ``file``. The field
    docstrings are the API's documentation (``/docs``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    model: str = Field(examples=["whisper-1"])
    """The Whisper model: ``whisper-1`` or the served model's name (GET /v1/models)."""
    language: str | None = Field(default=None, examples=["en"])
    """The audio's language, an ISO-639-1 code; left out, Whisper detects it. English-only models take only
    ``en``."""
    prompt: str | None = Field(default=None, max_length=4096)
    """Text that precedes the audio (names, spelling, style); Whisper continues from it."""
    response_format: ResponseFormat = "json"
    """``json`` and ``text``: the text; ``verbose_json``: segments (and words) with timestamps; ``srt``,
    ``vtt``: subtitles; ``diarized_json``: segments with their speaker (``A``, ``B``, ... or a known speaker's
    name), on /v1/audio/transcriptions only."""
    temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    """Sampling temperature; 0 decodes greedily."""
    timestamp_granularities: list[Literal["segment", "word"]] = Field(default_factory=list)
    """Timestamps to return, with ``response_format=verbose_json`` only; ``segment`` when left out."""
    stream: bool = False
    """``true``: server-sent events, ``transcript.text.delta`` as each window's text is final, then
    ``transcript.text.done``; with ``response_format`` ``json`` or ``text`` only."""
    chunking_strategy: ChunkingStrategy | None = None
    """``auto`` or a ``server_vad`` object (sent as JSON): decode only the speech that voice activity detection
    finds; ``none``: all of the audio in 30 s windows. Left out: the server's ``--chunking-strategy``."""
    include: list[Literal["logprobs"]] = Field(default_factory=list)
    """``logprobs``: each text token's log-probability (``logprobs: [{token, bytes, logprob}]``), in the
    ``json`` response and in the stream's events; with ``response_format=json`` only, as OpenAI's."""
    keywords: list[str] = Field(default_factory=list, max_length=100)
    """Words and names to expect (OpenAI's field for its newer models): voxlane puts them in the decoder's
    prompt, before ``prompt``'s text (docs/openai-compatibility.md); at most 100, of 4,096 characters in all,
    as ``prompt``."""
    known_speaker_names: list[str] = Field(default_factory=list)
    """With ``diarized_json``: names of up to 4 speakers, each paired with the clip at the same place in
    ``known_speaker_references``; their segments carry these names, other speakers still get letters."""
    known_speaker_references: list[str] = Field(default_factory=list)
    """With ``diarized_json``: data URLs (``data:audio/wav;base64,...``) of 2 to 10 s of each known speaker
    alone, in any format ``file`` takes."""
    num_speakers: int | None = Field(default=None, ge=1)
    """voxlane's, as pyannote's: with ``diarized_json`` or ``rttm``, the number of speakers in the audio, when
    known: exactly that many are found (fewer only when the audio has fewer stretches of speech)."""
    min_speakers: int | None = Field(default=None, ge=1)
    """voxlane's, as pyannote's: with ``diarized_json`` or ``rttm``, at least this many speakers."""
    max_speakers: int | None = Field(default=None, ge=1)
    """voxlane's, as pyannote's: with ``diarized_json`` or ``rttm``, at most this many speakers (and at most the
    server's ``--diarize-max-speakers``)."""
    languages: list[str] = Field(default_factory=list)
    """Accepted for OpenAI's clients; Whisper decodes one language per request (``language``), so this is
    ignored (docs/openai-compatibility.md)."""

    @model_validator(mode="before")
    @classmethod
    def _chunking_strategy_as_a_form_sends_it(cls, data: Any) -> Any:
        """``chunking_strategy`` as the model reads it. A form sends it as 'auto' (or 'none'), as a JSON object
        in one field (curl), or as bracketed fields, ``chunking_strategy[type]=server_vad`` and so on (the openai
        client's multipart encoding of an object)."""
        if not isinstance(data, dict):
            return data
        fields = dict(data)
        nested = {
            key[len("chunking_strategy[") : -1]: fields.pop(key)
            for key in list(fields)
            if isinstance(key, str) and key.startswith("chunking_strategy[") and key.endswith("]")
        }
        raw = fields.get("chunking_strategy")
        if nested:
            if raw is not None:
                raise _rule(f"chunking_strategy is sent twice; {CHUNKING_HINT}", "chunking_strategy")
            fields["chunking_strategy"] = nested
        elif isinstance(raw, str):
            raw = raw.strip()
            if raw.startswith("{"):
                try:
                    fields["chunking_strategy"] = json.loads(raw)
                except json.JSONDecodeError:
                    raise _rule(f"chunking_strategy is not valid JSON; {CHUNKING_HINT}", "chunking_strategy") from None
            elif raw in ("", "null"):
                fields.pop("chunking_strategy")
            else:
                fields["chunking_strategy"] = raw
        return fields

    @model_validator(mode="after")
    def _fields_fit_the_response_format(self) -> TranscriptionRequest:
        """The fields that only some response formats have a place for. ``diarized_json`` has rules of its own,
        some of which need the server (can it diarize?): the route checks those (server/diarized.py)."""
        fmt = self.response_format
        if self.stream and fmt not in ("json", "text", "diarized_json"):
            raise _rule(
                "stream=true sends text deltas (or diarized segments); use response_format 'json', 'text' or "
                "'diarized_json' with it (rttm is one file: send it without stream)",
                "stream",
            )
        if fmt in DIARIZED_FORMATS:
            return self._speaker_counts_agree()
        hinted = next((name for name in SPEAKER_COUNT_FIELDS if getattr(self, name) is not None), None)
        if hinted is not None:
            raise _rule(
                f"{hinted} tells diarization how many speakers to find; send it with response_format='diarized_json' "
                "or 'rttm', or leave it out",
                hinted,
            )
        if self.include and fmt != "json":
            raise _rule(
                "include[]=logprobs needs response_format='json' (OpenAI's rule: the other formats have no place "
                "for them)",
                "include",
            )
        if self.timestamp_granularities and fmt != "verbose_json":
            raise _rule("timestamp_granularities needs response_format='verbose_json'", "timestamp_granularities")
        return self

    def _speaker_counts_agree(self) -> TranscriptionRequest:
        """min_speakers <= max_speakers; num_speakers, which wins as in pyannote, must lie within them."""
        low, high, num = self.min_speakers, self.max_speakers, self.num_speakers
        if low is not None and high is not None and low > high:
            raise _rule(
                f"min_speakers ({low}) is more than max_speakers ({high}); send min_speakers <= max_speakers",
                "min_speakers",
            )
        if num is not None and ((low is not None and num < low) or (high is not None and num > high)):
            raise _rule(
                f"num_speakers ({num}) is outside min_speakers..max_speakers ({low or 1}..{high or 'any'}); send "
                "num_speakers alone, or bounds that hold it",
                "num_speakers",
            )
        return self

    @field_validator("keywords")
    @classmethod
    def _keywords_fit_a_prompt(cls, value: list[str]) -> list[str]:
        if sum(len(k) for k in value) > 4096:
            raise ValueError("the keywords hold more than 4096 characters in all; send fewer or shorter ones")
        return value

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
    beam_size: int = 1
    """voxlane's: the beam of the decode that read the segment (1: greedy; load-adaptive decoding picks it)."""


class Usage(BaseModel):
    type: Literal["duration"] = "duration"
    seconds: float


class Logprob(BaseModel):
    token: str
    bytes: list[int]
    """The token's UTF-8 bytes (a character split over tokens is whole only in their bytes)."""
    logprob: float


class Transcription(BaseModel):
    text: str
    logprobs: list[Logprob] | None = None
    """With ``include[]=logprobs``."""
    usage: Usage | None = None


class VerboseTranscription(BaseModel):
    task: Task = "transcribe"
    language: str
    duration: float
    text: str
    segments: list[TranscriptionSegment] | None = None
    words: list[TranscriptionWord] | None = None
    usage: Usage | None = None


class DiarizedSegment(BaseModel):
    type: Literal["transcript.text.segment"] = "transcript.text.segment"
    id: str
    start: float
    end: float
    text: str
    speaker: str
    """``A``, ``B``, ... in order of first appearance, or a name from ``known_speaker_names``."""


class DiarizedTranscription(BaseModel):
    task: Literal["transcribe"] = "transcribe"
    duration: float
    text: str
    segments: list[DiarizedSegment]
    usage: Usage | None = None


ModelKind = Literal["transcription", "speech"]


class ModelCard(BaseModel):
    """One id a client may send as ``model=``: OpenAI's four fields, then voxlane's ``kind`` (transcription:
    /v1/audio/transcriptions and translations; speech: /v1/audio/speech) and ``root``, the model the id
    names (an alias's root is another id), and ``loaded``."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "voxlane"
    kind: ModelKind
    root: str
    loaded: bool
    """Whether the model is loaded in the engine now (speech: always; an alias: its root's)."""
    memory_bytes: int | None = None
    """Resident memory the engine grew by when it loaded this Whisper model (None: not loaded)."""


class ModelPullProgress(BaseModel):
    """An event of ``POST /v1/models/{id}?stream=true``: how much of the model's files is written."""

    type: Literal["model.pull.progress"] = "model.pull.progress"
    id: str
    downloaded_bytes: int
    total_bytes: int | None
    """None until the hub has told the files' sizes."""


class ModelPullDone(BaseModel):
    """The last event of a pull that worked: where the model is, and its card."""

    type: Literal["model.pull.done"] = "model.pull.done"
    id: str
    path: str
    model: ModelCard


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class RunningModels(BaseModel):
    """GET /api/ps, as speaches answers it."""

    models: list[str]
    """The Whisper models loaded now, by the names clients send."""


def _voice_schema(schema: dict[str, Any]) -> None:
    """``voice`` in /openapi.json: a name, or OpenAI's object ``{"id": name}`` (the validator makes it a name)."""
    schema.pop("type", None)
    schema["anyOf"] = [
        {"type": "string"},
        {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    ]


class SpeechRequest(BaseModel):
    """The JSON body of /v1/audio/speech. ``input``'s length limit is the server's (--max-speech-input-chars)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    model: str = Field(examples=["tts-1"])
    """``piper``, or one of its aliases ``tts-1``, ``tts-1-hd``, ``gpt-4o-mini-tts``."""
    input: str = Field(examples=["Hello there."])
    """The text to speak; at most ``--max-speech-input-chars`` characters."""
    voice: str = Field(examples=["joe"], json_schema_extra=_voice_schema)
    """A voice from GET /v1/audio/voices, by name or as ``{"id": name}``; OpenAI's names (``alloy``, ...) speak
    with the default voice."""
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    """The audio's format; ``pcm`` is raw 16-bit little-endian mono samples."""
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    """``audio``: the audio bytes, streamed as they are synthesised; ``sse``: server-sent events,
    ``speech.audio.delta`` (base64 audio) then ``speech.audio.done``."""
    sample_rate: int | None = Field(default=None, ge=8000, le=48000)
    """Resample the audio to this rate (Hz); left out, the voice's own rate."""
    instructions: str | None = None
    """Accepted for compatibility with OpenAI's gpt-4o-mini-tts; Piper voices ignore it."""
    timestamps: list[Literal["word"]] | None = None
    """A voxlane extension: ``["word"]`` adds each word's start and end (seconds of the audio) to the
    ``stream_format=sse`` events; needs ``stream_format=sse``."""

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_id(cls, value: Any) -> Any:
        """OpenAI's voice object, ``{"id": name}``, names the voice as its string does."""
        if isinstance(value, dict):
            if set(value) != {"id"} or not isinstance(value["id"], str):
                raise ValueError('send the voice as a name or as {"id": name}')
            return value["id"]
        return value


class VoiceCard(BaseModel):
    id: str
    object: Literal["voice"] = "voice"
    model: str = "piper"
    builtin: bool
    aliases: list[str] = Field(default_factory=list)


class VoiceList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VoiceCard]


VOICE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class VoiceUpload(BaseModel):
    """The text field of POST /v1/audio/voices; its two files are declared with ``multipart_body``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    name: str = Field(pattern=VOICE_NAME_PATTERN, examples=["my-voice"])
    """The voice's name: 1 to 64 letters, digits, '-' or '_', starting with a letter or digit, not a
    built-in name (``joe``, ``alloy``, ...). Uploading a name again replaces that voice."""


class VoiceDeleted(BaseModel):
    id: str
    object: Literal["voice"] = "voice"
    deleted: Literal[True] = True


class Health(BaseModel):
    status: Literal["ok", "starting", "restarting", "failed", "draining"] = "ok"
    """``ok`` while the engine serves; any other status comes with a 503."""
    engine_restarts: int = 0
    """Times the engine process was started again after it died."""
    reason: str | None = None
    """Why the server is not serving (absent while it is)."""


class ErrorDetail(BaseModel):
    message: str
    """What was wrong, and what to send instead."""
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error JSON, the body of every error response."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    error: ErrorDetail


class TranscriptTextDelta(BaseModel):
    """A server-sent event of a transcription with ``stream=true``: one window's text, once it is final."""

    type: Literal["transcript.text.delta"] = "transcript.text.delta"
    delta: str
    logprobs: list[Logprob] | None = None
    """The delta's tokens, with ``include[]=logprobs``."""


class TokenUsageDetails(BaseModel):
    audio_tokens: int
    """Whisper's encoder positions over the audio: 50 a second."""
    text_tokens: int
    """Tokens of the prompt and keywords."""


class TokenUsage(BaseModel):
    """OpenAI's token usage, as its streaming transcription models report it."""

    type: Literal["tokens"] = "tokens"
    input_tokens: int
    output_tokens: int
    """Text tokens decoded."""
    total_tokens: int
    input_token_details: TokenUsageDetails


class TranscriptTextDone(BaseModel):
    """The last event of a transcription stream: the whole text."""

    type: Literal["transcript.text.done"] = "transcript.text.done"
    text: str
    logprobs: list[Logprob] | None = None
    """Every token's, with ``include[]=logprobs``; a diarized stream sends no ``logprobs``."""
    usage: TokenUsage | Usage | None = None
    """Tokens; a diarized stream's, the audio's duration as its ``diarized_json`` response has it."""


class SpeechWord(BaseModel):
    """One word of the input and when it is heard: seconds from the start of the returned audio."""

    word: str
    start: float
    end: float


class SpeechAudioDelta(BaseModel):
    """A server-sent event of speech with ``stream_format=sse``: encoded audio, base64."""

    type: Literal["speech.audio.delta"] = "speech.audio.delta"
    audio: str
    words: list[SpeechWord] | None = None
    """With ``timestamps=["word"]``: the words whose audio ends in this chunk (absent otherwise)."""


class SpeechUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class SpeechAudioDone(BaseModel):
    """The last event of a speech stream."""

    type: Literal["speech.audio.done"] = "speech.audio.done"
    usage: SpeechUsage
    words: list[SpeechWord] | None = None
    """With ``timestamps=["word"]``: every word of the stream (absent otherwise; empty where the voice gives
    no alignment)."""


class CaptionedSpeechRequest(BaseModel):
    """The JSON body of POST /dev/captioned_speech (Kokoro-FastAPI's route, for clients written against it);
    fields it has that voxlane does not use (``lang_code``, ``volume_multiplier``, ...) are ignored."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    model: str = "tts-1"
    """A speech model's name, as for /v1/audio/speech; Kokoro's own ``kokoro`` speaks with ``piper`` too."""
    input: str = Field(examples=["Hello there."])
    voice: str = "joe"
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream: bool = True
    """True: newline-delimited JSON, one ``CaptionedSpeechResponse`` per audio chunk with the words it ends;
    False: one ``CaptionedSpeechResponse`` with all the audio and every word."""
    return_timestamps: bool = True


class WordTimestamp(BaseModel):
    word: str
    start_time: float
    end_time: float


class CaptionedSpeechResponse(BaseModel):
    audio: str
    """The audio (a chunk of it, when streamed), base64."""
    audio_format: str
    """The audio's media type (``audio/mpeg``, ...)."""
    timestamps: list[WordTimestamp] | None = None


_ERRORS = {
    400: "A bad field, or an upload that cannot be used; the message says what to send instead.",
    404: "An unknown model.",
    409: "A model that cannot be unloaded now: the default model, or one with work in flight.",
    413: "An upload or audio over the server's limits; the message names the option that raises it.",
    503: "The engine is down, overloaded or timed out.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses`` for these error statuses, each with OpenAI's error JSON. A catch-all ``4XX``
    (a wrong method, a client that went away) also stands in for FastAPI's 422, which voxlane never sends:
    its validation errors are 400s."""
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorResponse, "description": _ERRORS[status]} for status in statuses
    }
    responses["4XX"] = {"model": ErrorResponse, "description": "Another client error, in the same shape."}
    return responses


def sse_content(*events: type[BaseModel]) -> dict[str, Any]:
    """The ``text/event-stream`` media type of a response whose events are ``events``, each a ``data:`` line of
    JSON. Its ``schema`` describes one event, as OpenAPI 3.1 reads it (3.2 calls that ``itemSchema``). A stream
    that fails after it has started ends with an ``error`` event, OpenAI's error JSON with ``type: "error"``."""
    schemas = [_inlined_schema(event) for event in events]
    error = _inlined_schema(ErrorResponse)
    error.update(title="StreamError", description="The stream failed after it had started.")
    error.update(properties={"type": {"const": "error"}, **error["properties"]}, required=["type", "error"])
    data = {"type": "string", "contentMediaType": "application/json", "contentSchema": {"anyOf": [*schemas, error]}}
    return {"schema": {"type": "object", "properties": {"data": data, "event": {"type": "string"}}}}


def _inlined_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/$defs/{model}", mode="serialization")
    result: dict[str, Any] = _inline({k: v for k, v in schema.items() if k != "$defs"}, schema.get("$defs", {}))
    return result


def multipart_body(
    files: Mapping[str, str], fields: type[BaseModel], *, rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The OpenAPI ``requestBody`` of a multipart form that a route reads by hand, for ``openapi_extra``: the
    file parts ``files`` (name -> description), then ``fields``'s fields as text fields, under their wire
    names (``rename``: field -> wire name). A field that is None when left out is documented as optional
    text, since a form cannot send a null; an object-valued field is sent as JSON text."""
    schema = fields.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema.get("$defs", {})
    properties: dict[str, Any] = {
        name: {
            "type": "string",
            "format": "binary",
            "contentMediaType": "application/octet-stream",
            "description": text,
        }
        for name, text in files.items()
    }
    for name, prop in schema["properties"].items():
        properties[(rename or {}).get(name, name)] = _form_field(_inline(prop, defs))
    required = [*files, *((rename or {}).get(name, name) for name in schema.get("required", []))]
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {"type": "object", "properties": properties, "required": required},
                }
            },
        }
    }


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` with every ``$ref`` to ``defs`` replaced by a copy of its target (the body is not a component)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(copy.deepcopy(defs[ref.removeprefix("#/$defs/")]), defs)
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def _form_field(prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` without its null branch: in a form, leaving the field out is how to send None."""
    branches = [b for b in prop.get("anyOf", []) if b != {"type": "null"}]
    if len(branches) == len(prop.get("anyOf", [])):
        return prop
    rest = {key: value for key, value in prop.items() if key != "anyOf" and not (key == "default" and value is None)}
    if len(branches) == 1:
        return {**branches[0], **rest}
    return {"anyOf": branches, **rest}
