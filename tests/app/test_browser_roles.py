"""Head roles tables in a real browser: selecting a row opens that head. AppTest cannot
select a row of ``st.dataframe`` (a glide-data-grid canvas), so Chromium clicks it: the
row-selection column is at the grid's left, rows ``ROW`` px tall under a header as tall."""


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
ROW = 35  # px: Streamlit's dataframe rows and header (its default row height)


@pytest.fixture(scope="module")
def server(learned_defaults):
    """``python -m ui.server`` whose runs folder holds the finished default trainings (so it
    starts none, and Watch it learn replays them)."""
    with streamlit_server(env={"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"])}) as base:
        yield base


@pytest.fixture
def page(server, browser):
    """A tab of the module's Chromium (``tests/app/conftest.py``), 1400 × 1000."""
    with browser.tab() as pg:
        yield pg


def grid(page, key: str):
    """The dataframe drawn with ``key=``, scrolled into view, and its box."""
    frame = page.locator(f".st-key-{key} [data-testid=stDataFrame]")
    frame.wait_for(timeout=60_000)
    frame.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    return frame, frame.bounding_box()


def click_row(page, key: str, row: int) -> None:
    """Click the row-selection cell of data row ``row`` (0 = the first under the header)."""
    _frame, box = grid(page, key)
    page.mouse.click(box["x"] + 14, box["y"] + ROW + row * ROW + ROW / 2)


def params(page) -> dict:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(page.url).query))


def test_selecting_a_row_of_the_explorers_head_roles_opens_that_head(page, server, tmp_path):
    page.goto(server + "/?view=roles&heads=4")
    wait_idle(page, timeout=60_000)
    page.wait_for_selector("text=Select a row to open that head", timeout=60_000)
    assert params(page).get("view") == "roles"
    click_row(page, "roles_table", 2)  # layer 0, head 2
    page.wait_for_function("() => new URLSearchParams(location.search).get('view') === 'head'", timeout=30_000)
    page.screenshot(path=str(tmp_path / "explorer-opened.png"))
    assert params(page).get("head") == "2", page.url
    assert page.get_by_role("combobox", name="Head", exact=True).count() == 1  # the One head view's selector


def test_selecting_a_row_of_watch_it_learns_head_roles_opens_that_head(page, server, tmp_path):
    page.goto(server + "/watch-it-learn")
    page.wait_for_selector("text=Head roles", timeout=90_000)
    wait_idle(page, timeout=60_000)
    body = page.inner_text("[data-testid=stMain]")
    assert "A replay" in body and "Traceback" not in body and "knockout" not in params(page)  # default: unwritten
    click_row(page, "learn_roles", 2)  # layer 1, head 0
    page.wait_for_function("() => new URLSearchParams(location.search).get('knockout') === '1.0'", timeout=30_000)
    page.wait_for_selector("text=Without head L1 H0 the loss on the repeat", timeout=30_000)
    wait_idle(page)
    page.screenshot(path=str(tmp_path / "learn-opened.png"))
    titles = page.eval_on_selector_all(".js-plotly-plot .gtitle", "els => els.map(e => e.textContent)")
    assert any(t.startswith("head L1 H0") and t.endswith("on your sequence") for t in titles), titles
    full_page_screenshot(page, SHOTS / "watch-it-learn-roles.png")
