"""Known speakers' reference clips (``known_speaker_references[]``): data URLs in, the encoder's input out.
Runs on the API process's audio pool; every problem is a 400 that names the clip and says what to send."""

from __future__ import annotations

import base64
import binascii

import numpy as np

from voxlane.audio.decode import decode_audio
from voxlane.errors import InvalidRequest, PayloadTooLarge, UnsupportedAudio
from voxlane.speakers.features import speaker_features, speech_regions

MIN_S, MAX_S = 2.0, 10.0
"""OpenAI's bounds on a reference clip's duration."""
PARAM = "known_speaker_references"


def _bad(index: int, what: str) -> InvalidRequest:
    return InvalidRequest(
        f"known_speaker_references[{index}] {what}; send a data URL such as 'data:audio/wav;base64,...' of "
        f"{MIN_S:g} to {MAX_S:g} s of that speaker alone (wav, mp3, flac, ogg or anything FFmpeg reads)",
        param=PARAM,
        code="invalid_speaker_reference",
    )


def data_url_bytes(url: str, index: int) -> bytes:
    """The bytes of a ``data:[<type>];base64,<data>`` URL."""
    head, sep, payload = url.strip().partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise _bad(index, "is not a base64 data URL")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(index, "is not valid base64") from None


def reference_features(url: str, index: int, fbank: bool = True) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(speaker features, one region spanning its speech) of a reference clip; the filterbanks only with
    ``fbank``."""
    data = data_url_bytes(url, index)
    try:
        audio = decode_audio(data, MAX_S + 1.0)
    except PayloadTooLarge:
        raise _bad(index, f"is longer than {MAX_S:g} s") from None
    except UnsupportedAudio as exc:
        raise _bad(index, f"is not audio that can be decoded ({exc.message})") from None
    if audio.duration_s < MIN_S or audio.duration_s > MAX_S:
        raise _bad(index, f"holds {audio.duration_s:.2f} s of audio")
    mel = speaker_features(audio.samples, fbank=fbank)
    regions = speech_regions(mel)
    if not regions:
        raise _bad(index, "holds no speech")
    return mel, [(regions[0][0], regions[-1][1])]
