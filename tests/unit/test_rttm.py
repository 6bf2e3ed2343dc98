"""NIST RTTM lines (voxlane/speakers/rttm.py): the file id from an upload's name, and one line per turn."""

from __future__ import annotations

import pytest

from voxlane.speakers.rttm import rttm_file_id, to_rttm


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("call.wav", "call"),
        ("my call (1).mp3", "my_call_1"),
        ("C:\\rec\\meeting.2024.flac", "meeting.2024"),
        ("/tmp/a/b/noext", "noext"),
        ("", "audio"),
        (None, "audio"),
        ("  .wav", "audio"),
    ],
)
def test_file_id_is_the_stem_without_spaces(filename: str | None, expected: str) -> None:
    assert rttm_file_id(filename) == expected


def test_one_speaker_line_per_turn_to_three_decimals() -> None:
    text = to_rttm("call", [(0.1234, 2.5, "A"), (2.6, 3.0004, "agent smith")])
    assert text == (
        "SPEAKER call 1 0.123 2.377 <NA> <NA> A <NA> <NA>\nSPEAKER call 1 2.600 0.400 <NA> <NA> agent_smith <NA> <NA>\n"
    )
    assert to_rttm("call", []) == ""
