"""NIST RTTM, the file that diarization scorers (dscore, pyannote.metrics, md-eval) read: one line per speaker
turn, ``SPEAKER <file id> 1 <start> <duration> <NA> <NA> <speaker> <NA> <NA>``. Written for
``response_format=rttm`` and by ``voxlane bench diarize --rttm-dir``."""

from __future__ import annotations

import re
from collections.abc import Iterable

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
"""RTTM's fields are split at whitespace: anything but these in a file id or a speaker name becomes ``_``."""


def rttm_file_id(filename: str | None) -> str:
    """The upload's file name without its folders and last extension, safe as one RTTM field; ``audio`` when
    the upload has none."""
    name = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name.strip(".") else name
    return _UNSAFE.sub("_", stem.strip()).strip("_") or "audio"


def to_rttm(file_id: str, turns: Iterable[tuple[float, float, str]]) -> str:
    """One ``SPEAKER`` line per (start, end, speaker) turn, times in seconds to 3 decimals."""
    lines = []
    for start_s, end_s, name in turns:
        speaker = _UNSAFE.sub("_", name.strip()).strip("_") or "speaker"
        start, end = round(start_s, 3), round(end_s, 3)
        lines.append(f"SPEAKER {file_id} 1 {start:.3f} {max(0.0, end - start):.3f} <NA> <NA> {speaker} <NA> <NA>\n")
    return "".join(lines)
