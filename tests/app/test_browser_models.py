"""Your own model's pages in a real browser: tiny GPT-2, T5 and ViT folders listed by the
operator (ATTNVIZ_MODEL_DIRS), served by `python -m ui.server` as `make run` starts it."""


import pytest

from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
pytest.importorskip("transformers", reason="pip install transformers (in requirements.txt)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.support.hfmodels import model_dirs

    folder = model_dirs(tmp_path_factory.mktemp("models"), ("gpt2", "t5", "vit"))
    with streamlit_server(env={"ATTNVIZ_MODEL_DIRS": str(folder)}) as base:
        yield base


@pytest.fixture
def page(server, browser):
    """A tab of the module's Chromium (``tests/app/conftest.py``), 1400 × 1200."""
    with browser.tab(height=1200) as pg:
        yield pg


def body(page) -> str:
    return page.inner_text("[data-testid=stMain]")


def test_a_fresh_servers_first_model_shows_its_load_then_the_page(server, page):
    """The server's first model load imports transformers too (seconds): the page shows the
    shared progress bar, and its polling fragment reruns the page when the model is ready."""
    page.goto(server + "/?model=gpt2&text=the+cat+sat")
    page.wait_for_selector("text=Loading gpt2", timeout=60_000)
    page.wait_for_selector("text=Next token", timeout=120_000)
    wait_idle(page, timeout=60_000)
    assert "Loading gpt2" not in body(page) and "Traceback" not in body(page)


def test_a_causal_lm_generates_and_the_slider_walks_its_tokens(server, page):
    page.goto(server + "/?model=gpt2&generate=4&text=the+cat+sat&layer=1")
    page.wait_for_selector("text=wrote 4 tokens", timeout=120_000)
    wait_idle(page, timeout=60_000)
    assert "Traceback" not in body(page) and "Next token" in body(page)
    assert page.locator(".js-plotly-plot").count() == 3  # the heads, the chosen token's, every token's
    slider = page.get_by_role("slider", name="Generated token")
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('step=1')", timeout=30_000)
    wait_idle(page)
    assert "Traceback" not in body(page)


def test_the_cross_attention_page_shows_an_encoder_decoders_own(server, page):
    page.goto(server + "/cross-attention?model=t5&source=the+mat+was+tired")
    wait_idle(page, timeout=120_000)
    text = body(page)
    assert "t5 is an encoder–decoder: showing its cross attention" in text
    assert "Page not found" not in text and "Traceback" not in text


def test_the_image_page_runs_a_vision_transformer(server, page):
    page.goto(server + "/image-patches?model=vit&layer=1")
    wait_idle(page, timeout=120_000)
    text = body(page)
    assert "vit reads the image at 32 × 32 pixels" in text and "[CLS]" in text and "Traceback" not in text
    assert page.locator(".js-plotly-plot").count() >= 3  # the overlay, the grid, the mean
