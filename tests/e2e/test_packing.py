"""Short requests that share an encoder pass (--pack-short-s) each get exactly their own words, through a
real server: adversarial pairs batched together (the same sentence twice, a clip cut mid-word, silence,
noise, a clip whose last word runs to its end)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.conftest import DEV_DIR, ServerProcess, metric, running_server
from tests.wer import normalise
from voxlane.audio.decode import decode_audio

RATE = 16000
OWN = {
    "stella": {"please", "call", "stella"},
    "forward": {"go", "forward", "ten", "meters", "metres", "10"},
    "firefox": {"fire", "fox", "firefox"},
}
"""Each clip's words: the three sentences share none."""


@pytest.fixture(scope="module")
def packing_server() -> Iterator[ServerProcess]:
    # One worker and a batch that waits up to 2 s to fill: requests sent together are batched together. Packing
    # shares 30 s windows: with short windows on (the default), clips of 8 s or less would be encoded short.
    # Timestamp tokens everywhere else, so that only packing decodes without them.
    with running_server(
        "--pack-short-s", "12", "--short-window-pad-s", "0", "--decode-timestamps", "always",
        "--max-batch-size", "16", "--max-batch-wait-ms", "2000", "--engine-workers", "1",
    ) as srv:  # fmt: skip
        yield srv


def _wav(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    sf.write(out, samples, RATE, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _clips() -> dict[str, tuple[bytes, set[str]]]:
    def load(name: str) -> np.ndarray:
        return decode_audio((DEV_DIR / "audio" / name).read_bytes(), 60.0).samples

    stella, forward, firefox = (
        load("vctk_p225_001_mic1_48k.flac"),
        load("cmu_goforward.wav"),
        load("cv_en_22058266.mp3"),
    )
    loud = np.flatnonzero(np.abs(firefox) > 0.05 * np.abs(firefox).max())
    noise = np.random.default_rng(3).standard_normal(2 * RATE).astype(np.float32) * 0.03
    return {
        "stella": (_wav(stella), OWN["stella"]),
        "stella again": (_wav(stella), OWN["stella"]),  # the same sentence twice in one pack
        "forward": (_wav(forward), OWN["forward"]),
        "forward cut mid-word": (_wav(forward[: int(len(forward) * 0.6)]), OWN["forward"]),
        "silence": (_wav(np.zeros(2 * RATE, dtype=np.float32)), set()),
        "noise": (_wav(noise), set()),
        "firefox to its last sample": (_wav(firefox[: loud[-1] + 1]), OWN["firefox"]),  # the last word runs to the end
    }


def test_packed_requests_each_get_exactly_their_own_words(packing_server: ServerProcess) -> None:
    url = packing_server.base_url
    clips = _clips()
    before = httpx.get(url + "/metrics").text

    def transcribe(item: tuple[str, tuple[bytes, set[str]]]) -> tuple[str, str]:
        name, (audio, _) = item
        r = httpx.post(
            url + "/v1/audio/transcriptions",
            files={"file": (name + ".wav", audio)},
            data={"model": "whisper-1"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        return name, r.json()["text"]

    with ThreadPoolExecutor(len(clips)) as pool:
        texts = dict(pool.map(transcribe, clips.items()))
    after = httpx.get(url + "/metrics").text
    packed = metric(after, "voxlane_windows_packed_total") - metric(before, "voxlane_windows_packed_total")
    print(f"\n{packed:.0f} windows packed: {texts}")
    assert packed >= 4, "the requests did not share encoder passes: the test proves nothing"

    everyone = set().union(*OWN.values())
    for name, text in texts.items():
        words = set(normalise(text).split())
        own = clips[name][1]
        assert not (words & (everyone - own)), f"{name!r} got another request's words: {text!r}"
        if own and "cut" not in name:
            assert words & own, f"{name!r} lost its own words: {text!r}"
    assert normalise(texts["stella"]).split().count("stella") == 1
    assert normalise(texts["stella again"]).split().count("stella") == 1
    assert texts["silence"] == ""


def test_a_lone_short_request_is_not_packed(packing_server: ServerProcess) -> None:
    before = metric(httpx.get(packing_server.base_url + "/metrics").text, "voxlane_windows_packed_total")
    r = httpx.post(
        packing_server.base_url + "/v1/audio/transcriptions",
        files={"file": ("a.flac", (DEV_DIR / "audio" / "vctk_p225_001_mic1_48k.flac").read_bytes())},
        data={"model": "whisper-1", "response_format": "verbose_json"},
        timeout=120,
    )
    assert r.status_code == 200 and "stella" in r.json()["text"].lower()
    after = metric(httpx.get(packing_server.base_url + "/metrics").text, "voxlane_windows_packed_total")
    assert after == before
