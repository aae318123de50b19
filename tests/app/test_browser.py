"""The app in a real browser: Playwright driving Debian's Chromium."""

import pytest

from tests.support.browserkit import (
    HOW_TO_GET_CHROMIUM,
    SHOTS,
    chromium_path,
    full_page_screenshot,
    subplot_titles,
    wait_for_label,
    wait_for_titles,
    wait_idle,
    wait_run,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)]
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
from attnviz.views.catalogue import menus  # noqa: E402
from attnviz.views.state import reads  # noqa: E402


@pytest.fixture
def page(browser):
    with browser.tab() as pg:
        dialogs = []
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        pg.dialogs = dialogs
        yield pg


def choose(page, label: str, option: str) -> None:
    box = page.get_by_role("combobox", name=label, exact=True)
    box.evaluate("e => e.scrollIntoView({block: 'center'})")  # room below it for the open list
    box.click()
    page.get_by_role("option", name=option, exact=True).click()


def type_text(page, text: str, expect_label: str) -> None:
    area = page.locator("[data-testid=stTextArea] textarea").first
    area.fill(text)
    area.press("Control+Enter")
    wait_for_label(page, expect_label)


INVISIBLE = "\u200b\u200c\u2060\ufeff\u2007"


def y_labels(page) -> list[str]:
    """The first chart's tick labels as shown (invisible de-duplicating suffixes removed)."""
    texts = page.eval_on_selector_all(".js-plotly-plot .yaxislayer-above .ytick text",
                                      "els => els.map(e => e.textContent)")
    return [t.strip(INVISIBLE) for t in texts]


def row_labels(page) -> list[str]:
    """Every row label of the first chart's data (ticks may be thinned to fit)."""
    import html

    rows = page.evaluate("() => Array.from(document.querySelector('.js-plotly-plot')._fullData[0].y || [])")
    return [html.unescape(r.strip(INVISIBLE)) for r in rows]  # labels travel HTML-escaped


def test_type_change_heads_and_mask(server, page):
    page.goto(server)
    wait_idle(page)
    type_text(page, "Attention shows what each word looks at", "looks")
    labels = y_labels(page)
    assert "Attention" in labels and "looks" in labels
    assert sorted(subplot_titles(page)) == [f"head {h}" for h in range(4)]
    choose(page, "Heads", "8")
    wait_for_titles(page, 8)
    assert sorted(subplot_titles(page)) == sorted(f"head {h}" for h in range(8))
    assert "heads=8" in page.url
    choose(page, "Mask", "window")
    page.wait_for_function("() => location.search.includes('mask=window')")
    wait_idle(page)
    assert "mask=window" in page.url and "heads=8" in page.url  # earlier choice kept on rerun
    assert len(subplot_titles(page)) == 8
    assert "Attention" in y_labels(page)
    assert not page.dialogs


def test_shared_url_restores_the_view(server, page):
    page.goto(server + "/?text=I+love+AI&heads=2&d_model=32&mask=none&view=head&head=1&seed=3")
    wait_idle(page)
    assert subplot_titles(page) == []  # the chosen view alone: no grid above it
    gtitles = page.eval_on_selector_all(".js-plotly-plot .gtitle", "els => els.map(e => e.textContent)")
    assert "head 1" in gtitles  # the enlarged head is head 1
    assert set(y_labels(page)) == {"I", "love", "AI"}


def test_invalid_link_warns_in_the_page(server, page):
    page.goto(server + "/?heads=3&device=cuda")
    wait_idle(page)
    body = page.inner_text("[data-testid=stMain]")
    assert 'heads="3"' in body and 'device="cuda"' in body and "running on cpu" in body
    assert "Traceback" not in body


def test_a_hostile_link_shows_its_value_literally_until_it_is_fixed(server, page):
    page.goto(server + "/?heads=%60%5BSign+in%5D(https%3A%2F%2Fevil.example)%60&text=**bold**+_it_")
    wait_idle(page)
    main = page.locator("[data-testid=stMain]")
    assert main.locator("a[href*='evil']").count() == 0  # no live link
    assert "[Sign in](https://evil.example)" in main.inner_text().replace("\u200b", "")  # shown as typed
    choose(page, "Heads", "2")
    page.wait_for_function("() => !document.body.innerText.includes('evil.example')")
    wait_idle(page)
    assert main.locator("[data-testid=stAlertContentWarning]").count() == 0


def test_html_in_the_text_is_shown_literally(server, page):
    page.goto(server)
    wait_idle(page)
    type_text(page, "<img src=x onerror=alert(1)> <b>bold</b>", "onerror")  # waits for the chart, then idle
    page.wait_for_load_state("networkidle")
    wait_idle(page)
    assert not page.dialogs
    labels = row_labels(page)
    assert "<" in labels and "img" in labels and "b" in labels and "onerror" in labels
    assert page.locator(".js-plotly-plot img").count() == 0
    assert page.locator(".js-plotly-plot b").count() == 0
    assert page.locator("[data-testid=stMain] img[src=x]").count() == 0


def test_downloads_hold_the_runs_numbers(server, page):
    """Open the download dialog, click both files; they equal the export of the same run."""
    from attnviz import AttentionConfig, compute
    from attnviz.views.exports import run_json, weights_csv

    page.goto(server + "/?text=I+love+AI%0Ahi&heads=2&mask=padding&seed=3")
    wait_idle(page)
    expected = compute(AttentionConfig(text="I love AI\nhi", num_heads=2, mask="padding", seed=3))
    page.get_by_role("button", name="Download…").click()
    page.get_by_role("dialog").wait_for(timeout=30_000)
    for label, want in (("Weights (CSV)", weights_csv(expected)), ("Run (JSON)", run_json(expected))):
        with page.expect_download(timeout=60_000) as info:
            page.get_by_role("button", name=label).click()
        got = open(info.value.path(), encoding="utf-8").read()
        assert got == want, label
        assert info.value.suggested_filename.startswith("attnviz-")


def test_full_page_screenshot_for_the_readme(server, page):
    page.goto(server + "/?text=The+cat+sat+on+the+mat+because+it+was+tired.&heads=4&mask=causal&view=mask&head=1")
    wait_idle(page)
    full_page_screenshot(page, SHOTS / "explorer.png")
    assert (SHOTS / "explorer.png").stat().st_size > 20_000


# A page of each menu but Circuits (whose pages train and patch: tests/app/test_browser_layout.py opens every page).
TOUR = [("step-by-step", "Step by step"), ("why-scale", "Why scale by √d_k"), ("audio-frames", "Audio frames"),
        ("long-sequences", "Long sequences")]


@pytest.mark.parametrize("path, title", TOUR)
def test_every_menu_opens_its_pages(server, page, path, title):
    page.goto(server + "/?heads=2")  # the default sentence and mask, as a student first sees them
    wait_idle(page)
    menu = next(name for name, pages in menus() if path in pages)
    page.locator("header").get_by_text(menu, exact=True).first.click()  # the menus across the top
    page.get_by_role("menuitem", name=title).first.click()  # (its name: the icon's, then the title)
    page.wait_for_function("p => location.pathname.endsWith(p)", arg="/" + path)
    wait_idle(page, timeout=60_000)
    body = page.inner_text("[data-testid=stMain]")
    assert title.split()[0] in body and "Traceback" not in body
    assert ("heads=2" in page.url) is ("heads" in reads(path))  # the link: the settings the page reads
    full_page_screenshot(page, SHOTS / f"{path}.png")
    assert not page.dialogs


def test_presenter_mode_collapses_the_sidebar_and_enlarges_fonts(server, page):
    page.goto(server + "/?present=1&view=grid&heads=4&mask=causal")
    wait_idle(page)
    box = page.locator("[data-testid=stSidebar]").bounding_box()
    assert box is None or box["x"] + box["width"] <= 1 or box["width"] <= 1  # collapsed: off screen
    size = page.eval_on_selector(".js-plotly-plot .gtitle", "e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 28
    assert page.locator(".js-plotly-plot").count() == 1  # one view per screen
    full_page_screenshot(page, SHOTS / "presenter.png")


def test_mask_lab_titles_clear_the_axes_and_every_token_is_labelled(server, page):
    """The default sentence at 1400 px: each figure labels all 11 tokens on both axes,
    and no figure's title box overlaps an axis title."""
    page.goto(server + "/mask-lab")
    wait_idle(page, timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 12", timeout=60_000)
    wait_idle(page)
    boxes = page.eval_on_selector_all(".js-plotly-plot", """plots => plots.map(p => {
        const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                           return [r.left, r.top, r.right, r.bottom]; };
        return { title: box(p.querySelector('.gtitle')),
                 axes: [...p.querySelectorAll('.xtitle, .ytitle')].map(box),
                 xticks: p.querySelectorAll('.xaxislayer-above .xtick text').length,
                 yticks: p.querySelectorAll('.yaxislayer-above .ytick text').length }; })""")
    overlap = lambda a, b: a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]  # noqa: E731
    for b in boxes:
        assert b["xticks"] == 11 and b["yticks"] == 11, b
        assert b["title"] and not any(overlap(b["title"], ax) for ax in b["axes"] if ax), b


LONG = " ".join(("attention lets every token look at every other token and mix what it finds".split() * 200)[:2048])


def plot_data(page, index: int) -> dict:
    """The z, customdata and labels Plotly actually drew for the index-th chart."""
    return page.evaluate("""i => { const g = document.querySelectorAll('.js-plotly-plot')[i];
        const t = g._fullData[0];
        const rows = a => Array.from(a || [], r => Array.from(r));
        return {z: rows(t.z), customdata: rows(t.customdata), n: g._fullData.length,
                titles: (g._fullLayout.annotations || []).map(a => a.text)}; }""", index)


def test_the_grid_is_one_labelled_block_per_head_and_causal_is_empty_above_the_diagonal(server, page):
    import numpy as np

    page.goto(server + "/?heads=8&mask=causal")
    wait_idle(page)
    d = plot_data(page, 0)
    assert d["n"] == 1 and d["titles"] == [f"head {h}" for h in range(8)]
    z, head = np.array(d["z"], dtype=float), np.array(d["customdata"], dtype=int)
    for h in range(8):
        rows, cols = np.nonzero(head == h)
        block = z[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        assert block.shape == (11, 11)
        assert np.triu(block, 1).max() == 0 and (np.diag(block) > 0).all()


def test_each_heatmap_of_a_page_is_painted_once(server, browser):
    """Streamlit's chart hands plotly.js a JSON copy of each drawn figure; with the template
    written in, a data revision and fixed ranges (tests/test_drawn_once.py) the copy repaints
    nothing. A heatmap's paint ends in one canvas toDataURL: the mask view's three heatmaps
    (the mask and one head; the grid once stood above them too) were painted twice each."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script("""window.paints = 0; const _td = HTMLCanvasElement.prototype.toDataURL;
        HTMLCanvasElement.prototype.toDataURL = function(...a) { window.paints++; return _td.apply(this, a); };""")
    try:
        pg = ctx.new_page()
        pg.goto(server + "/?heads=4&mask=causal&view=mask")
        pg.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 2", timeout=60_000)
        wait_idle(pg)
        pg.wait_for_timeout(1500)  # Streamlit's copy follows each first draw
        assert pg.evaluate("() => document.querySelectorAll('.js-plotly-plot .hm image').length") == 2
        assert pg.evaluate("() => window.paints") == 2
    finally:
        ctx.close()


def test_2048_tokens_draw_and_hover_reads_the_exact_weight_of_a_zoomed_cell(server, page):
    """The overview of 16 heads, then one head as an image with a hoverable close-up."""
    from urllib.parse import urlencode

    from attnviz import AttentionConfig, compute

    query = {"text": LONG, "heads": 16, "mask": "causal"}
    page.goto(server + "/?" + urlencode(query))
    wait_idle(page, timeout=120_000)
    overview = plot_data(page, 0)
    assert overview["titles"] == [f"head {h}" for h in range(16)]
    page.goto(server + "/?" + urlencode({**query, "view": "head", "head": 5, "q0": 1000, "k0": 960}))
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 2", timeout=120_000)
    wait_idle(page, timeout=120_000)
    types = page.evaluate("() => document.querySelectorAll('.js-plotly-plot')[0]._fullData.map(t => t.type)")
    assert types[0] == "image"  # every cell, as pixels
    expected = compute(AttentionConfig(text=LONG, num_heads=16, mask="causal")).weights[0, 5]
    plot = page.locator(".js-plotly-plot").nth(1)
    plot.scroll_into_view_if_needed()
    for qi, kj in ((1030, 990), (1063, 960)):  # cells inside the 64 × 64 close-up
        xy = page.evaluate("""([r, c]) => { const g = document.querySelectorAll('.js-plotly-plot')[1];
            const L = g._fullLayout, box = g.getBoundingClientRect();
            return [box.left + L._size.l + L.xaxis.l2p(c), box.top + L._size.t + L.yaxis.l2p(r)]; }""",
                           [qi - 1000, kj - 960])
        page.mouse.move(*xy)
        page.wait_for_function("q => { const h = document.querySelector('.hoverlayer .hovertext');"
                               " return h && h.textContent.includes(q); }", arg=f"query: {qi}: ", timeout=10_000)
        text = page.text_content(".hoverlayer .hovertext")
        assert f"{qi}: " in text and f"{kj}: " in text, text
        shown = float(text.split("weight:")[1].split()[0])
        assert abs(shown - float(expected[qi, kj])) <= 5e-7, (text, float(expected[qi, kj]))


@pytest.mark.minilm
def test_the_pretrained_model_view_opens_a_head_on_click(server, page):
    from attnviz.models.packaged import INSTALL, package_dir

    if package_dir() is None:
        pytest.skip(f"the model's files are not installed: {INSTALL}")
    page.goto(server + "/?model=minilm-l6&view=model")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 1", timeout=60_000)
    wait_idle(page, timeout=60_000)
    full_page_screenshot(page, SHOTS / "model-view.png")
    d = plot_data(page, 0)
    assert len(d["titles"]) == 72 and d["titles"][26].split("<br>")[0] == "H2"  # and its role, if any
    # click the middle of block L2 H2: layer 2's trace (a trace per row of blocks), its head 2
    xy = page.evaluate("""() => { const g = document.querySelectorAll('.js-plotly-plot')[0];
        const t = g._fullData[2], L = g._fullLayout, box = g.getBoundingClientRect();
        if (!t.hovertemplate.startsWith('L2 · ')) return null;
        const top = L.yaxis._categories.indexOf(t.y[0]);  // the trace's first row on the shared axis
        let r0 = -1, c0 = -1;
        t.customdata.forEach((row, r) => row.forEach((v, c) => { if (v === 2 && r0 < 0) { r0 = r; c0 = c; } }));
        return [box.left + L._size.l + L.xaxis.l2p(c0 + 4), box.top + L._size.t + L.yaxis.l2p(top + r0 + 6)]; }""")
    assert xy is not None  # the third trace is layer 2's, named so on its hover
    page.mouse.click(*xy)
    page.wait_for_function("() => location.search.includes('view=head') && location.search.includes('layer=2')",
                           timeout=30_000)
    assert "head=2" in page.url


def cjk_fonts_cover(text: str) -> bool:
    """Whether the installed fonts cover every CJK character of ``text`` (fc-list)."""
    import subprocess

    chars = sorted({c for c in text if "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef"})
    if not chars:
        return False
    query = ":charset=" + " ".join(f"{ord(c):x}" for c in chars)
    out = subprocess.run(["fc-list", query, "family"], capture_output=True, text=True).stdout
    return bool(out.strip())


@pytest.mark.parametrize("path, name", [("/", "explorer-zh"), ("/mask-lab", "mask-lab-zh")])
def test_chinese_pages_render_with_a_cjk_font(server, page, path, name):
    import shutil

    if shutil.which("fc-list") is None or not cjk_fonts_cover("注意力掩码头"):
        # What a machine lacks is a skip that says how to get it, never a failure: `make test`
        # installs the font itself where it runs as root (scripts/system-packages.sh).
        pytest.skip("no installed font covers Chinese text: sudo apt-get install -y fonts-noto-cjk")
    page.goto(server + path + "?lang=zh&heads=4&mask=causal")
    wait_idle(page, timeout=60_000)
    body = page.inner_text("[data-testid=stMain]") + page.inner_text("[data-testid=stSidebar]")
    assert "注意力" in body or "掩码" in body
    svg_text = " ".join(page.eval_on_selector_all(".js-plotly-plot text", "els => els.map(e => e.textContent)"))
    assert "头 0" in svg_text  # chart titles are Chinese too
    assert cjk_fonts_cover(body + svg_text), ("no installed font covers the page's Chinese text: "
                                              "sudo apt-get install -y fonts-noto-cjk")
    full_page_screenshot(page, SHOTS / f"{name}.png")


def test_every_control_is_reachable_and_usable_with_the_keyboard(server, page):
    """Tab through the page: the sidebar's and the main area's controls all take focus,
    and a select opened with the arrow keys changes the view."""
    page.goto(server + "/?heads=4&mask=window&view=head")  # a window mask: the Window input is drawn
    wait_idle(page)
    names = set()
    for _ in range(60):
        page.keyboard.press("Tab")
        names.add(page.evaluate("""() => { const e = document.activeElement;
            return (e.getAttribute('aria-label') || e.innerText || e.value || e.tagName).trim().slice(0, 40); }"""))
    joined = " | ".join(sorted(names))
    for control in ("Heads", "Mask", "Window", "More settings", "Text", "All heads", "Head"):
        assert any(control in n for n in names), (control, joined)
    # "More settings" opens with the keyboard, and what it holds takes focus too
    page.get_by_role("switch", name="More settings").focus()
    page.keyboard.press("Space")
    page.get_by_label("Seed", exact=True).wait_for(timeout=30_000)
    page.get_by_label("Seed", exact=True).focus()
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label') || ''").startswith("Seed")
    wait_idle(page)
    # choose the mask with the keyboard only: focus it, open it, move down, confirm
    page.get_by_role("combobox", name="Mask", exact=True).focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function("() => new URLSearchParams(location.search).get('mask') !== 'window'", timeout=30_000)
    wait_idle(page)
    assert "mask=window" not in page.url


def test_watch_it_learn_trains_in_front_of_the_class(server, page, tmp_path, learned_defaults):
    """Press Train: the loss and the heads are redrawn while the worker trains, and the
    trained model's part appears when it is done (a screenshot for the README). 600 steps at twice the
    default rate: its phase change at step 450 (the loss on the repeat 3.5 → 1.1), half the work of 1,200 at
    the default. After the run's default trainings (``learned_defaults``): the server shares their folder, and
    may have started one of them at launch; while it runs, the control's worker is refused (one a core)."""
    page.goto(server + "/watch-it-learn?learn_steps=600&learn_seed=0&learn_lr=0.006")
    wait_run(page, timeout=60_000)
    page.get_by_role("button", name="Train", exact=True).click()  # (a training that ran here runs again, live)
    page.wait_for_selector("text=Phase change at step", timeout=240_000)
    page.wait_for_selector("text=The trained model", timeout=240_000)  # the training (and its control) to finish
    wait_idle(page, timeout=60_000)
    # The waits above can be met by the page as it stood before Train restarted a training that ran here, so
    # wait for the finished run's own summary too (a loaded machine redraws late), then read the page.
    page.wait_for_selector("text=Phase change at step", timeout=120_000)
    # The live part redraws in a fragment of its own, which shows no status widget: wait for all six charts
    # (the loss, the heads, the trained model's part), so the wait fails only if they never come.
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 6", timeout=120_000)
    body = page.inner_text("[data-testid=stMain]")
    assert "Phase change at step" in body and "Traceback" not in body
    full_page_screenshot(page, SHOTS / "watch-it-learn.png")
