"""The /demo page in a real headless Chromium (Debian's, driven by Playwright) whose fake microphone plays a
dev-set file: the page captures it with an AudioWorklet, streams pcm16 over /v1/realtime and shows the text."""

from __future__ import annotations

import shutil
import wave
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from tests.conftest import Clip, ServerProcess
from voxlane.audio.pipeline import decode_and_split
from voxlane.bench.wer import wer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

CHROMIUM = "/usr/bin/chromium"


def fake_microphone(clip: Clip, path: Path) -> Path:
    """The clip as a 16-bit mono WAV at 48 kHz with 1 s of silence before and 2 s after (the fake capture
    device plays the file once, then silence: server_vad sees the end of the speech)."""
    from voxlane.audio.resample import resamplers

    audio = decode_and_split(clip.path.read_bytes(), 3600.0, 8.0)
    samples = np.concatenate([w.pcm for w in audio.windows]).astype(np.float32) / 32768.0
    samples = resamplers.resample(samples, 16000, 48000)
    samples = np.concatenate((np.zeros(48000, np.float32), samples, np.zeros(96000, np.float32)))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48000)
        out.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def launch(pw: Playwright, wav: Path) -> Browser:
    """Debian's Chromium whose fake microphone plays ``wav`` once, allowed to capture and to play sound."""
    return pw.chromium.launch(
        executable_path=CHROMIUM,
        args=[
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}%noloop",
            "--autoplay-policy=no-user-gesture-required",
        ],
    )


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_demo_page_transcribes_a_fake_microphone(
    server: ServerProcess, dev_set: list[Clip], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    clip = next(c for c in dev_set if c.text.startswith("Many complicated ideas"))
    wav = fake_microphone(clip, tmp_path / "microphone.wav")
    with sync_playwright() as pw:
        browser = launch(pw, wav)
        try:
            page = browser.new_page()
            page.goto(server.base_url + "/")
            page.click("text=live transcription demo")
            page.click("#start")
            page.wait_for_selector("#transcript p.final", timeout=45_000)
            finals = page.locator("#transcript p.final").all_inner_texts()
            errors = page.inner_text("#errors")
        finally:
            browser.close()
    assert not errors, errors
    assert wer([clip.text], [" ".join(finals)]) <= 0.25, finals
