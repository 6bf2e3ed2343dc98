"""The playground at / for a keyboard user and a low-vision user, in a real headless Chromium against real
servers: WCAG AA contrast of every visible text on every tab and in the states a user sees (results, the
word being played, partials, the key form, errors), 3:1 for focus outlines and control boundaries, and
the whole page by keyboard alone (the tabs follow the WAI-ARIA tabs pattern)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import Clip, ServerProcess, running_server
from tests.e2e.test_demo_browser import CHROMIUM, fake_microphone, launch
from tests.e2e.test_playground_browser import KEY, dev_clip

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
TABS = ("transcribe", "speak", "live", "server")

CHECKS = Path(__file__).with_name("a11y_checks.js")
"""``window.a11y``: the contrast, focus and tab-order checks, added to each page before its own scripts."""


def low_contrast(page: Page) -> tuple[list[dict[str, Any]], int]:
    """The texts under their WCAG AA ratio (or on an image, where no ratio is known), and how many were checked."""
    texts: list[dict[str, Any]] = page.evaluate("a11y.textContrast()")
    return [t for t in texts if t["image"] or t["ratio"] < t["need"]], len(texts)


def assert_contrast(page: Page, state: str, at_least: int = 1) -> None:
    failing, checked = low_contrast(page)
    assert checked >= at_least, f"{state}: only {checked} texts seen"
    assert not failing, f"{state}: under WCAG AA contrast: {failing}"


def assert_boundaries(page: Page, state: str) -> None:
    weak = [b for b in page.evaluate("a11y.boundaries()") if b["ratio"] < 3]
    assert not weak, f"{state}: control edges under 3:1 against their surroundings: {weak}"


def focused(page: Page) -> dict[str, Any] | None:
    result: dict[str, Any] | None = page.evaluate("a11y.focusIndicator()")
    return result


def key_of(info: dict[str, Any]) -> str:
    return str(info["id"] or f"{info['tag']}:{info['text']}")


def leave_page(page: Page, key: str = "Tab", limit: int = 80) -> None:
    """Press ``key`` until no element of the page has the focus: the next press starts at an end."""
    for _ in range(limit):
        if focused(page) is None:
            return
        page.keyboard.press(key)
    raise AssertionError(f"focus stayed in the page after {limit} presses of {key}")


def tab_through(page: Page, key: str = "Tab", limit: int = 80) -> list[dict[str, Any]]:
    """From outside the page, press Tab (or Shift+Tab) until focus leaves it or comes round again; what had
    the focus after each press."""
    leave_page(page, key)
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        page.keyboard.press(key)
        info = focused(page)
        if info is None or (seen and key_of(info) == key_of(seen[0])):
            return seen
        seen.append(info)
    raise AssertionError(f"focus never left the page after {limit} presses of {key}: {[key_of(i) for i in seen]}")


def press_until(page: Page, element_id: str, key: str = "Tab", limit: int = 80) -> None:
    for _ in range(limit):
        if page.evaluate("document.activeElement.id") == element_id:
            return
        page.keyboard.press(key)
    raise AssertionError(f"{limit} presses of {key} never reached #{element_id}")


def active_id(page: Page) -> str:
    return str(page.evaluate("document.activeElement.id"))


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
    context.add_init_script(path=CHECKS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[ServerProcess]:
    with running_server("--api-key", KEY) as srv:
        yield srv


def open_tab(page: Page, server: ServerProcess, tab: str) -> None:
    page.goto(f"{server.base_url}/#{tab}")
    page.wait_for_selector("#t-model option", state="attached")
    page.wait_for_selector("#s-voice option", state="attached")


def test_transcribe_tab_text_meets_wcag_aa_contrast(server: ServerProcess, dev_set: list[Clip], page: Page) -> None:
    open_tab(page, server, "transcribe")
    assert_contrast(page, "transcribe, empty", at_least=15)
    assert_boundaries(page, "transcribe, empty")
    page.click("#connection summary")  # the server URL field and its placeholder
    assert_contrast(page, "transcribe, server URL open", at_least=17)
    page.set_input_files("#t-file", str(dev_clip(dev_set).path))
    page.click("#t-go")
    page.wait_for_selector("#t-result button.word", timeout=60_000)
    page.locator("#t-result button.word").nth(2).click()  # plays from there: the word being played is marked
    page.wait_for_selector("#t-result .word.current")
    page.evaluate("document.getElementById('t-audio').pause()")
    assert_contrast(page, "transcribe, words with the one being played", at_least=25)
    # Diarized: each speaker has a colour, on white and on the highlight of the segment being played.
    page.select_option("#t-format", "diarized_json")
    page.click("#t-go")
    page.wait_for_selector("#t-result p.seg", timeout=60_000)
    segment = page.locator("#t-result p.seg").first
    colours = int(page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--speakers')"))
    assert colours >= 2
    for i in range(colours):
        segment.evaluate(f"(p) => {{ p.dataset.colour = '{i}'; }}")
        assert_contrast(page, f"transcribe, speaker colour {i}")
        segment.evaluate("(p) => p.classList.add('current')")
        assert_contrast(page, f"transcribe, speaker colour {i} being played")
        segment.evaluate("(p) => p.classList.remove('current')")
    assert_boundaries(page, "transcribe, diarized with known speakers")


def test_speak_tab_text_meets_wcag_aa_contrast(server: ServerProcess, page: Page) -> None:
    open_tab(page, server, "speak")
    assert_contrast(page, "speak", at_least=10)
    assert_boundaries(page, "speak")
    page.click("#s-go")
    page.wait_for_function("document.getElementById('s-status').textContent.startsWith('done')", timeout=30_000)
    page.wait_for_selector("#s-words .word.current", timeout=30_000)
    assert_contrast(page, "speak, spoken with the word being spoken", at_least=15)
    assert_boundaries(page, "speak, spoken")


def test_live_tab_text_meets_wcag_aa_contrast(server: ServerProcess, page: Page) -> None:
    open_tab(page, server, "live")
    assert_contrast(page, "live, idle", at_least=5)
    page.click("#l-start")
    page.wait_for_selector("#l-transcript p.partial:not(:empty)", timeout=45_000)
    assert_contrast(page, "live, a partial", at_least=8)
    page.wait_for_selector("#l-transcript p.final", timeout=45_000)
    assert_contrast(page, "live, a final", at_least=8)
    assert_boundaries(page, "live")
    page.click("#l-start")


def test_server_tab_key_form_and_errors_meet_wcag_aa_contrast(
    server: ServerProcess, keyed_server: ServerProcess, page: Page
) -> None:
    open_tab(page, server, "server")
    page.wait_for_selector("#m-table tbody tr")
    page.wait_for_function("document.querySelector('#chart-requests output').textContent !== '–'")
    assert_contrast(page, "server", at_least=30)
    assert_boundaries(page, "server")
    # A server that asks for a key: the form that asks, then a server that cannot be reached.
    page.goto(keyed_server.base_url + "/#server")
    page.wait_for_selector("#key-form:not([hidden])")
    assert_contrast(page, "the key form", at_least=10)
    assert_boundaries(page, "the key form")
    page.click("#connection summary")
    page.fill("#server-url", "http://127.0.0.1:9")
    page.click("#server-form button")
    page.wait_for_function("document.getElementById('errors').textContent !== ''")
    assert_contrast(page, "an error", at_least=10)


def assert_focus_outlines(page: Page, state: str) -> None:
    for info in tab_through(page):
        assert info["indicator"], f"{state}: no focus indicator on {info['where']}"
        assert info["outlinePx"] >= 2, f"{state}: focus outline thinner than 2 px: {info}"
        assert info["ratio"] >= 3, f"{state}: focus outline under 3:1 against what it is drawn on: {info}"


def test_focus_outlines_meet_3_to_1_on_every_tab(
    server: ServerProcess, keyed_server: ServerProcess, page: Page
) -> None:
    for tab in TABS:
        open_tab(page, server, tab)
        assert_focus_outlines(page, tab)
    page.goto(keyed_server.base_url + "/")
    page.wait_for_selector("#key-form:not([hidden])")
    assert_focus_outlines(page, "the key form")


def test_keyboard_alone_reaches_every_control_and_switches_tabs(server: ServerProcess, page: Page) -> None:
    # Playwright asks the browser to intercept file choosers without waiting for an answer when the first
    # listener is added; added here, long before the key press, the interception is on when the chooser opens.
    page.on("filechooser", lambda chooser: None)
    open_tab(page, server, "transcribe")
    for n, tab in enumerate(TABS):
        # Tab reaches every control of the tab shown (and only the selected tab of the tab list), in document
        # order, each with a visible focus indicator; Shift+Tab goes back the same way.
        expected = page.evaluate("a11y.tabbable()")
        assert [t for t in expected if t.startswith("tab-")] == [f"tab-{tab}"], expected
        forward = tab_through(page)
        assert [key_of(i) for i in forward] == expected, f"{tab}: Tab order"
        assert all(i["indicator"] for i in forward), [i["where"] for i in forward if not i["indicator"]]
        backward = tab_through(page, "Shift+Tab")
        assert [key_of(i) for i in backward] == expected[::-1], f"{tab}: Shift+Tab order"
        # The WAI-ARIA tabs pattern: the arrows move to the next tab and select it, showing its panel.
        press_until(page, f"tab-{tab}")
        nxt = TABS[(n + 1) % len(TABS)]
        page.keyboard.press("ArrowRight")
        assert active_id(page) == f"tab-{nxt}"
        assert page.get_attribute(f"#tab-{nxt}", "aria-selected") == "true"
        assert page.get_attribute(f"#tab-{tab}", "aria-selected") == "false"
        assert page.is_visible(f"#panel-{nxt}") and page.is_hidden(f"#panel-{tab}")
        page.keyboard.press("ArrowLeft")
        assert active_id(page) == f"tab-{tab}" and page.is_visible(f"#panel-{tab}")
        page.keyboard.press("ArrowRight")
    # The arrows go round the ends; Home and End go to the first and last tab.
    assert active_id(page) == "tab-transcribe"
    page.keyboard.press("ArrowLeft")
    assert active_id(page) == "tab-server" and page.is_visible("#panel-server")
    page.keyboard.press("Home")
    assert active_id(page) == "tab-transcribe" and page.is_visible("#panel-transcribe")
    page.keyboard.press("End")
    assert active_id(page) == "tab-server" and page.is_visible("#panel-server")
    # From a tab, Tab goes into its panel; the file field opens the file chooser from the keyboard.
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    assert active_id(page) == "t-file"
    with page.expect_file_chooser():
        page.keyboard.press("Space")


def test_a_model_button_keeps_the_focus_while_the_server_tab_polls(server: ServerProcess, page: Page) -> None:
    # The Server tab asks for /v1/models once a second; the rows are rebuilt only when the list changes,
    # so a keyboard user on a model's Load button stays there.
    open_tab(page, server, "server")
    button = '#m-table tr[data-model="whisper-base"] button'
    page.wait_for_selector(button)
    page.focus(button)
    for _ in range(2):
        with page.expect_response(lambda r: r.url.endswith("/v1/models")):
            pass
    page.evaluate("() => new Promise(requestAnimationFrame)")  # the answer's rows, if any, are in the page
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Load whisper-base"


def test_speech_starts_and_stops_from_the_keyboard(server: ServerProcess, page: Page) -> None:
    open_tab(page, server, "transcribe")
    press_until(page, "tab-transcribe")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")
    assert active_id(page) == "s-input"
    page.keyboard.press("Control+A")
    page.keyboard.type("Typed with the keyboard, then spoken.")
    press_until(page, "s-go")
    page.keyboard.press("Enter")
    page.wait_for_function("document.getElementById('s-played').dataset.seconds > 0.2", timeout=30_000)
    page.keyboard.press("Enter")  # Speak again (the focus stays on Speak), then Stop with the space bar
    page.keyboard.press("Tab")
    assert active_id(page) == "s-stop"
    page.keyboard.press("Space")
    assert page.inner_text("#s-status") == "stopped"


def test_the_key_form_works_from_the_keyboard(keyed_server: ServerProcess, page: Page) -> None:
    page.goto(keyed_server.base_url + "/")
    page.wait_for_selector("#key-form:not([hidden])")
    assert active_id(page) == "api-key"  # the form takes the focus
    page.keyboard.type(KEY)
    page.keyboard.press("Enter")
    page.wait_for_selector("#t-model option", state="attached")
