"""The Circuit page in Chromium: a click on a scored edge's diamond opens its exact effect; a click on an
exact path's diamond opens that path (the receiver's attention with and without it patched), a click on a
cell of that attention opens its score in parts, and the link then holds them; on a projector the
attribution graph is the first screen."""

from contextlib import contextmanager

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

# The centre of a trace's point, in page pixels: the trace is picked by name (or the last one) in the chart whose
# title holds ``title``; ``pick`` chooses the point from the trace's customdata.
POINT = """([title, name, pick]) => {
    const g = [...document.querySelectorAll('.js-plotly-plot')].find(
        g => g.layout.title && g.layout.title.text.replace(/<br>/g, " ").includes(title));
    g.scrollIntoView({block: 'center'});
    const t = name ? g._fullData.find(t => t.name === name) : g._fullData[g._fullData.length - 1];
    const i = t.customdata.findIndex(c => JSON.stringify(c) === JSON.stringify(pick));
    const L = g._fullLayout, box = g.getBoundingClientRect();
    const px = (ax, v) => ax.l2p(ax.type === 'category' ? ax._categories.indexOf(v) : v);  // a category: its index
    return i < 0 ? null : [box.left + L._size.l + px(L.xaxis, t.x[i]), box.top + L._size.t + px(L.yaxis, t.y[i])];
}"""


def _wait_text(page, text: str, timeout: int = 120_000) -> None:
    page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=text, timeout=timeout)


def _wait_chart(page, title: str, timeout: int = 60_000) -> None:
    # A title in lines (presenter mode's wrap_title) is matched as one line.
    page.wait_for_function("(t) => [...document.querySelectorAll('.js-plotly-plot')].some(g => g.layout && "
                           "g.layout.title && g.layout.title.text.replace(/<br>/g, ' ').includes(t))", arg=title,
                           timeout=timeout)


def _click_until(page, chart: list, text: str, tries: int = 5) -> None:
    """Click ``chart``'s point (POINT's arguments) until the page shows ``text``. Each click waits for the run
    before it to end: on a loaded machine a click on a chart the rerun is about to draw again is lost."""
    for _ in range(tries):
        page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)
        page.wait_for_timeout(300)
        xy = page.evaluate(POINT, chart)
        assert xy is not None, chart
        page.mouse.click(*xy)
        try:
            _wait_text(page, text, timeout=20_000)
            return
        except sync_api.TimeoutError:
            continue
    raise AssertionError(f"{text!r} not shown after {tries} clicks on {chart}")


@pytest.fixture(scope="module")
def server(learned_defaults):
    """``python -m ui.server`` on the trained defaults (their runs folder), one for the module: its tests read
    the same prompts' head sweep, which the server computes once and shares."""
    with streamlit_server(env={"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"])}) as base:
        yield base


@contextmanager
def _circuit(server, browser, width: int, query: str):
    """The Circuit page on the trained defaults, ``query`` added to the model's, in a window ``width`` × 768 (a tab
    of the module's Chromium)."""
    with browser.tab(width, 768) as page:
        page.goto(server + "/circuit?model=watch-it-learn&" + query)
        yield page


def test_a_click_on_an_edge_opens_it_and_a_click_on_a_cell_splits_its_score(server, browser):
    with _circuit(server, browser, 1366, "circuit_threshold=0&circuit_composition=none") as page:
        _wait_text(page, "One path: L0 H", timeout=300_000)
        # another edge than the circuit's own: the value path from L0 H1 into L1 H1
        _wait_chart(page, "the circuit found by the numbers")
        _click_until(page, ["the circuit found by the numbers", "edges", ["v", 0, 1, 1, 1]],
                     "One path: L0 H1 → L1 H1, into its values")
        page.wait_for_function("() => location.search.includes('circuit_edge=v%3A0.1-1.1')", timeout=30_000)
        # a cell of the receiver's attention with the path patched: query 12, key 5
        _wait_chart(page, "patched")
        _click_until(page, ["patched", None, [12, 5]], "query 12 · key 5, split into parts")
        page.wait_for_function("() => location.search.includes('circuit_cell=12.5')", timeout=30_000)
        assert "L1 H1, query" in page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map("
                                               "g => g.layout.title.text).join(' | ')")
        full_page_screenshot(page, SHOTS / "circuit.png")


def test_a_click_on_a_scored_edge_opens_its_exact_effect(server, browser):
    with _circuit(server, browser, 1366, "circuit_method=eap") as page:
        _wait_chart(page, "edges of largest |score|", timeout=300_000)
        _click_until(page, ["edges of largest |score|", "edges", ["a0.h0->a1.h0<k>"]], "a0.h0->a1.h0<k>: score")
        page.wait_for_function("() => location.search.includes('circuit_link=a0.h0-%3Ea1.h0%3Ck%3E')",
                               timeout=30_000)
        assert "exact effect" in page.evaluate("() => document.body.innerText")


def test_on_a_projector_the_graph_is_the_first_screen(server, browser):
    """Presenter mode at 1024 × 768: the attribution graph, whole, in the first screen (the prompts, the
    definitions and the settings folded away above it)."""
    with _circuit(server, browser, 1024, "present=1") as page:
        _wait_chart(page, "edges of largest |score|", timeout=300_000)
        _wait_text(page, "exact effect")
        page.wait_for_timeout(500)
        box = page.evaluate("""() => { const g = [...document.querySelectorAll('.js-plotly-plot')].find(
            g => g.layout.title.text.includes('edges of largest')); const b = g.getBoundingClientRect();
            return [b.top, b.bottom, window.scrollY]; }""")
        assert box[2] == 0 and 0 <= box[0] and box[1] <= 768, box
        assert page.get_by_text("Prompts, answer, definitions and threshold").is_visible()
        assert not page.get_by_text("Clean prompt").is_visible()  # folded
        page.screenshot(path=str(SHOTS / "circuit-presenter.png"))  # the projector's first screen
