"""The margins the heatmaps and the query bars reserve (attnviz.plots.margins) against what Plotly needs,
measured by drawing them with plotly.js in Chromium.

Reserved too little, Plotly's automargin grows the margin and draws the figure a second
time; too much is white space. Each figure is drawn twice: as built (no margin may grow)
and with 10 px margins (what automargin grows them to is what the labels need; the
reserve may exceed it by at most ``SLACK`` px).
"""

import json

import pytest

from attnviz import AttentionConfig, compute
from attnviz.i18n import use
from attnviz.plots import data as D
from attnviz.plots import heatmaps as H
from attnviz.plots import margins
from attnviz.plots.style import FigureStyle
from attnviz.views.selection import PRESENTER_FONT
from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, plotly_tab

SLACK = 32
TEXTS = {
    "english": "attention lets every token look at every other token",
    "chinese": "注意力机制让每个词都能看到其他所有的词",
    "capitals": "WHAT MAKES WWW MUCH WIDER THAN iii",
    "digits": "in 2026 the 12345th run of 67 heads",
    "accents and emoji": "naïve café Straße 🙂 👍🏽 — &amp; <b>",
    "one long word": "a internationalization b",
}
SIDES = ("l", "r", "b", "t")


@pytest.fixture(scope="module")
def draw(browser):
    with plotly_tab(browser, width=1100) as page:

        def run(fig: dict) -> dict:
            return page.evaluate("""async f => { const d = document.getElementById('d'); Plotly.purge(d);
                await Plotly.newPlot(d, f.data, f.layout);
                const s = d._fullLayout._size, x = d._fullLayout.xaxis, y = d._fullLayout.yaxis;
                const thinned = a => a.type === 'category' && a._vals.length < a._categories.length;
                return {l: s.l, r: s.r, b: s.b, t: s.t, thinned: {l: thinned(y), b: thinned(x)}}; }""", fig)
        yield run


def figures(text: str, font_size: int):
    result = compute(AttentionConfig(text=text, num_heads=8, d_model=64, mask="causal"))
    style = FigureStyle(font_size=font_size)
    yield "grid of 8 heads", H.grid_figure(D.grid_data(result, 0), style)
    yield "one head", H.heatmap_figure(D.head_data(result, 0, 0), style)
    yield "output vectors", H.output_figure(result, 0, style)
    yield "query focus", H.query_figure(result, 0, result.lengths[0] - 1, style)
    yield "mask, keys above", H.mask_figure(result, 0, style)
    yield "mask, keys below", H.mask_figure(result, 0, style, key_axis_top=False)
    tokens = result.tokens[0]
    scores = result.steps.attention.masked[0, 0].numpy()  # (L, S), −∞ where masked
    yield "scores (diverging)", H.matrix_figure(scores, tokens, tokens, "scores", style)
    yield "weights (0-1)", H.matrix_figure(result.weights[0, 0].numpy(), tokens, tokens, "weights", style,
                                           zero_one=True)


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("font_size", [12, PRESENTER_FONT])
@pytest.mark.parametrize("text", list(TEXTS), ids=list(TEXTS))
def test_the_heatmaps_reserve_the_room_their_labels_need_and_little_more(draw, text, font_size, lang):
    with use(lang):
        built = list(figures(TEXTS[text], font_size))
    for name, fig in built:
        spec = json.loads(fig.to_json())
        reserved = {k: spec["layout"]["margin"][k] for k in SIDES}
        drawn = draw(spec)
        grown = {k: (reserved[k], round(drawn[k])) for k in SIDES if round(drawn[k]) > reserved[k]}
        assert not grown, f"{name}, {text}, {font_size}px: Plotly grew the margins (reserved, needed) {grown}"
        spec["layout"]["margin"].update(l=10, r=10, b=10)
        need = draw(spec)
        # Where Plotly thins an axis's labels, the widest may not be drawn: the reserve is
        # for the widest of them all, and may exceed what the drawn ones need.
        wasted = {k: (reserved[k], round(need[k])) for k in ("l", "r", "b")
                  if reserved[k] - need[k] > SLACK and not need["thinned"].get(k)}
        assert not wasted, f"{name}, {text}, {font_size}px: more than {SLACK} px to spare (reserved, needed) {wasted}"


def test_a_colour_bar_with_a_flat_unknown_or_unbounded_range_gets_the_room_of_0_to_1():
    zero_one = margins.colorbar("", 12)
    for lo, hi in ((0.5, 0.5), (None, 1.0), (float("-inf"), 1.0), (0.0, float("nan")), (2.0, -2.0)):
        assert margins.colorbar("", 12, lo, hi) == zero_one, (lo, hi)
    assert margins.colorbar("", 12, -0.4, 0.4) > zero_one  # "−0.4" is wider than "0.2"


def test_invisible_suffixes_take_no_room_and_escapes_count_as_the_character_shown():
    assert margins.text_em("the\u200b\u200c\u2060") == margins.text_em("the")
    assert margins.text_em("&amp;") == margins.text_em("&")
    assert margins.labels_em(["a" * 200]) == margins.LONGEST_EM


def test_a_long_title_breaks_into_lines_a_projector_holds_and_keeps_its_words():
    from attnviz.plots.style import TITLE_LINE_EM, layout_for, wrap_title

    title = "|difference| of the weights ÷ tolerance, float32 on cpu<br>agreement 50% (random placement 35%; k = 3)"
    wrapped = wrap_title(title, PRESENTER_FONT)
    lines = wrapped.split("<br>")
    assert len(lines) > title.count("<br>") + 1  # it broke
    assert all(len(line) <= round(TITLE_LINE_EM * 24 / PRESENTER_FONT) for line in lines)
    assert lines[0].endswith("tolerance,")  # at the comma, not at the last space that fits
    assert wrapped.replace("<br>", " ").split() == title.replace("<br>", " ").split()  # every word, in order
    assert wrap_title(title, 12) == title  # a laptop's charts keep it as written
    assert wrap_title("x" * 80, PRESENTER_FONT) == "x" * 80  # no break inside a word
    # The top margin makes room for the added lines.
    one = layout_for({}, FigureStyle(font_size=PRESENTER_FONT), "short")["margin"]["t"]
    many = layout_for({}, FigureStyle(font_size=PRESENTER_FONT), title)
    assert many["title"]["text"] == wrapped and many["margin"]["t"] > one
