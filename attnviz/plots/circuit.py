"""The circuit as a graph: heads as nodes placed by layer (x) and head (y), sized by what patching
each alone brings back; edges from path patching, coloured by the component the path reaches
(q, k or v), as thick as the share it brings back, drawn where it passes a threshold; composition
scores, from the weights alone, as a second layer of dashed grey edges."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.style import FigureStyle, figure, layout_for

COLOURS = {"q": "#1f77b4", "k": "#ff7f0e", "v": "#2ca02c"}  # one colour per component, the legend names them
WIDEST = 8.0  # the line width of an edge that brings back all of the answer


def check_threshold(threshold: float) -> float:
    """A threshold on a share of the answer: 0 … 1, or a ``ValueError`` that says so."""
    if not 0 <= float(threshold) <= 1:
        raise ValueError(f"threshold must be between 0 and 1 (a share of the answer brought back); got {threshold}.")
    return float(threshold)


def edges(paths: dict[str, np.ndarray], threshold: float) -> list[tuple[str, int, int, int, int, float]]:
    """Every path whose normalised share is at least ``threshold`` in size: (component, sender
    layer, sender head, receiver layer, receiver head, share), largest first."""
    out = []
    for c, values in paths.items():
        for s, h, r, g in zip(*np.nonzero(np.abs(np.nan_to_num(values)) >= threshold), strict=True):
            out.append((c, int(s), int(h), int(r), int(g), float(values[s, h, r, g])))
    return sorted(out, key=lambda e: -abs(e[5]))


def circuit_title(threshold: float, model: str | None = None, message: str | None = None) -> str:
    """The graph's one title, on the Circuit page, Watch it learn and in the notebook: whose circuit and which
    paths it draws (``message`` instead, where no circuit was found)."""
    if message is not None:
        return message
    share = f"{threshold:.0%}"
    if model is None:
        return _("the circuit found by the numbers (paths bringing back {share} or more)").format(share=share)
    return _("{model}: the circuit found by the numbers<br>paths bringing back {share} or more").format(
        model=model, share=share)


def found_title(found, threshold: float) -> str:
    """The title of a found circuit (``attnviz.analysis.circuit.FoundCircuit``): its model's, or why none was found."""
    return circuit_title(threshold, found.model, found.message if found.receiver is None else None)


def circuit_figure(heads: np.ndarray, paths: dict[str, np.ndarray], threshold: float, title: str,
                   style: FigureStyle = FigureStyle(), composition: np.ndarray | None = None,
                   composition_threshold: float = 0.2) -> go.Figure:
    """``heads`` (layers, H) normalised head patching; ``paths`` component -> (layers, H, layers, H)
    normalised path patching (NaN: no path); ``composition`` (layers, H, layers, H) scores, drawn
    where at least ``composition_threshold``."""
    layers, H = heads.shape
    threshold = check_threshold(threshold)
    traces = []
    if composition is not None:
        xs, ys = [], []
        for s, h, r, g in zip(*np.nonzero(composition >= composition_threshold), strict=True):
            xs += [int(s), int(r), None]
            ys += [int(h), int(g), None]
        traces.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": _("composition (weights)"),
                       "line": {"color": "#999999", "dash": "dash", "width": 1}, "hoverinfo": "skip"})
    shown = set()
    for c, s, h, r, g, share in edges(paths, threshold):
        traces.append({"type": "scatter", "mode": "lines", "x": [s, r], "y": [h, g],
                       "name": _("path into {component}").format(component=c), "legendgroup": c,
                       "showlegend": c not in shown, "customdata": [[c, s, h, r, g]] * 2,
                       "line": {"color": COLOURS[c], "width": max(1.0, WIDEST * min(1.0, abs(share)))},
                       "hovertemplate": f"L{s} H{h} → L{r} H{g} ({c}): {share:.2f}<extra></extra>"})
        shown.add(c)
    drawn = edges(paths, threshold)
    if drawn:  # a marker on each edge: Plotly reports a click on a marker, not on a line
        # q, k and v paths between the same two heads share their line: each marker sits at its own place on it
        at = {c: f for c, f in zip(COLOURS, (0.3, 0.5, 0.7), strict=True)}
        traces.append({"type": "scatter", "mode": "markers", "name": _("edges"), "showlegend": False,
                       "x": [s + at[c] * (r - s) for c, s, _h, r, _g, _v in drawn],
                       "y": [h + at[c] * (g - h) for c, _s, h, _r, g, _v in drawn],
                       "customdata": [[c, s, h, r, g] for c, s, h, r, g, _v in drawn],
                       "marker": {"size": 12, "symbol": "diamond", "color": [COLOURS[e[0]] for e in drawn],
                                  "line": {"width": 1, "color": "#ffffff"}},
                       "hovertemplate": [f"L{s} H{h} → L{r} H{g} ({c}): {v:.2f}<br>" + _("click to open this path")
                                         + "<extra></extra>" for c, s, h, r, g, v in drawn]})
    size = 10 + 30 * np.clip(np.abs(heads), 0, 1)  # (layers, H)
    traces.append({"type": "scatter", "mode": "markers+text", "name": _("heads"),
                   "x": [layer for layer in range(layers) for _h in range(H)],
                   "y": [h for _layer in range(layers) for h in range(H)],
                   "text": [f"L{layer}H{h}" for layer in range(layers) for h in range(H)], "textposition": "top center",
                   "marker": {"size": size.reshape(-1).tolist(), "color": heads.reshape(-1).tolist(),
                              "colorscale": "RdBu", "cmid": 0, "line": {"width": 1, "color": "#333333"}},
                   "customdata": [[layer, h] for layer in range(layers) for h in range(H)],
                   "hovertemplate": "%{text}: " + _("patched alone, brings back") +
                                    " %{marker.color:.2f}<extra></extra>"})
    grow = max(1.0, style.font_size / 12)  # presenter mode's larger text needs as much more room
    layout = {"xaxis": {"title": {"text": _("layer")}, "tickmode": "array", "tickvals": list(range(layers)),
                        "range": [-0.5, layers - 0.5]},
              "yaxis": {"title": {"text": _("head")}, "tickmode": "array", "tickvals": list(range(H)),
                        "range": [H - 0.5, -0.7 - 0.4 * (grow - 1)]},  # the top row's labels stay under the title
              # half as much taller again: a projector's 768 pixels hold the graph under the page's title
              "height": round(max(340, 45 * H + 220) * (1 + (grow - 1) / 2)),
              # at the figure's foot, under the axis title, whatever the plot's height
              "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
              "clickmode": "event+select"}
    return figure(traces, layout_for(layout, style, title, room={"l": 60, "b": round(110 * grow)}))


def clicked_edge(point: dict) -> str | None:
    """The edge a click on ``circuit_figure`` picked, as a link writes it (k:0.1-1.0); None for a click
    elsewhere (a head, the background)."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) != 5 or data[0] not in COLOURS:
        return None
    c, s, h, r, g = data
    return f"{c}:{int(s)}.{int(h)}-{int(r)}.{int(g)}"


def with_cell_clicks(fig: go.Figure, causal: bool = True) -> go.Figure:
    """Near-invisible markers on every cell of a square heat map of weights (on and under the diagonal
    where ``causal``): Plotly does not report a click on a heat map's cell, but on a marker it does,
    with the cell's (query, key) as its customdata."""
    heat = fig.data[0]
    rows, cols = list(heat.y), list(heat.x)
    cells = [(i, j) for i in range(len(rows)) for j in range(len(cols)) if not causal or j <= i]
    fig.add_trace(go.Scatter(x=[cols[j] for _i, j in cells], y=[rows[i] for i, _j in cells], mode="markers",
                             showlegend=False, customdata=[[i, j] for i, j in cells],
                             # hoverinfo "skip" would drop the click too: the hover names the cell instead
                             hovertemplate=_("query %{customdata[0]}, key %{customdata[1]}: click to split its "
                                             "score into parts") + "<extra></extra>",
                             marker={"size": 10, "opacity": 0.01, "color": "#000000"}))
    fig.update_layout(clickmode="event+select")
    return fig


def clicked_cell(point: dict) -> str | None:
    """The cell a click on ``with_cell_clicks``' markers picked, as a link writes it (17.10); None elsewhere."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) != 2:
        return None
    return f"{int(data[0])}.{int(data[1])}"
