"""A Piper voice's ``.onnx.json``, parsed in one place: for the text front end (API process) and for the
runner and the upload probe (engine process). Imports no model runtime."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class VoiceConfig:
    """What phonemisation and synthesis need from a voice's ``.onnx.json``, and its inference defaults."""

    espeak_voice: str
    phoneme_type: str
    phoneme_id_map: Mapping[str, Sequence[int]]
    sample_rate: int
    length_scale: float
    noise_scale: float
    noise_w_scale: float
    num_speakers: int
    hop_length: int = 256
    """Audio samples per frame of the model's phoneme durations (Piper's VITS voices: 256)."""

    @classmethod
    def from_config(cls, config: dict) -> VoiceConfig:
        inference = config.get("inference", {})
        return cls(
            espeak_voice=config["espeak"]["voice"],
            phoneme_type=config.get("phoneme_type", "espeak"),
            phoneme_id_map=config["phoneme_id_map"],
            sample_rate=int(config["audio"]["sample_rate"]),
            length_scale=float(inference.get("length_scale", 1.0)),
            noise_scale=float(inference.get("noise_scale", 0.667)),
            noise_w_scale=float(inference.get("noise_w", 0.8)),
            num_speakers=int(config.get("num_speakers", 1)),
            hop_length=int(config.get("audio", {}).get("hop_length", config.get("hop_length", 256))),
        )


@lru_cache(maxsize=64)
def load_voice_config(config_path: str) -> VoiceConfig:
    """Parse a voice config. Paths are never reused for other content (see voxlane/voices.py), so caching
    by path is safe. Raises ValueError saying what is missing (OSError when the file cannot be read)."""
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    try:
        voice = VoiceConfig.from_config(config)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"the voice config lacks a Piper field ({exc})") from None
    if voice.phoneme_type not in ("espeak", "text"):
        raise ValueError(f"phoneme_type {voice.phoneme_type!r} is not supported; voxlane speaks espeak and text voices")
    return voice
