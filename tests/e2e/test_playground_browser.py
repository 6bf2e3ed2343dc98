"""The playground at / in a real headless Chromium (Debian's, driven by Playwright), against real servers:
a dev clip transcribed from a file, a sentence spoken and played as it streams, a live turn from a fake
microphone (a dev clip played as the capture device), a model loaded from the Server tab and unloaded by
its TTL, and the API key asked for and sent."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Clip, ServerProcess, running_server
from tests.e2e.test_demo_browser import CHROMIUM, fake_microphone
from voxlane.bench.wer import wer

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
KEY = "sk-playground-test-key"
TTL_S = 3


def dev_clip(dev_set: list[Clip]) -> Clip:
    return next(c for c in dev_set if c.text.startswith("Many complicated ideas"))


@pytest.fixture(scope="module")
def browser(dev_set: list[Clip], tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    wav = fake_microphone(dev_clip(dev_set), tmp_path_factory.mktemp("mic") / "microphone.wav")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={wav}%noloop",
                "--autoplay-policy=no-user-gesture-required",
            ],
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[ServerProcess]:
    """A server with an API key whose models other than the default unload after TTL_S idle seconds."""
    with running_server("--api-key", KEY, "--model-ttl-s", str(TTL_S)) as srv:
        yield srv


def test_a_file_is_transcribed_and_its_words_play_from_where_they_are_clicked(
    server: ServerProcess, dev_set: list[Clip], page: object
) -> None:
    clip = dev_clip(dev_set)
    page.goto(server.base_url + "/")  # type: ignore[attr-defined]
    page.set_input_files("#t-file", str(clip.path))  # type: ignore[attr-defined]
    page.click("#t-go")  # type: ignore[attr-defined]
    page.wait_for_selector("#t-result button.word", timeout=60_000)  # type: ignore[attr-defined]
    words = page.locator("#t-result button.word").all_inner_texts()  # type: ignore[attr-defined]
    assert wer([clip.text], [" ".join(words)]) <= 0.25, words
    word = page.locator("#t-result button.word").nth(4)  # type: ignore[attr-defined]
    start_s = float(word.get_attribute("data-start"))
    word.click()
    assert float(page.evaluate("document.getElementById('t-audio').currentTime")) >= start_s - 0.01  # type: ignore[attr-defined]
    # the clicked word is highlighted first, then a later one as the audio plays on
    page.wait_for_function(  # type: ignore[attr-defined]
        """(start) => { const a = document.getElementById('t-audio');
            const cur = document.querySelector('#t-result .word.current');
            return a.currentTime >= start + 1 && cur && Number(cur.dataset.start) > start; }""",
        arg=start_s,
        timeout=20_000,
    )


def test_streamed_text_arrives_in_the_page(server: ServerProcess, dev_set: list[Clip], page: object) -> None:
    clip = dev_clip(dev_set)
    page.goto(server.base_url + "/")  # type: ignore[attr-defined]
    page.set_input_files("#t-file", str(clip.path))  # type: ignore[attr-defined]
    page.select_option("#t-format", "json")  # type: ignore[attr-defined]
    page.click("#t-go")  # type: ignore[attr-defined]
    page.wait_for_function("document.getElementById('t-status').textContent === 'done'", timeout=60_000)  # type: ignore[attr-defined]
    text = page.inner_text("#t-result")  # type: ignore[attr-defined]
    assert wer([clip.text], [text]) <= 0.25, text


def test_speech_plays_as_it_streams_and_the_spoken_word_is_highlighted(server: ServerProcess, page: object) -> None:
    page.goto(server.base_url + "/#speak")  # type: ignore[attr-defined]
    page.fill("#s-input", "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods.")  # type: ignore[attr-defined]
    page.click("#s-go")  # type: ignore[attr-defined]
    # the Web Audio graph carries sound (its analyser sees samples) and the playing position moves on
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => { const s = document.getElementById('s-played').dataset; return s.heard === 'true' && s.seconds > 0.5; }",
        timeout=30_000,
    )
    page.wait_for_function("document.getElementById('s-status').textContent.startsWith('done')", timeout=30_000)  # type: ignore[attr-defined]
    if page.locator("#s-words .word").count() == 0:  # type: ignore[attr-defined]
        pytest.skip("this server's speech events carry no `words` (timestamps=['word'] is not served yet)")
    page.wait_for_function("Number(document.getElementById('s-words').dataset.current) >= 3", timeout=30_000)  # type: ignore[attr-defined]


def test_a_live_turn_from_the_microphone(server: ServerProcess, dev_set: list[Clip], page: object) -> None:
    clip = dev_clip(dev_set)
    page.goto(server.base_url + "/#live")  # type: ignore[attr-defined]
    page.click("#l-start")  # type: ignore[attr-defined]
    page.wait_for_selector("#l-transcript p.final", timeout=45_000)  # type: ignore[attr-defined]
    finals = page.locator("#l-transcript p.final").all_inner_texts()  # type: ignore[attr-defined]
    assert not page.inner_text("#l-errors")  # type: ignore[attr-defined]
    assert wer([clip.text], [" ".join(finals)]) <= 0.25, finals
    assert page.locator("#l-timeline span[data-end]").count() >= 1  # type: ignore[attr-defined]
    assert "speech started" in page.inner_text("#l-events")  # type: ignore[attr-defined]


def test_the_page_asks_for_the_key_and_sends_it(keyed_server: ServerProcess, page: object) -> None:
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/v1/models" in r.url else None)  # type: ignore[attr-defined]
    page.goto(keyed_server.base_url + "/")  # type: ignore[attr-defined]
    page.wait_for_selector("#key-form:not([hidden])", timeout=10_000)  # type: ignore[attr-defined]
    page.fill("#api-key", KEY)  # type: ignore[attr-defined]
    page.click("#key-use")  # type: ignore[attr-defined]
    page.wait_for_selector("#t-model option", state="attached", timeout=10_000)  # type: ignore[attr-defined]
    assert f"Bearer {KEY}" in sent, sent
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0  # type: ignore[attr-defined]


def test_a_model_loads_from_the_server_tab_and_unloads_after_its_ttl(keyed_server: ServerProcess, page: object) -> None:
    models = httpx.get(keyed_server.base_url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]
    if not any(m["id"] == "whisper-base" for m in models):
        pytest.skip("whisper-base is not installed (the dev extra installs it)")
    page.goto(keyed_server.base_url + "/#server")  # type: ignore[attr-defined]
    page.fill("#api-key", KEY)  # type: ignore[attr-defined]
    page.click("#key-use")  # type: ignore[attr-defined]
    row = '#m-table tr[data-model="whisper-base"]'
    page.wait_for_selector(f'{row}[data-loaded="false"]', timeout=10_000)  # type: ignore[attr-defined]
    page.click(f"{row} button")  # type: ignore[attr-defined]
    page.wait_for_selector(f'{row}[data-loaded="true"]', timeout=60_000)  # type: ignore[attr-defined]
    memory = page.inner_text(f"{row} td:nth-child(5)")  # type: ignore[attr-defined]
    assert memory.endswith("MiB"), memory
    page.wait_for_selector(f'{row}[data-loaded="false"]', timeout=30_000)  # type: ignore[attr-defined]
    assert page.inner_text("#chart-requests output") != "–"  # type: ignore[attr-defined]
