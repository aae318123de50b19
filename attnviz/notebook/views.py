"""``show(attention, tokens, view=...)``: attnviz's figures for weights from anywhere.

Views: "grid" (every head of one layer), "head" (one head, every cell), "model" (every
layer × head as small multiples, a row per layer), "query" (one query's weights over the
keys, per head), "analysis" (entropy and mean distance per layer × head, with
``head_table`` for the numbers) and "rollout" (Abnar & Zuidema over the layers).

Signed values (``signed=True``: scores, attributions) are drawn on the diverging scale,
symmetric about 0. Long inputs are max-pooled in the grid and model views (peaks survive).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from attnviz.analysis.heads import head_stats, mean_distance, rollout, row_entropy
from attnviz.inputs.handover import Attention, normalise
from attnviz.plots import (
    DEFAULT_MAX_CELLS,
    DIVERGING,
    FigureStyle,
    colorscale,
    colour_bar,
    figure,
    grid_figure,
    heatmap_figure,
    layout_for,
    matrix_data,
    matrix_figure,
    query_figure,
    rows_down,
)

VIEWS = ("grid", "head", "model", "query", "analysis", "rollout")
MODEL_MAX_CELLS = 32  # a small multiple's side in the model view (pooled beyond)


def index(i: int, n: int, name: str, plural: str) -> int:
    """``i`` checked against ``n`` (negative counts from the end, as in Python)."""
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
        raise ValueError(f"{name} must be an integer, not {i!r}.")
    if not -n <= i < n:
        raise ValueError(f"{name} {i} does not exist: there are {n} {plural} (0–{n - 1}).")
    return int(i) % n


def value_range(w: np.ndarray, signed: bool) -> tuple[float, float]:
    """The colour range: symmetric about 0 for signed values, else 0 to max(1, largest)."""
    if signed:
        lim = float(np.abs(w).max()) or 1.0
        return -lim, lim
    return 0.0, max(1.0, float(w.max()))


def colour_axis(fig: go.Figure, w: np.ndarray, signed: bool) -> go.Figure:
    """Set a grid figure's shared colour axis for ``w``'s values."""
    lo, hi = value_range(w, signed)
    axis: dict = {"cmin": lo, "cmax": hi}
    if signed:
        axis.update(colorscale=colorscale(DIVERGING), cmid=0.0)
    fig.update_layout(coloraxis=axis)
    return fig


def colour_trace(fig: go.Figure, w: np.ndarray, signed: bool) -> go.Figure:
    """Set a single heatmap trace's colour range for ``w``'s values."""
    lo, hi = value_range(w, signed)
    fig.update_traces(zmin=lo, zmax=hi)
    if signed:
        fig.update_traces(colorscale=colorscale(DIVERGING), zmid=0.0)
    return fig


def blocks(a: Attention, pairs, title, max_cells: int | None):
    """One ``HeatmapData`` per (layer, head) pair, titled ``title(layer, head)``."""
    return [matrix_data(a.weights[layer, h], a.tokens, a.source_tokens, title(layer, h), max_cells)
            for layer, h in pairs]


def pooled_suffix(data) -> str:
    block = data[0].pooled
    return f" (max-pooled in {block}×{block} blocks)" if block > 1 else ""


def show_grid(a: Attention, layer: int, style: FigureStyle) -> go.Figure:
    data = blocks(a, [(layer, h) for h in range(a.heads)], lambda _l, h: f"head {h}", DEFAULT_MAX_CELLS)
    fig = grid_figure(data, style, title=f"layer {layer}: attention weights per head" + pooled_suffix(data))
    return colour_axis(fig, a.weights[layer], a.signed)


def show_head(a: Attention, layer: int, head: int, style: FigureStyle) -> go.Figure:
    w = a.weights[layer, head]  # (L, S)
    lo, hi = value_range(w, a.signed)
    d = matrix_data(w, a.tokens, a.source_tokens, f"layer {layer}, head {head}", None, zmin=lo, zmax=hi)
    return colour_trace(heatmap_figure(d, style), w, a.signed)


def show_model(a: Attention, style: FigureStyle, layers=None, heads=None, max_cells: int | None = MODEL_MAX_CELLS,
               title: str | None = None) -> go.Figure:
    layers = list(range(a.layers)) if layers is None else list(layers)
    heads = list(range(a.heads)) if heads is None else list(heads)
    data = blocks(a, [(layer, h) for layer in layers for h in heads], lambda layer, h: f"H{h}", max_cells)
    title = title or f"every layer × head ({len(layers)} × {len(heads)}): a row per layer"
    fig = grid_figure(data, style, title=title + pooled_suffix(data), cols=len(heads), ticks=False,
                      row_names=[f"L{layer}" for layer in layers], col_ids=heads)
    return colour_axis(fig, a.weights[np.ix_(layers, heads)], a.signed)


@dataclass
class _Weights:
    """What ``plots.query_figure`` reads of a run: weights (N, H, L, S) and the labels."""

    weights: torch.Tensor
    tokens: list[list[str]]
    source_tokens: list[list[str]]


def show_query(a: Attention, layer: int, query: int, style: FigureStyle) -> go.Figure:
    run = _Weights(torch.from_numpy(a.weights[layer]).unsqueeze(0), [a.tokens], [a.source_tokens])  # (1, H, L, S)
    fig = query_figure(run, 0, query, style)
    lo, hi = value_range(a.weights[layer, :, query], a.signed)
    fig.update_layout(yaxis_range=[lo, hi], title_text=f"layer {layer}: {fig.layout.title.text}")
    return fig


def _unsigned(a: Attention, what: str) -> None:
    if a.signed:
        raise ValueError(f"{what} needs attention weights (>= 0, rows summing to 1); signed values have none.")


def head_table(attention, tokens=None, *, source_tokens=None) -> list[dict]:
    """One dict per layer × head: entropy (nats) and mean distance, and for self-attention
    the pattern scores of ``attnviz.analysis.heads.head_stats`` (previous, next, self,
    first, sep)."""
    a = normalise(attention, tokens, source_tokens=source_tokens)
    _unsigned(a, "the head analysis")
    if a.L == a.S:
        return [s.row() for s in head_stats(a.layer_weights(), 0, a.L, a.tokens)]
    w = torch.from_numpy(a.weights).to(torch.float64)  # (layers, H, L, S)
    ent, dist = row_entropy(w).mean(-1), mean_distance(w).mean(-1)  # (layers, H)
    return [{"layer": layer, "head": h, "entropy": float(ent[layer, h]), "distance": float(dist[layer, h])}
            for layer in range(a.layers) for h in range(a.heads)]


def table_matrix(rows: list[dict], column: str, layers: int, heads: int) -> np.ndarray:
    z = np.zeros((layers, heads), dtype=np.float32)  # (layers, H)
    for r in rows:
        z[r["layer"], r["head"]] = r[column]
    return z


def show_analysis(a: Attention, style: FigureStyle) -> go.Figure:
    rows = head_table(a)
    x = [f"head {h}" for h in range(a.heads)]
    y = [f"layer {layer}" for layer in range(a.layers)]
    panels = (("entropy", "entropy (nats)", "x", "y", 0.43), ("distance", "mean distance (tokens)", "x2", "y2", 1.0))
    traces = []
    for column, name, xa, ya, bar_x in panels:
        traces.append({"type": "heatmap", "z": table_matrix(rows, column, a.layers, a.heads), "x": x, "y": y,
                       "xaxis": xa, "yaxis": ya, "colorscale": colorscale(style.colors), "name": column,
                       "colorbar": colour_bar(column, x=bar_x, len=0.9, thickness=12),
                       "hovertemplate": f"%{{y}}, %{{x}}<br>{name}: %{{z:.3f}}<extra></extra>"})
    layout = {
        "xaxis": {"domain": [0.0, 0.38], "type": "category", "title": {"text": "entropy (nats)"}},
        "xaxis2": {"domain": [0.55, 0.93], "type": "category", "title": {"text": "mean distance (tokens)"}},
        "yaxis": {"type": "category", **rows_down(a.layers)},
        "yaxis2": {"type": "category", **rows_down(a.layers), "anchor": "x2"},
        "height": max(320, 28 * a.layers + 200),
    }
    return figure(traces, layout_for(layout, style, "head analysis: entropy and mean attention distance"))


def show_rollout(a: Attention, style: FigureStyle) -> go.Figure:
    _unsigned(a, "rollout")
    if a.L != a.S:
        raise ValueError(f"rollout needs self-attention (L = S); this attention has L = {a.L}, S = {a.S}.")
    r = rollout(torch.from_numpy(a.weights)).to(torch.float32).numpy()  # (L, L)
    return matrix_figure(r, a.tokens, a.tokens, f"attention rollout over {a.layers} layer(s)", style,
                         value_name="rollout", zero_one=True)


# The notebook's views, by name: each drawn from the weights alone, with the figure builders the app's views use
# (``attnviz.plots``). The app's table (``attnviz.views.catalogue.VIEWS``) draws from a page's run and state, a
# floor above this one; this table is what a notebook can draw without them.
DRAW = {
    "grid": lambda a, layer, head, query, style: show_grid(a, layer, style),
    "head": lambda a, layer, head, query, style: show_head(a, layer, index(head, a.heads, "head", "heads"), style),
    "model": lambda a, layer, head, query, style: show_model(a, style),
    "query": lambda a, layer, head, query, style: show_query(a, layer, index(query, a.L, "query", "queries"), style),
    "analysis": lambda a, layer, head, query, style: show_analysis(a, style),
    "rollout": lambda a, layer, head, query, style: show_rollout(a, style),
}
assert tuple(DRAW) == VIEWS


def show(attention, tokens=None, view: str = "grid", *, layer: int = 0, head: int = 0, query: int = -1,
         style: FigureStyle | None = None, signed: bool = False, source_tokens=None) -> go.Figure:
    """One of ``VIEWS`` as a Plotly figure (never shown: display it, or ``fig.show()``)."""
    if view not in DRAW:
        raise ValueError(f"unknown view {view!r}; the views are: {', '.join(VIEWS)}.")
    a = normalise(attention, tokens, signed=signed, source_tokens=source_tokens)
    style = FigureStyle() if style is None else style
    if not isinstance(style, FigureStyle):
        raise ValueError(f"style must be an attnviz.plots.FigureStyle, not {type(style).__name__}.")
    return DRAW[view](a, index(layer, a.layers, "layer", "layers"), head, query, style)
