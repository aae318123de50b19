"""Which heads cause the answer: patching's pictures (layers × heads, layers × positions, on a
diverging scale centred on 0) and the logit attribution's bars, one per head."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots import margins
from attnviz.plots.style import (
    DIVERGING,
    FigureStyle,
    axis_labels,
    colorscale,
    colour_bar,
    figure,
    layout_for,
    rows_down,
)
from attnviz.plots.ticks import every_fitting, every_tick, labelled

MIN_PLOT_PX = 160  # the least height of a patching heatmap's plot (10 × a larger font): its colour bar readable
HALF_WIDTH_PLOT_PX = 450  # a plot's width in half a laptop's page or a projector's whole: the labels that fit


def _limit(values: np.ndarray) -> float:
    """A symmetric range about 0 that shows 1 (the clean run's answer, all brought back)."""
    finite = values[np.isfinite(values)]
    return max(1.0, float(np.abs(finite).max()) if finite.size else 1.0)


def _heatmap(z: np.ndarray, x: list[str], y: list[str], title: str, style: FigureStyle, value_name: str, *,
             x_title: str, x_word: str, clickable: bool = False) -> go.Figure:
    """``x_word``: what a column is, in the title's note where one label in k is drawn ("one head in 2")."""
    lim = _limit(z)
    traces = [{"type": "heatmap", "z": z.astype(np.float32), "x": x, "y": y, "zmin": -lim, "zmax": lim, "zmid": 0.0,
               "colorscale": colorscale(DIVERGING), "colorbar": colour_bar(value_name),
               "hovertemplate": f"%{{y}}, %{{x}}<br>{value_name}: %{{z:.3f}}<extra></extra>"}]
    if clickable:
        # Heatmaps cannot be selected in Plotly; a near-invisible marker at each cell's centre can,
        # so a click on a cell reports it (customdata: row · columns + column), as the model view does.
        rows, cols = z.shape
        traces.append({"type": "scatter", "mode": "markers", "showlegend": False,
                       "x": [x[c] for _r in range(rows) for c in range(cols)],
                       "y": [y[r] for r in range(rows) for _c in range(cols)],
                       "customdata": list(range(rows * cols)),
                       "text": [f"{y[r]} {x[c]}: {z[r, c]:.3f}" for r in range(rows) for c in range(cols)],
                       "marker": {"size": 24, "opacity": 0.01, "color": "#000000"},
                       "hovertemplate": "%{text}<br>" + _("click to open") + "<extra></extra>"})
    fs = style.font_size
    # labels level where they fit a narrow (half-width) chart side by side, else upright, said so that the margin
    # reserved is the one drawn (Plotly, left to turn them, turned them after the margins were set)
    angle = 0 if len(x) * (margins.labels_em(x) + 1) * fs <= 400 else 90
    every = every_fitting(x, fs, HALF_WIDTH_PLOT_PX)
    layout = {"xaxis": {"type": "category", **every_tick(x, x_title, every), "tickangle": -angle},
              "yaxis": {"type": "category", "title": {"text": _("layer")}, **rows_down(len(y))}}
    room = {"l": margins.left(y, fs), "b": margins.bottom(x, fs, angle=angle, title=True),
            "r": margins.colorbar(value_name, fs, -lim, lim)}
    if clickable:
        layout["clickmode"] = "event+select"
    layout = layout_for(layout, style, labelled(title, x, None, words=(x_word, "row"), every=(every, None)),
                        room=room)
    if style.height is None:  # the plot's own height on top of its margins: two layers under a projector's
        # two-line title and upright labels had kept 64 px of a 300 px figure, too short for its colour bar
        layout["height"] = layout["margin"]["t"] + layout["margin"]["b"] + max(MIN_PLOT_PX, 10 * fs, 40 * len(y))
    return figure(traces, layout)


def head_patching_figure(values: np.ndarray, title: str, style: FigureStyle = FigureStyle()) -> go.Figure:
    """(layers, H) normalised patching results, a cell per head; a click on a cell reports its
    head (customdata layer · H + head), so that the page opens it."""
    layers, H = values.shape
    # On a projector the heads by number under the axis title "head": "head 0" turned upright took the plot's
    # height, and its colour bar's ticks ran together.
    heads = [str(h) for h in range(H)] if style.presenting else [_("head {h}").format(h=h) for h in range(H)]
    return _heatmap(values, heads, [f"L{layer}" for layer in range(layers)],
                    title, style, _("share brought back"), x_title=_("head"), x_word="head", clickable=True)


def residual_patching_figure(values: np.ndarray, tokens: list[str], differ: list[int], title: str,
                     style: FigureStyle = FigureStyle()) -> go.Figure:
    """(layers, L) normalised residual patching: a column per position, the positions where the
    two prompts differ marked ✱ in their labels."""
    labels = axis_labels([("✱ " if i in differ else "") + f"{i}: {t}" for i, t in enumerate(tokens)])
    return _heatmap(values, labels, [f"L{layer}" for layer in range(values.shape[0])], title, style,
                    _("share brought back"), x_title=_("position (✱: where the prompts differ)"), x_word="position")


def attribution_figure(heads: np.ndarray, rest: dict[str, float], title: str,
                       style: FigureStyle = FigureStyle()) -> go.Figure:
    """One bar per head (its direct logit attribution), then one per other part, all in logits."""
    layers, H = heads.shape
    names = [f"L{layer} H{h}" for layer in range(layers) for h in range(H)]
    trace = {"type": "bar", "x": names, "y": heads.reshape(-1).astype(np.float64), "name": _("heads"),
             "marker": {"color": "#2a9d8f"}, "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"}
    other = {"type": "bar", "x": axis_labels(list(rest)), "y": np.asarray(list(rest.values()), dtype=np.float64),
             "name": _("the other parts"), "marker": {"color": "#8d99ae"},
             "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"}
    # taller on a projector: at its font, the rotated part names left the axis title less than its length
    layout = {"barmode": "group", "showlegend": True, "height": 560 if style.presenting else 400,
              "xaxis": {"type": "category", "title": {"text": _("part of the residual stream")}},
              "yaxis": {"title": {"text": _("logits toward the answer")}, "zeroline": True}}
    return figure([trace, other], layout_for(layout, style, title))
