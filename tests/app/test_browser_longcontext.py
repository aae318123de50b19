"""The Long context page in Chromium: a click on a block of the chosen head's overview opens the
exact close-up of that block, its queries and keys where the click was, and the link reopens it."""

import pytest

from tests.support.browserkit import (
    HOW_TO_GET_CHROMIUM,
    SHOTS,
    chromium_path,
    full_page_screenshot,
    streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")

CLOSE_UP = "exact weights of queries"


def _titles(page) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map("
                         "g => (g.layout.title && g.layout.title.text) || '')")


def test_a_click_on_the_heads_overview_opens_that_blocks_exact_weights(browser):
    with streamlit_server() as base, browser.tab() as page:
        page.goto(base + "/long-context?long_text=constitution&long_blocks=16&long_head=1")
        # the page draws after its background jobs: the strip of what is kept is the last figure
        # and the close-up, which plotly.js may draw after it on a loaded machine
        for title in ("evicted", CLOSE_UP):
            page.wait_for_function("(t) => [...document.querySelectorAll('.js-plotly-plot')].some("
                                   "g => g.layout && g.layout.title && g.layout.title.text.includes(t))", arg=title,
                                   timeout=180_000)
        before = next(t for t in _titles(page) if CLOSE_UP in t)
        # the centre of block (row 10, column 3) of the head's overview (the plot whose title names the blocks)
        q, k, xy = page.evaluate("""() => {
            const g = [...document.querySelectorAll('.js-plotly-plot')].find(
                g => g.layout.title && g.layout.title.text.includes('blocks of'));
            g.scrollIntoView(); const t = g._fullData[0], L = g._fullLayout, box = g.getBoundingClientRect();
            return [t.y[10], t.x[3], [box.left + L._size.l + L.xaxis.l2p(t.x[3]),
                                      box.top + L._size.t + L.yaxis.l2p(t.y[10])]]; }""")
        page.mouse.click(*xy)
        want = f"{CLOSE_UP} {int(q):,}–"  # the close-up's rows start at the clicked block's query
        keys = f"over keys {int(k):,}–"
        page.wait_for_function("([want, keys]) => [...document.querySelectorAll('.js-plotly-plot')].some("
                               "g => g.layout.title && g.layout.title.text.includes(want) && "
                               "g.layout.title.text.includes(keys))", arg=[want, keys], timeout=60_000)
        # the corner is in the link: the link reopens the same close-up
        page.wait_for_function("(q) => location.search.includes('long_q0=' + q)", arg=str(int(q)), timeout=30_000)
        link = page.url
        page.goto(link)
        page.wait_for_function("(want) => [...document.querySelectorAll('.js-plotly-plot')].some("
                               "g => g.layout.title && g.layout.title.text.includes(want))", arg=want,
                               timeout=180_000)
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some("
                               "g => g.layout.title && g.layout.title.text.includes('evicted'))", timeout=180_000)
        full_page_screenshot(page, SHOTS / "long-context.png")
    assert want not in before and int(q) > 0 and int(k) > 0
    assert f"long_q0={int(q)}" in link and f"long_k0={int(k)}" in link
