"""PyAV 19 (the first for Python 3.12 only) dropped av.open's ``metadata_errors``: compressed uploads
(mp3, m4a, opus) must still decode there."""

from __future__ import annotations

from typing import Any

import av
import pytest

from tests.conftest import DEV_DIR
from voxlane.audio.decode import decode_audio


def test_an_mp3_decodes_with_a_pyav_without_metadata_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    mp3 = next(DEV_DIR.glob("audio/*.mp3"), None)
    if mp3 is None:
        pytest.skip(f"no mp3 in {DEV_DIR}")
    real_open = av.open
    calls: list[dict[str, Any]] = []

    def open_19(file: Any, mode: str = "r", **kwargs: Any) -> Any:
        calls.append(kwargs)
        if "metadata_errors" in kwargs:
            raise TypeError("open() got an unexpected keyword argument 'metadata_errors'")
        return real_open(file, mode=mode, **kwargs)

    monkeypatch.setattr(av, "open", open_19)
    decoded = decode_audio(mp3.read_bytes(), 600.0)
    assert decoded.duration_s > 1.0
    assert calls[0] == {"metadata_errors": "ignore"} and calls[-1] == {}
