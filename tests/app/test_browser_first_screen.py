"""The first screen, as a newcomer at a 1366 × 768 laptop and a teacher at a 1024 × 768 projector meet
it, in Chromium: every token labelled, labels as typed, the chosen view in sight, presenter mode one
view a screen, a sidebar of what the page reads, and a short link."""

from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, SHOTS, chromium_path, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")

LAPTOP, PROJECTOR = (1366, 768), (1024, 768)
THIRTEEN = "The quick brown fox jumps over the lazy dog and runs far away"


@contextmanager
def _open(browser, base: str, path: str, size: tuple[int, int]):
    with browser.tab(*size) as page:
        page.goto(base + path)
        wait_idle(page, 60_000)
        yield page


def _ticks(page, axis: str) -> list[dict]:
    """The first chart's drawn tick labels on ``axis`` ("x" or "y"): text, font size, box."""
    return page.evaluate("""axis => [...document.querySelector('.js-plotly-plot').querySelectorAll(
        '.' + axis + 'tick text')].map(e => { const r = e.getBoundingClientRect();
        return {text: e.textContent, size: parseFloat(getComputedStyle(e).fontSize),
                left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })""", axis)


def _overlaps(boxes: list[dict], along: str) -> list[tuple[str, str]]:
    lo, hi = ("left", "right") if along == "x" else ("top", "bottom")
    boxes = sorted(boxes, key=lambda b: b[lo])
    return [(a["text"], b["text"]) for a, b in zip(boxes, boxes[1:], strict=False) if b[lo] < a[hi] - 0.5]


@pytest.mark.parametrize("tokens, size, present", [(13, LAPTOP, False), (20, LAPTOP, False), (24, LAPTOP, False),
                                                   (13, PROJECTOR, True)])
def test_every_token_is_labelled_once_per_column_and_row_of_heads(server, browser, tokens, size, present):
    words = (THIRTEEN.split() * 2)[:tokens] if tokens <= 13 else [f"word{i}" for i in range(tokens)]
    words = THIRTEEN.split() if tokens == 13 else words
    path = f"/?heads=8&text={quote(' '.join(words))}" + ("&present=1" if present else "")
    with _open(browser, server, path, size) as page:
        xs, ys = _ticks(page, "x"), _ticks(page, "y")
        cols, rows = len(xs) // tokens, len(ys) // tokens
        assert cols * rows >= 8 and len(xs) == cols * tokens and len(ys) == rows * tokens
        assert [t["text"] for t in xs] == words * cols and [t["text"] for t in ys] == words * rows
        assert min(t["size"] for t in xs + ys) >= 10
        assert not _overlaps(xs, "x") and not _overlaps(ys, "y")
        if present:  # one view, one screen: every head's block and label inside the projector's 768 px
            titles = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot .annotation')]"
                                   ".map(e => e.getBoundingClientRect().bottom)")
            assert len(titles) == 8 and max(t["bottom"] for t in xs) <= size[1] and max(titles) <= size[1]
        page.screenshot(path=str(SHOTS / f"first-screen-{tokens}-{'present' if present else 'laptop'}.png"))


def test_labels_are_the_text_as_typed(server, browser):
    text = 'She said "hello" & <b>left</b> it\'s'
    with _open(browser, server, f"/?heads=2&mask=none&text={quote(text)}", LAPTOP) as page:
        shown = [t["text"] for t in _ticks(page, "x")]
        assert {'"', "&", "<", ">", "hello", "left"} <= set(shown) and any("'" in s for s in shown), shown
        assert not any("&quot;" in s or "&amp;" in s or "&#" in s for s in shown)
        assert page.locator(".js-plotly-plot b").count() == 0  # markup in a label never renders


@pytest.mark.parametrize("view", ["Output vectors", "One head", "Query focus"])
def test_the_chosen_view_comes_into_sight_at_a_laptops_size(server, browser, view):
    with _open(browser, server, f"/?heads=8&text={quote(THIRTEEN)}", LAPTOP) as page:
        page.get_by_role("radio", name=view, exact=True).click()
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 1 && "
                               "!document.querySelector('[data-testid=stStatusWidget]')", timeout=60_000)
        page.wait_for_timeout(500)
        top = page.evaluate("() => document.querySelector('.js-plotly-plot').getBoundingClientRect().top")
        assert top < LAPTOP[1] - 200, f"{view}'s chart starts at {top} px, out of sight"


@pytest.mark.parametrize("path, text_box", [("/", True), ("/why-scale", False), ("/image-patches", False),
                                            ("/audio-frames", False), ("/graph-nodes", False),
                                            ("/attention-file", False), ("/cross-attention", True)])
def test_the_sidebar_draws_the_text_box_only_where_the_page_reads_it(server, browser, path, text_box):
    with _open(browser, server, path, LAPTOP) as page:
        boxes = page.locator("[data-testid=stSidebar] [data-testid=stTextArea]").count()
        assert boxes == (1 if text_box else 0)


def test_the_link_is_short(server, browser):
    with _open(browser, server, "/", LAPTOP) as page:
        assert len(page.url) <= 200 and not urlsplit(page.url).query
        page.goto(server + f"/?heads=8&mask=none&text={quote(THIRTEEN)}")
        wait_idle(page, 60_000)
        params = parse_qsl(urlsplit(page.url).query)
        assert len(params) <= 8 and dict(params) == {"heads": "8", "mask": "none", "text": THIRTEEN}
