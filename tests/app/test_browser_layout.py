"""Every page as a newcomer at a 1366 × 768 laptop and a teacher at a 1024 × 768 projector (presenter mode)
meet it, in Chromium: no error drawn; each chart's title, axis titles, legend, colour bar title and
annotations inside the chart and clear of one another; the first chart in the first screen; in presenter
mode charts one above another, none taller than the screen, the body text enlarged; and nothing asked of a
host other than the app's own."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from tests.support.browserkit import (
    HOW_TO_GET_CHROMIUM,
    SCREENSHOTS_ENV,
    SHOTS,
    chromium_path,
    streamlit_server,
)
from tests.support.layoutkit import measure, problems

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import PAGES  # noqa: E402

LAPTOP, PROJECTOR = (1366, 768), (1024, 768)
LAPTOP_BODY_PX = 14  # Streamlit's body text
README_SHOTS = ("step-by-step", "mask-lab", "vision-language")  # what a projector shows first: the README's


@pytest.fixture(scope="module")
def server(learned_defaults, looked_default):
    """The app with the session's trainings on disk (Watch it learn's and the model that learns to look's): the
    pages that show them replay them, and the server starts no training of its own while the pages are measured."""
    with streamlit_server(env={"ATTNVIZ_LEARN_DIR": str(looked_default["dir"])}) as base:
        yield base


# Drawn: no run going, no background work's progress bar, every chart in sight holding its drawing.
_DRAWN = """() => !document.querySelector('[data-testid=stStatusWidget]')
  && ![...document.querySelectorAll('[data-testid=stMain] [data-testid=stProgress] [role=progressbar]')]
       .some(b => Number(b.getAttribute('aria-valuenow')) < 100)  // a job still running (a finished one stays)
  && !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton]')
  && [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
       .filter(c => c.getBoundingClientRect().top < innerHeight)  // drawn when scrolled to: those in sight
       .every(c => c.querySelector('.main-svg'))"""


def _settle(page, tries: int = 240) -> None:
    """Until the page is drawn twice in a row a second apart (a rerun starts a moment after the first
    paint), or four minutes passed: a chart still computing is measured where its progress bar stands."""
    page.wait_for_selector("[data-testid=stMain] h1, .js-plotly-plot", timeout=120_000)  # the explorer in
    calm = 0  # presenter mode has no title: its chart is the first screen
    for _ in range(tries):
        page.wait_for_timeout(1_000)
        calm = calm + 1 if page.evaluate(_DRAWN) else 0
        if calm == 2:
            return


_SCROLLER = "(document.querySelector('[data-testid=stMain]') || document.scrollingElement)"


def _draw_every_chart(page) -> None:
    """Scroll down the page a screen at a time (Streamlit draws a chart when it comes into sight), wait until
    every chart holds its drawing, and scroll back to the top, where a reader starts."""
    height = page.evaluate(f"() => {_SCROLLER}.scrollHeight")
    for y in range(0, int(height) + 1, 600):
        page.evaluate(f"y => {_SCROLLER}.scrollTo(0, y)", y)
        page.wait_for_timeout(250)
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".every(c => c.querySelector('.main-svg'))", timeout=60_000)
    page.evaluate(f"() => {_SCROLLER}.scrollTo(0, 0)")
    page.wait_for_timeout(500)


@pytest.mark.parametrize("size, present", [(LAPTOP, False), (PROJECTOR, True)], ids=["laptop", "presenter"])
@pytest.mark.parametrize("entry", PAGES, ids=lambda p: p.name)
def test_every_page_is_whole_on_a_laptop_and_on_a_projector(server, browser, entry, size, present):
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    asked = []
    ctx.on("request", lambda r: asked.append(r.url))
    page = ctx.new_page()
    try:
        page.goto(f"{server}/{entry.path}" + ("?present=1" if present else ""))
        _settle(page)
        _draw_every_chart(page)
        drawn = measure(page)
        mode = "presenter" if present else "laptop"
        if present and entry.name in README_SHOTS:  # the README's: what a projector shows first
            page.screenshot(path=str(SHOTS / f"presenter-{entry.name}.png"))
        if not os.environ.get(SCREENSHOTS_ENV):  # every page's, to look at after a run (build/screenshots)
            page.screenshot(path=str(SHOTS / f"layout-{entry.name}-{mode}.png"))
        assert problems(drawn, size, present) == []
        if present and entry.name == "vision-language":  # the picture and its overlay, whole on the first screen
            assert drawn["charts"][0]["bottom"] <= size[1], drawn["charts"][0]
        if present:
            assert drawn["bodyFont"] >= LAPTOP_BODY_PX * 1.25  # presenter mode's 1.1–1.3 rem
        else:  # the switch into presenter mode, in sight on every page
            switch = page.get_by_role("switch", name="Presenter mode")
            assert switch.is_visible() and switch.bounding_box()["y"] < size[1]
        outside = {urlsplit(u).hostname for u in asked if urlsplit(u).scheme in ("http", "https")}
        outside -= {urlsplit(server).hostname}
        assert not outside, f"asked hosts other than the app's own: {sorted(outside)}"
    finally:
        ctx.close()
