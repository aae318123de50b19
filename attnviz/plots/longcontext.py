"""Figures of a long context (``attnviz.analysis.longcontext`` and ``kvcache``): every layer × head as
small multiples of its overview, one head's overview, and what a KV-cache policy keeps.

Weights span many orders of magnitude over thousands of tokens, so the overviews are drawn as
log10 of the block maxima. The small multiples are the overviews pooled to a few dozen blocks a side
(the largest weight of each group of blocks, exactly), all in one heatmap with a blank row and column
between heads, so a 24-layer × 14-head model is one trace of a few tens of thousands of cells.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.style import FigureStyle, colour_bar, short_bar_ticks, wrap_title

MULTIPLES_CELLS = 60_000  # cells of the small multiples at most, every head together
MULTIPLES_SIDE = (4, 32)  # blocks a side of one small multiple: at least, at most
FLOOR = -8.0  # log10 of the smallest weight drawn (a block of zeros, masked, is blank)


def pooled(overview: np.ndarray, side: int) -> np.ndarray:
    """overview (..., B, B) -> (..., ⌈B/f⌉, ⌈B/f⌉) with f = ⌈B/side⌉: each cell the largest of its f × f blocks."""
    B = overview.shape[-1]
    f = -(-B // max(1, side))
    n = -(-B // f)
    pad = np.zeros((*overview.shape[:-2], n * f, n * f), dtype=overview.dtype)
    pad[..., :B, :B] = overview
    return pad.reshape(*overview.shape[:-2], n, f, n, f).max(axis=(-3, -1))


def multiples_side(layers: int, heads: int, blocks: int) -> int:
    lo, hi = MULTIPLES_SIDE
    fits = int(np.sqrt(MULTIPLES_CELLS / max(1, layers * heads)))
    return max(1, min(blocks, max(lo, min(hi, fits))))


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        out = np.log10(x.astype(np.float32))
    return np.where(x > 0, np.maximum(out, FLOOR), np.nan).astype(np.float32)


def _frame(title: str, style: FigureStyle) -> dict:
    """The title (in lines a projector holds), theme and font every figure here shares."""
    return {"title": wrap_title(title, style.font_size), "font": {"size": style.font_size},
            "template": "plotly_dark" if style.theme == "dark" else "plotly_white"}


# The small multiples' panels at most this tall (laptop, projector): whole within a laptop's screen, and on a
# projector under the page's title and its two folded sections.
MULTIPLES_PLOT_PX = {False: 620, True: 330}


def small_multiples_figure(overview: np.ndarray, sink: np.ndarray, distance: np.ndarray, style: FigureStyle, *,
                           title: str) -> go.Figure:
    """overview (layers, H, B, B): one panel per head (columns) and layer (rows), pooled; the hover
    names the layer and head with its sink share and mean distance."""
    layers, H, B, _ = overview.shape
    small = pooled(overview, multiples_side(layers, H, B))  # (layers, H, s, s)
    s = small.shape[-1]
    step = s + 1
    z = np.full((layers * step - 1, H * step - 1), np.nan, dtype=np.float32)
    info = np.zeros((*z.shape, 4), dtype=np.float32)  # layer, head, sink, distance per cell
    for layer in range(layers):
        for h in range(H):
            r, c = layer * step, h * step
            z[r:r + s, c:c + s] = _log(small[layer, h])
            info[r:r + s, c:c + s] = (layer, h, sink[layer, h], distance[layer, h])
    fig = go.Figure(go.Heatmap(
        z=z, customdata=info, colorscale=style.colors, zmin=FLOOR, zmax=0, xgap=0, ygap=0,
        colorbar=colour_bar("log10 max weight"),
        hovertemplate="layer %{customdata[0]:.0f} · head %{customdata[1]:.0f}<br>sink share %{customdata[2]:.3f}"
                      "<br>mean distance %{customdata[3]:.1f} tokens<br>log10 block max %{z:.2f}<extra></extra>"))
    frame = _frame(title, style)
    plot = min(22 * layers * step // 2, MULTIPLES_PLOT_PX[style.presenting])  # the panels: within one screen
    lines = str(frame["title"]).count("<br>") + 1
    fig.update_layout(**frame, height=max(300, 70 + lines * round(1.6 * style.font_size) + plot))
    every = max(1, math.ceil(1.3 * style.font_size / (plot / layers)))  # a label's height apart, none overlapping
    fig.update_xaxes(tickvals=[h * step + s / 2 for h in range(H)], ticktext=[f"H{h}" for h in range(H)],
                     showgrid=False)
    fig.update_yaxes(tickvals=[layer * step + s / 2 for layer in range(0, layers, every)],
                     ticktext=[f"L{layer}" for layer in range(0, layers, every)], autorange="reversed",
                     showgrid=False)
    return fig


def head_figure(overview: np.ndarray, block: int, n: int, style: FigureStyle, *, title: str,
                click_grid: int = 0) -> go.Figure:
    """One head's overview (B, B) at full resolution, axes in tokens (each block's first).
    ``click_grid``: at most that many near-invisible markers a side, at block starts, so that a click
    reports a place: Plotly cannot select a heatmap's cells."""
    B = overview.shape[-1]
    starts = np.arange(B) * block
    fig = go.Figure(go.Heatmap(z=_log(overview), x=starts, y=starts, colorscale=style.colors, zmin=FLOOR, zmax=0,
                               colorbar=colour_bar("log10 max weight"),
                               hovertemplate="queries %{y}…, keys %{x}…<br>log10 block max %{z:.2f}<extra></extra>"))
    if click_grid:
        at = starts[np.unique(np.linspace(0, B - 1, min(B, click_grid)).round().astype(np.int64))]  # (g,)
        qs, ks = np.meshgrid(at, at, indexing="ij")  # (g, g) each
        fig.add_trace(go.Scatter(x=ks.ravel(), y=qs.ravel(), mode="markers", showlegend=False,
                                 marker={"size": 14, "opacity": 0.01, "color": "#000000"},
                                 hovertemplate="queries %{y}…, keys %{x}…: click for the exact weights<extra></extra>"))
        fig.update_layout(clickmode="event+select")
    fig.update_layout(**_frame(title, style), xaxis_title=f"key (of {n:,})", yaxis_title="query")
    fig.update_yaxes(autorange="reversed")
    return fig


def kept_strip_figure(kept: list[list[list[int]]], n: int, style: FigureStyle, *, title: str,
                      bins: int = 512) -> go.Figure:
    """What a policy keeps along the text: one row per layer and KV head, the share of each stretch
    of tokens kept (1: all kept)."""
    rows, labels = [], []
    b = -(-n // min(bins, n))
    for layer, heads in enumerate(kept):
        for g, positions in enumerate(heads):
            mask = np.zeros(n, dtype=np.float32)
            mask[np.asarray(positions, dtype=np.int64)] = 1
            pad = np.zeros(-(-n // b) * b, dtype=np.float32)
            pad[:n] = mask
            sizes = np.diff(np.minimum(np.arange(0, n + b, b), n))
            rows.append(pad.reshape(-1, b).sum(-1) / sizes)
            labels.append(f"L{layer} KV{g}")
    # A row per layer and KV head, and at least eight font heights of plot (its titles and labels take about 160 px):
    # a few rows left the colour bar too short for its own two tick labels at a projector's size.
    height = max(250, 80 + 18 * len(rows), 160 + 8 * style.font_size)
    fig = go.Figure(go.Heatmap(z=np.stack(rows).astype(np.float32), x=np.arange(len(rows[0])) * b, y=labels,
                               colorscale=style.colors, zmin=0, zmax=1,
                               colorbar=colour_bar("kept", **short_bar_ticks(height - 160, style.font_size)),
                               hovertemplate="%{y}, tokens %{x}…: %{z:.0%} kept<extra></extra>"))
    fig.update_layout(**_frame(title, style), xaxis_title="token", height=height)
    fig.update_yaxes(autorange="reversed")
    return fig


def window_figure(weights: np.ndarray, tokens: list[str], q0: int, k0: int, style: FigureStyle, *,
                  title: str) -> go.Figure:
    """A close-up's exact weights (rows, columns) of queries q0… over keys k0…, each axis labelled
    by position and token."""
    rows, cols = weights.shape
    ys = [f"{q0 + i} {tokens[q0 + i]}" for i in range(rows)]
    xs = [f"{k0 + j} {tokens[k0 + j]}" for j in range(cols)]
    fig = go.Figure(go.Heatmap(z=weights.astype(np.float32), x=xs, y=ys, colorscale=style.colors, zmin=0,
                               colorbar=colour_bar("weight"),
                               hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"))
    every = 1 if cols <= CLOSE_UP_LABELS else math.ceil(cols / CLOSE_UP_LABELS)  # labels that fit side by side
    key_title = _("key") if every == 1 else _("key ({note})").format(note=_("one in {k} labelled").format(k=every))
    fig.update_layout(**_frame(title, style), xaxis_title=key_title, yaxis_title=_("query"), height=600)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickmode="array", tickvals=xs[::every], ticktext=xs[::every])
    return fig


CLOSE_UP_LABELS = 32  # key labels a close-up's width holds upright
