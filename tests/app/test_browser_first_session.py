"""A deep link as a fresh server's very first session, for every page, in Chromium: a module of its own, each
case starting its own server (about ten seconds each), so that the suite's workers share them with the rest of
tests/app/test_browser.py."""

import pytest

from tests.support.browserkit import (
    HOW_TO_GET_CHROMIUM,
    ROOT,
    chromium_path,
    start_server,
    stop_server,
    streamlit_server,
    wait_healthy,
    wait_run,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import PAGES  # noqa: E402
from attnviz.views.catalogue import page as page_named  # noqa: E402


@pytest.fixture(scope="module")
def fresh_server():
    """A fresh ``python -m ui.server`` for each case, started while the case before it runs (its imports overlap
    that case's waits on the browser): no session has visited it when the case takes it."""
    started = [start_server()]

    def take() -> tuple:
        proc, base = started.pop()
        started.append(start_server())  # the next case's
        wait_healthy(base, proc, 60)
        return proc, base

    yield take
    for proc, _base in started:
        stop_server(proc)


FIRST_VISITS = [("ui.server", p, "?heads=2") for p in PAGES] + [("streamlit run", page_named("gradients"), "")]


@pytest.mark.parametrize("launcher, target, query", FIRST_VISITS, ids=lambda v: getattr(v, "name", v))
def test_a_fresh_servers_first_session_opens_any_page_cleanly(browser, fresh_server, launcher, target, query):
    """A deep link as a fresh process's very first session (the teacher after `make run`,
    the first student on each replica): that page, no "Page not found" dialog
    (streamlit#8860: a pages/ folder beside app.py), no traceback (/gradients read a key
    no run had set)."""
    if launcher == "ui.server":
        proc, base = fresh_server()
        try:
            _first_session(browser, base, target, query)
        finally:
            stop_server(proc)
    else:
        with streamlit_server(script=ROOT / "app.py") as base:
            _first_session(browser, base, target, query)


def _first_session(browser, base: str, target, query: str) -> None:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        pg = ctx.new_page()
        pg.goto(f"{base}/{target.path}{query}")
        wait_run(pg, timeout=90_000)
        pg.wait_for_timeout(1000)
        body = pg.inner_text("body")
        assert "Page not found" not in body and pg.locator("[role=dialog]").count() == 0
        assert pg.locator("[data-testid=stException]").count() == 0, body[:500]
        # As long as the wait for the run: a loaded machine redrew the heading more than 30 s after the run ended
        heading = pg.locator("[data-testid=stMain] h1").first.inner_text(timeout=90_000)
        assert heading.lower().endswith(target.title.lower()), (heading, target.title)
    finally:
        ctx.close()
