"""``streamlit run app.py`` (not the launcher, ``python -m ui.server``) as a fresh server's very first session, in
Chromium: the Gradients page's deep link opens that page cleanly. Every page's first session on a fresh launcher is
checked with its laptop layout (tests/app/test_browser_layout.py)."""

import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, ROOT, chromium_path, streamlit_server, wait_run
from tests.support.layoutkit import assert_page_named

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import page as page_named  # noqa: E402


def test_streamlit_run_serves_a_deep_link_as_its_first_session(browser):
    """The first session of `streamlit run app.py`: that page, no "Page not found" dialog (streamlit#8860: a pages/
    folder beside app.py), no traceback (/gradients read a key no run had set)."""
    target = page_named("gradients")
    with streamlit_server(script=ROOT / "app.py") as base:
        with browser.tab() as pg:
            pg.goto(f"{base}/{target.path}")
            wait_run(pg, timeout=90_000)
            pg.wait_for_timeout(1000)
            assert_page_named(pg, target.title, timeout=90_000)
