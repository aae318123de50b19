"""Every page as a newcomer at a 1366 × 768 laptop and a teacher at a 1024 × 768 projector (presenter mode)
meet it, in Chromium: no error drawn; each chart's title, axis titles, legend, colour bar title and
annotations inside the chart and clear of one another; the first chart whole in the first screen (but on the
pages ``layoutkit.NOT_WHOLE_ON_A_PROJECTOR`` names, where its top is); in presenter mode charts one above another,
none taller than the screen, the body text enlarged; and nothing asked of a host other than the app's own."""

from __future__ import annotations

import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path
from tests.support.layoutkit import PROJECTOR, check_whole

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import PAGES  # noqa: E402


@pytest.mark.parametrize("entry", PAGES, ids=lambda p: p.name)
def test_every_page_is_whole_on_a_projector_in_presenter_mode(trained_server, browser, entry):
    check_whole(trained_server, browser, entry, PROJECTOR, present=True)
