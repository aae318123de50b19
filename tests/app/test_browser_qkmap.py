"""The Q/K map in Chromium: a click on a point opens its sentence in the explorer."""

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, SHOTS, chromium_path, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")


def test_a_click_on_a_key_opens_its_sentence_in_the_explorer_at_that_head_and_query(server, browser):
    from attnviz.views import qkmap as V
    from attnviz.views.state import ViewState

    state = ViewState.of(heads=2, d_model=16, head=1, mask="causal")
    record = V.head_record(state)
    with browser.tab() as page:
        page.goto(server + "/qk-map?heads=2&d_model=16&head=1&mask=causal")
        wait_idle(page, timeout=90_000)
        # the rightmost key of the last trace drawn (nothing on top of it)
        index, xy = page.evaluate("""() => { const g = document.querySelector('.js-plotly-plot');
            const t = g._fullData[g._fullData.length - 1], L = g._fullLayout, box = g.getBoundingClientRect();
            let best = 0; t.x.forEach((x, i) => { if (x > t.x[best]) best = i; });
            return [t.customdata[best], [box.left + L._size.l + L.xaxis.l2p(t.x[best]),
                                          box.top + L._size.t + L.yaxis.l2p(t.y[best])]]; }""")
        page.mouse.click(*xy)
        # the explorer's link: its path and its settings (Streamlit may write the two in turn)
        page.wait_for_function("() => location.search.includes('view=head') && "
                               "['', '/'].includes(location.pathname.replace(/\\/+$/, ''))", timeout=30_000)
        params = parse_qs(urlsplit(page.url).query)
        url = page.url
    # The opened sentence and query are a key of the map (the point clicked: where several overlap, the
    # one drawn on top), at that head.
    assert record["points"][int(index)]["kind"] == "key"
    opened = [p for p in record["points"] if p["kind"] == "key" and str(p["position"]) == params["query"][0]
              and record["sentences"][p["sentence"]] == params["text"][0]]
    assert opened and params["head"] == ["1"]
    assert urlsplit(url).path.rstrip("/") in ("", "/")


@pytest.mark.minilm
def test_screenshots_of_minilm_layer0_one_head_and_every_head(server, browser):
    from attnviz.models.packaged import INSTALL, package_dir
    from tests.support.browserkit import full_page_screenshot

    if package_dir() is None:
        pytest.skip(f"the model's files are not installed: {INSTALL}")
    shots = SHOTS
    with browser.tab() as page:
        page.goto(server + "/qk-map?model=minilm-l6&layer=0&head=0&qk_color=kind")
        wait_idle(page, timeout=90_000)
        assert page.evaluate("() => document.querySelector('.js-plotly-plot').data.length") == 6
        full_page_screenshot(page, shots / "qk-map.png")
        page.goto(server + "/qk-map?model=minilm-l6&layer=0&qk_part=overview")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .annotation-text').length >= 12",
                               timeout=90_000)
        wait_idle(page)
        full_page_screenshot(page, shots / "qk-map-overview.png")
