"""Every page as a newcomer at a 1366 × 768 laptop and a teacher at a 1024 × 768 projector (presenter mode)
meet it, in Chromium: at the laptop, as the first session of a fresh server (the teacher after `make run`, the
first student on each replica): the page the link names (no "Page not found", streamlit#8860), its heading; no
error drawn; each chart's title, axis titles, legend, colour bar title and
annotations inside the chart and clear of one another; the first chart in the first screen; in presenter
mode charts one above another, none taller than the screen, the body text enlarged; and nothing asked of a
host other than the app's own."""

from __future__ import annotations

import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, fresh_servers, stop_server
from tests.support.layoutkit import LAPTOP, check_whole

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import PAGES  # noqa: E402


@pytest.fixture(scope="module")
def fresh_server(learned_defaults, looked_default):
    """A fresh ``python -m ui.server`` for each case (forked after the launcher's imports: browserkit.fresh_servers),
    on the run's trainings (the run's own runs folder, which the suite's processes share): the pages that show them
    replay them, and the launcher starts none."""
    with fresh_servers() as take:
        yield take


@pytest.mark.parametrize("entry", PAGES, ids=lambda p: p.name)
def test_every_page_is_whole_on_a_laptop_as_a_fresh_servers_first_session(fresh_server, browser, entry):
    """One visit checks both: a deep link is a fresh process's very first session (no traceback, where /gradients
    once read a key no run had set), and a newcomer's laptop is where that page must be whole. Each was a visit of
    its own (20 page loads of Chromium, about 4 s of CPU each)."""
    proc, base = fresh_server()
    try:
        check_whole(base, browser, entry, LAPTOP, present=False)
    finally:
        stop_server(proc)
