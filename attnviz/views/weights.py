"""The views that draw a run's weights as they are: every head, one head, a query's focus, the
mean, the mask, the output vectors and the weights table; a long text as an image with a close-up
of its exact numbers; each with its text alternative. What each view is, needs and draws is its
entry in ``attnviz.views.catalogue``.

Every function takes the run, the state it is read with (its sentence ``seq``, ``head``,
``query`` and close-up corner ``q0``/``k0``) and, for a figure, the style.
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.describe import describe_grid, describe_head, describe_query
from attnviz.i18n import _
from attnviz.run.result import AttentionResult
from attnviz.views.selection import style_for


def draw_grid(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    return F.grid_figure(F.grid_data(result, state.seq, max_cells=F.DEFAULT_MAX_CELLS), style)


def is_long(result: AttentionResult) -> bool:
    """Too many cells for a hoverable heatmap of one head: drawn as an image instead."""
    L, S = result.weights.shape[-2:]
    return L * S > F.IMAGE_ABOVE_CELLS


def draw_head(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    d = F.head_data(result, state.seq, state.head)
    return F.image_figure(d, style) if is_long(result) else F.heatmap_figure(d, style)  # long: a pixel a cell


def draw_mean(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    d = F.mean_data(result, state.seq)
    return F.image_figure(d, style) if is_long(result) else F.heatmap_figure(d, style)


def draw_mask(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    if is_long(result):
        return F.image_figure(F.mask_data(result, state.seq), style, scale=F.MASK_COLORS)
    return F.mask_figure(result, state.seq, style)


def draw_output(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    return F.output_figure(result, state.seq, style)


def draw_query(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    return F.query_figure(result, state.seq, state.query, style)


def close_up_of_head(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """The exact numbers of a long text's head: a REGION × REGION close-up from (q0, k0)."""
    return F.region_figure(F.region_data(result, state.seq, state.head, state.explorer.q0, state.explorer.k0), style)


def close_up_of_mean(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """The same close-up of the mean over heads."""
    return F.region_figure(F.region_data(result, state.seq, None, state.explorer.q0, state.explorer.k0), style)


def close_up_title(result: AttentionResult, state) -> str:
    return _("Close-up: exact weights")


def close_up_caption(result: AttentionResult, state) -> str:
    return _("The picture above has one pixel per weight. Pick the top-left corner of a {n} × {n} window to read "
             "its exact values (hover a cell).").format(n=F.REGION)


def pooled_note(result: AttentionResult, state=None, max_cells: int = F.DEFAULT_MAX_CELLS) -> str | None:
    """What the grid overview says when it max-pools a long text, or labels only some of its
    tokens (None when it does neither)."""
    L, S = result.weights.shape[-2:]
    block = F.pool_block(L, S, max_cells)
    if block > 1:
        return F.pooling_note(L, S, block) + " " + _("The 'One head' view shows every cell.")
    font = style_for(state).font_size if state is not None else F.FigureStyle().font_size
    return F.thinning_note(F.grid_plan(result.weights.shape[1], L, S, font), L, S)


def fully_masked_note(result: AttentionResult, state) -> str | None:
    if result.fully_masked_rows(state.seq):
        return _("Some query rows are fully masked: their weights and output are all zero, by definition.")
    return None


def no_vectors(result: AttentionResult, state=None) -> str | None:
    """Why the output view has nothing to draw: a model that gives its weights only."""
    if result.width == 0:
        return _("{model} gives its attention weights only: there are no output vectors to show.").format(
            model=result.model_name)
    return None


def output_table(result: AttentionResult, state) -> dict:
    """The output vectors of the sentence as a table: a row per token (data, index)."""
    return {"data": result.output[state.seq].numpy(),
            "index": [f"{i}: {t}" for i, t in enumerate(result.tokens[state.seq])]}


def weights_table(result: AttentionResult, state) -> dict:
    """One head's weights as a table: every cell, or (a long text) the close-up's window."""
    long = is_long(result)
    n, L, S = state.seq, *result.weights.shape[2:]
    q0, k0 = (state.explorer.q0, state.explorer.k0) if long else (0, 0)
    q1, k1 = (min(q0 + F.REGION, L), min(k0 + F.REGION, S)) if long else (L, S)
    tokens, keys = result.tokens[n], result.source_tokens[n]
    return {"data": result.weights[n, state.head, q0:q1, k0:k1].numpy(),  # (rows, cols)
            "index": [f"{i}: {t}" for i, t in enumerate(tokens[q0:q1], q0)],
            "columns": [f"{j}: {t}" for j, t in enumerate(keys[k0:k1], k0)],
            "window": {"q0": q0, "q1": q1 - 1, "k0": k0, "k1": k1 - 1}}


def weights_title(result: AttentionResult, state) -> str:
    table = weights_table(result, state)
    return _("Weights of head {h}").format(h=state.head) + (
        _(", queries {q0}–{q1} × keys {k0}–{k1}").format(**table["window"]) if is_long(result) else "")


def describe_grid_view(result: AttentionResult, state, fig=None) -> str:
    return describe_grid(result, state.seq)


def describe_head_view(result: AttentionResult, state, fig=None) -> str:
    return describe_head(result, state.seq, state.head)


def describe_query_view(result: AttentionResult, state, fig=None) -> str:
    return describe_query(result, state.seq, state.query)
