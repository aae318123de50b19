"""The Patching page in a real browser: the default link draws its pictures, and a click on a
head of the heatmap opens that head (AppTest cannot click a Plotly chart)."""

from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.support.browserkit import (
    HOW_TO_GET_CHROMIUM,
    SHOTS,
    chromium_path,
    full_page_screenshot,
    streamlit_server,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")


@pytest.fixture(scope="module")
def server(learned_defaults):
    with streamlit_server(env={"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"])}) as base:
        yield base


def test_a_click_on_a_head_opens_it_on_both_prompts(server, browser, tmp_path):
    with browser.tab() as page:
        page.goto(server + "/patching")
        page.wait_for_selector("text=Head L1 H0: it brings back", timeout=90_000)
        wait_idle(page, timeout=60_000)
        body = page.inner_text("[data-testid=stMain]")
        assert "Traceback" not in body and "(patched − corrupted) / (clean − corrupted)" in body
        full_page_screenshot(page, SHOTS / "patching.png")
        # the middle of cell L0 H1 of the first chart (the heads heatmap)
        xy = page.evaluate("""() => { const g = document.querySelectorAll('.js-plotly-plot')[0];
            const L = g._fullLayout, box = g.getBoundingClientRect();
            return [box.left + L._size.l + L.xaxis.l2p(1), box.top + L._size.t + L.yaxis.l2p(0)]; }""")
        page.mouse.click(*xy)
        page.wait_for_function("() => new URLSearchParams(location.search).get('patched') === '0.1'",
                               timeout=30_000)
        page.wait_for_selector("text=Head L0 H1: it brings back", timeout=30_000)
        wait_idle(page)
        page.screenshot(path=str(tmp_path / "patching-opened.png"))
        assert dict(parse_qsl(urlsplit(page.url).query))["model"] == "watch-it-learn"
        titles = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map("
                               "g => g._fullLayout.title.text)")
        assert "L0 H1 on the clean prompt" in titles, titles
