import json

import numpy as np
import plotly.io as pio
import pytest

from attnviz import AttentionConfig, compute
from attnviz import plots as F


@pytest.fixture(scope="module")
def result():
    return compute(AttentionConfig(text="the cat saw the dog", num_heads=4, mask="causal"))


def test_grid_is_one_trace_with_a_labelled_block_per_head_on_a_shared_scale(result):
    from tests.support.apphelp import grid_heads

    fig = F.grid_figure(F.grid_data(result))
    assert len(fig.data) == 1 and fig.data[0].coloraxis == "coloraxis"  # one trace, one pair of axes
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    assert [a.text for a in fig.layout.annotations] == [f"head {h}" for h in range(4)]
    blocks = grid_heads(json.loads(pio.to_json(fig)))
    assert len(blocks) == 4
    for h, b in enumerate(blocks):
        np.testing.assert_array_equal(b["z"], result.weights[0, h].numpy())
        assert [F.plain_label(x) for x in b["x"]] == ["the", "cat", "saw", "the", "dog"]
        assert np.triu(b["z"], 1).max() == 0  # causal: nothing above the diagonal


def test_repeated_tokens_keep_their_own_rows(result):
    d = F.head_data(result)
    assert len(set(d.x)) == len(d.x) == 5
    assert F.plain_label(d.x[0]) == F.plain_label(d.x[3]) == "the"
    many = F.axis_labels(["w"] * 512)
    assert len(set(many)) == 512 and max(map(len, many)) <= 6


def test_hover_names_query_key_weight(result):
    t = F.grid_figure(F.grid_data(result)).data[0]
    assert "query" in t.hovertemplate and "key" in t.hovertemplate and "weight" in t.hovertemplate


@pytest.mark.parametrize("token", ["<b>x</b>", '<a href="javascript:alert(1)">y</a>', "<img src=x onerror=alert(1)>"])
def test_labels_are_escaped(token):
    labels = F.axis_labels([token, "ok"])
    assert "<" not in labels[0] and ">" not in labels[0]
    import html
    assert html.unescape(labels[0]) == token
    # and it survives into the serialized figure escaped
    r = compute(AttentionConfig(text="a b"))
    r.tokens[0][0] = r.source_tokens[0][0] = token
    spec = pio.to_json(F.grid_figure(F.grid_data(r)))
    assert "<a href" not in spec and "<b>" not in spec and "<img" not in spec


def test_output_heatmap(result):
    fig = F.output_figure(result)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (5, 64)
    np.testing.assert_array_equal(z, result.output[0].numpy())


def test_max_pool_keeps_peaks():
    z = np.zeros((10, 10), dtype=np.float32)
    z[7, 2] = 0.9
    pooled, block = F.max_pool(z, 4)
    assert block == 3 and pooled.shape == (4, 4) and pooled[2, 0] == np.float32(0.9)
    assert F.max_pool(z, 10)[1] == 1


def test_long_text_grid_is_pooled_and_says_so():
    r = compute(AttentionConfig(text=" ".join(f"w{i}" for i in range(300)), num_heads=2))
    data = F.grid_data(r, max_cells=64)
    assert data[0].pooled == 5 and data[0].z.shape == (60, 60) and data[0].notes
    assert json.loads(F.grid_figure(data).to_json())  # serialisable


def test_no_nan_in_figures_with_fully_masked_rows():
    r = compute(AttentionConfig(text="a b c\nd", mask="window", window=0, pad_to=4))
    assert r.weights[1, :, 1:].sum() == 0  # pad queries of sequence 1 see nothing
    figs = [F.output_figure(r, 1), F.mask_figure(r, 1)]
    for fig in figs:
        for trace in fig.data:
            assert np.isfinite(np.asarray(trace.z, dtype=float)).all()
    grid = F.grid_figure(F.grid_data(r, n=1)).data[0]
    z, head = np.asarray(grid.z), np.asarray(grid.customdata)
    assert np.isfinite(z[head >= 0]).all() and np.isnan(z[head < 0]).all()  # NaN only in the blank gaps


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.mark.parametrize("tokens,heads,font", [(13, 8, 12), (20, 8, 12), (24, 8, 12), (13, 8, 24), (9, 4, 12),
                                               (3, 1, 12)])
def test_grid_labels_every_token_once_per_row_and_column_of_heads(tokens, heads, font):
    """Every key labelled under every column of heads and every query beside every row, in
    the grid's tick size (>= 10 px), with a label pitch of cells that holds them (Plotly thinned
    the labels it could not fit, alternating between blocks)."""
    r = compute(AttentionConfig(text=_words(tokens), num_heads=heads))
    fig = F.grid_figure(F.grid_data(r), F.FigureStyle(font_size=font))
    plan = F.grid_plan(heads, tokens, tokens, font)
    assert not plan.thinned
    x, y = fig.layout.xaxis, fig.layout.yaxis
    assert x.tickmode == y.tickmode == "array" and x.tickfont.size >= 10 and y.tickfont.size >= 10
    words = _words(tokens).split()
    assert list(x.ticktext) == words * plan.cols and list(y.ticktext) == words * plan.rows
    assert plan.rows * plan.cols >= heads > (plan.rows - 1) * plan.cols
    # Across: the labels of a row of heads fit the plot's width at the label pitch.
    gap = max(1, round(0.06 * tokens))
    assert (plan.cols * tokens + (plan.cols - 1) * gap) * F.LABEL_PITCH_PX <= F.PLOT_PX[font > 14]
    # Down: each category row is at least a label pitch tall.
    m = fig.layout.margin
    plot_h = fig.layout.height - m.t - m.b
    assert plot_h / (len(fig.data[0].y)) >= F.LABEL_PITCH_PX - 0.5


def test_presenter_grid_fits_one_projector_screen():
    """8 heads × 13 tokens in presenter mode: one figure no taller than a 1024 × 768 screen
    leaves under the view selector, every label drawn."""
    r = compute(AttentionConfig(text=_words(13), num_heads=8))
    fig = F.grid_figure(F.grid_data(r), F.FigureStyle(font_size=24))
    assert fig.layout.height <= 600 and len(fig.layout.xaxis.tickvals) == 4 * 13


def test_grid_thins_labels_past_what_fits_and_says_so():
    r = compute(AttentionConfig(text=_words(80), num_heads=8))
    plan = F.grid_plan(8, 80, 80, 12)
    assert plan.cols == 1 and plan.thinned
    fig = F.grid_figure(F.grid_data(r), F.FigureStyle())
    assert len(fig.layout.xaxis.tickvals) == len(range(0, 80, plan.every_x))
    assert fig.layout.title.text.endswith(f"<br>(one key in {plan.every_x}, one query in {plan.every_y} labelled)")
    note = F.thinning_note(plan, 80, 80)
    assert f"one key in {plan.every_x}" in note and "One head" in note
    assert "every key" in F.thinning_note(F.GridPlan(1, 1, 1, 3), 80, 80)  # only the queries thinned
    assert F.thinning_note(F.grid_plan(8, 13, 13, 12), 13, 13) is None
    assert F.grid_figure(F.grid_data(r), F.FigureStyle(height=300)).layout.height == 300


@pytest.mark.parametrize("page", ["explorer", "step-by-step", "mask-lab", "cross-attention", "verify", "gradients",
                                  "why-scale"])
def test_every_page_figure_is_valid_plotly(page):
    """Figures skip Plotly's validation when built (for speed); validate them here."""
    import plotly.graph_objects as go

    from attnviz.views.catalogue import FIGURE_VIEWS
    from attnviz.views.catalogue import figure_of as view_figure
    from attnviz.views.pages import page_figure
    from attnviz.views.state import DEFAULTS

    fig = page_figure(page, DEFAULTS.with_(text="I love AI", heads=2, d_model=16), F.FigureStyle())
    go.Figure(fig.to_dict())  # raises on any invalid property
    if page == "explorer":
        r = compute(DEFAULTS.with_(text="I love AI", heads=2, d_model=16).config)
        for view in FIGURE_VIEWS:
            go.Figure(view_figure(r, DEFAULTS.with_(query=1), view).to_dict())


def test_verify_figure_shows_where_differences_sit():
    from attnviz.analysis.verify import Verification
    from attnviz.views.verify import verify_figure

    v = Verification([], "float32", "cpu", 0, [], 1e-5, [0.0, 3e-4], [1e-8, 0.0, 2e-3], ["a", "b", "c"])
    fig = verify_figure(v, F.FigureStyle())
    heads, rows = fig.data
    assert list(heads.customdata) == [0.0, 3e-4] and list(rows.customdata) == [1e-8, 0.0, 2e-3]
    assert heads.marker.color[1] == rows.marker.color[2] == "#d62728"  # over the threshold: red
    assert heads.marker.color[0] == rows.marker.color[0] != "#d62728"
    assert min(heads.y) > 0  # zeros drawn at a floor on the log axis, never NaN


@pytest.mark.parametrize("words", [5, 300])  # 300 tokens: max-pooled to the grid's cells
def test_the_grids_shared_labels_give_each_head_its_own_data(words):
    from dataclasses import asdict

    from attnviz.plots.data import grid_data, head_data

    r = compute(AttentionConfig(text=" ".join(f"w{i % 7}" for i in range(words)), num_heads=4, mask="causal"))
    shared = grid_data(r, 0)
    for h, d in enumerate(shared):
        alone = head_data(r, 0, h, max_cells=F.DEFAULT_MAX_CELLS)
        np.testing.assert_array_equal(d.z, alone.z)
        assert {k: v for k, v in asdict(d).items() if k != "z"} == {k: v for k, v in asdict(alone).items() if k != "z"}
    assert shared[0].pooled == (1 if words == 5 else 4)


def test_a_grid_refuses_blocks_side_by_side_that_read_different_rows():
    matrix_data, grid_figure = F.matrix_data, F.grid_figure
    w = np.eye(3, dtype=np.float32)
    clean = matrix_data(w, ["BOS", "10", "28"], ["BOS", "10", "28"], "clean", None)
    corrupted = matrix_data(w, ["BOS", "10", "12"], ["BOS", "10", "12"], "corrupted", None)
    with pytest.raises(ValueError, match="other rows than block 0"):
        grid_figure([clean, corrupted], cols=2)  # one row of labels would name both with the corrupted prompt
    with pytest.raises(ValueError, match="other columns than block 0"):
        grid_figure([clean, corrupted], cols=1)
    same = matrix_data(w * 0.5, ["BOS", "10", "28"], ["BOS", "10", "28"], "again", None)
    assert grid_figure([clean, same], cols=2).layout.annotations[1].text == "again"
