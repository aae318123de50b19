"""Every chart is drawn once: its template is written into it and its data carry a revision
(``attnviz.plots.style.apply_template``, ``ui.compute.drawn_once``).

Streamlit's chart draws a figure, then hands ``Plotly.react`` a copy of it made through
JSON (its theme step). plotly.js redrew the whole figure on that copy: the template is
compared by identity, new data arrays count as new data without a ``datarevision``, and
``"autorange": "reversed"`` is rewritten by plotly.js as it draws. The browser tests here
draw each explorer view with plotly.js in Chromium: the picture is the same pixel for pixel,
and the copy repaints nothing.
"""

import json

import numpy as np
import pytest

from attnviz import compute
from attnviz.plots.style import apply_template, rows_down, template, under
from attnviz.views.catalogue import figure_of as view_figure
from attnviz.views.selection import style_for
from attnviz.views.state import DEFAULTS
from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, plotly_tab
from ui import compute as C

VIEWS = ["grid", "head", "query", "mean", "mask", "output", "model", "analysis", "norms", "neurons"]


def built(view: str, theme: str = "light"):
    state = DEFAULTS.with_(text="the cat sat on the mat", view=view, heads=4, mask="causal")
    return view_figure(compute(state.config), state, style=style_for(state, theme=theme))


def test_under_lays_the_value_over_the_default_and_changes_neither():
    default = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]}
    value = {"b": {"c": 20}, "e": [9], "f": 4}
    merged = under(default, value)
    assert merged == {"a": 1, "b": {"c": 20, "d": 3}, "e": [9], "f": 4}
    assert default == {"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]} and value == {"b": {"c": 20}, "e": [9], "f": 4}
    assert under({"x": 1}, 5) == 5 and under(None, {"y": 2}) == {"y": 2}


def test_the_template_is_written_where_plotly_would_apply_it_and_the_figure_wins():
    tpl = {"layout": {"xaxis": {"gridcolor": "grey", "ticks": ""}, "annotationdefaults": {"arrowhead": 0},
                      "font": {"color": "navy"}, "coloraxis": {"colorbar": {"ticks": ""}}, "polar": {"hole": 0.1}},
           "data": {"bar": [{"type": "bar", "marker": {"line": {"width": 1}}}, {"type": "bar", "opacity": 0.5}],
                    "pie": [{"type": "pie", "hole": 0.2}]}}
    data = [{"type": "bar", "y": [1]}, {"type": "bar", "y": [2], "xaxis": "x2"}, {"type": "bar", "y": [3]},
            {"type": "heatmap", "z": [[1]], "coloraxis": "coloraxis"},
            {"type": "pie", "values": [1]}]
    layout = {"template": tpl, "xaxis": {"ticks": "outside"}, "annotations": [{"text": "a"}, {"text": "b"}],
              "font": {"size": 14}}
    traces, out = apply_template(data, layout)
    assert "template" not in out and "template" in layout  # the builder's dict is left as it was
    # The figure's own value wins; bars stand along x, so plotly.js draws no x grid unless the
    # figure itself sets a grid colour: the template's written in must not turn it on.
    assert out["xaxis"] == {"gridcolor": "grey", "ticks": "outside", "showgrid": False}
    assert out["xaxis2"] == {"gridcolor": "grey", "ticks": "", "showgrid": False}  # one only a trace names, too
    assert "yaxis" not in out  # the template has no y axis defaults
    assert out["annotations"] == [{"arrowhead": 0, "text": "a"}, {"arrowhead": 0, "text": "b"}]
    assert "annotationdefaults" not in out and "polar" not in out  # no polar subplot was in the figure
    assert out["font"] == {"color": "navy", "size": 14}
    assert out["coloraxis"] == {"colorbar": {"ticks": ""}}  # named by a trace
    # The i-th bar takes the i-th bar defaults, cycling; the pie its own; the heatmap none.
    assert traces[0]["marker"] == {"line": {"width": 1}} and traces[1]["opacity"] == 0.5
    assert traces[2]["marker"] == {"line": {"width": 1}} and "opacity" not in traces[2]
    assert traces[3] == data[3] and traces[4]["hole"] == 0.2
    assert apply_template(data, {"height": 3}) == (data, {"height": 3})  # no template: as it was


@pytest.mark.parametrize("view", VIEWS)
def test_a_frozen_figure_has_no_template_and_a_revision_of_its_data(view):
    spec = C.freeze(built(view)).to_dict()
    assert "template" not in spec["layout"]
    sent = json.loads(spec.json)
    assert sent["layout"]["datarevision"] == spec["layout"]["datarevision"]
    # The same data, built again, give the same revision.
    again = C.drawn_once(C.plain_dict(built(view)))
    assert again["layout"]["datarevision"] == spec["layout"]["datarevision"]


def test_other_data_get_another_revision():
    a = C.drawn_once({"data": [{"type": "heatmap", "z": np.eye(3, dtype=np.float32)}],
                      "layout": {"template": template("light")}})
    b = C.drawn_once({"data": [{"type": "heatmap", "z": 2 * np.eye(3, dtype=np.float32)}],
                      "layout": {"template": template("light")}})
    c = C.drawn_once({"data": [{"type": "heatmap", "z": np.eye(3, dtype=np.float32)}],
                      "layout": {"template": template("light"), "height": 9}})
    assert a["layout"]["datarevision"] != b["layout"]["datarevision"]
    assert a["layout"]["datarevision"] == c["layout"]["datarevision"]  # the revision is of the data alone


def test_rows_down_is_a_fixed_reversed_range_for_every_heatmap():
    assert rows_down(3) == {"range": [2.5, -0.5]}
    for view in ("grid", "head", "mean", "mask"):
        layout = built(view).to_dict()["layout"]
        assert "autorange" not in layout["yaxis"] and layout["yaxis"]["range"][0] > layout["yaxis"]["range"][1]


# plotly.js in Chromium: draw a figure, then react with a JSON copy of what was drawn (as
# Streamlit's chart does) and count the heatmaps painted (each paint ends in toDataURL).
PAGE_JS = """window.paints = 0; const _td = HTMLCanvasElement.prototype.toDataURL;
HTMLCanvasElement.prototype.toDataURL = function(...a) { window.paints++; return _td.apply(this, a); };"""
DRAW = """async f => { const d = document.getElementById('d'); Plotly.purge(d);
    await Plotly.newPlot(d, f.data, f.layout);
    const first = window.paints; window.paints = 0;
    const copy = JSON.parse(JSON.stringify({data: d.data, layout: d.layout}));
    await Plotly.react(d, copy.data, copy.layout);
    const again = window.paints; window.paints = 0;
    return {first, again}; }"""
PNG = """async f => { const d = document.getElementById('d'); Plotly.purge(d);
    await Plotly.newPlot(d, f.data, f.layout);
    return await Plotly.toImage(d, {format: 'png', width: 900, height: 700}); }"""


@pytest.fixture(scope="module")
def plotly_page(browser):
    with plotly_tab(browser, width=1000, script=PAGE_JS) as page:
        yield page


def as_sent(spec: dict) -> dict:
    return json.loads(C._to_json(spec, validate=False))


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)
@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("view", VIEWS)
def test_each_view_looks_the_same_with_its_template_written_in(plotly_page, view, theme):
    fig = built(view, theme)
    with_template = as_sent(fig.to_dict())
    written = json.loads(C.freeze(built(view, theme)).to_dict().json)
    assert plotly_page.evaluate(PNG, with_template) == plotly_page.evaluate(PNG, written)


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)
def test_a_fixed_reversed_range_looks_like_autorange_reversed(plotly_page):
    spec = as_sent(built("head").to_dict())
    reversed_ = json.loads(json.dumps(spec))
    reversed_["layout"]["yaxis"].pop("range")
    reversed_["layout"]["yaxis"]["autorange"] = "reversed"
    assert plotly_page.evaluate(PNG, spec) == plotly_page.evaluate(PNG, reversed_)


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason=HOW_TO_GET_CHROMIUM)
@pytest.mark.parametrize("view", ["grid", "head", "mean", "mask", "output", "model", "analysis"])
def test_streamlits_copy_of_a_drawn_heatmap_repaints_nothing(plotly_page, view):
    frozen = json.loads(C.freeze(built(view)).to_dict().json)
    drawn = plotly_page.evaluate(DRAW, frozen)
    assert drawn["first"] >= 1 and drawn["again"] == 0
    # As Plotly itself would send it (a template, no revision), the copy repainted it.
    assert plotly_page.evaluate(DRAW, as_sent(built(view).to_dict()))["again"] >= 1
