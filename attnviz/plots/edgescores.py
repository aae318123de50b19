"""The whole model's graph scored by edge attribution (``attnviz.analysis.eap``): every node (the
input, each head by layer and head, each layer's MLP, the logits), the ``top`` edges by |score| as
lines coloured by the input they reach (a head's q, k or v, an MLP, the logits), as wide as their
share of the largest, solid where the score is positive and dotted where it is negative (the legend
says which); a diamond on
each edge reports a click (its name, as EAP-IG writes it)."""

from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import N_, _
from attnviz.plots.circuit import COLOURS as HEAD_COLOURS
from attnviz.plots.circuit import WIDEST
from attnviz.plots.style import FigureStyle, figure, layout_for

COLOURS = {**HEAD_COLOURS, "mlp": "#9467bd", "logits": "#7f7f7f"}  # by the input an edge reaches
NODE = re.compile(r"^(input|logits|m(\d+)|a(\d+)\.h(\d+))(?:<([qkv])>)?$")
ALONG = {"q": 0.3, "k": 0.5, "v": 0.7, "mlp": 0.5, "logits": 0.5}  # where on its line an edge's diamond sits
LABELLED_HEADS = 64  # more heads than this: their names in the hover only (GPT-2 small has 144)
DIAMOND_PX = 11  # a diamond's size; no two closer than this and a gap, none on a node's label or circle
PLOT_WIDE_PX = 860 - 60 - 40  # the plot's width at a full-width chart (a 1366 px laptop beside the sidebar)
# A head row's height at least (px, font sizes): with its nodes' labels above them, or without.
ROW_LEAST = {True: (60, 3.4), False: (30, 1.4)}
PLOT_MOST_PX = {False: 620, True: 430}  # the plot's height at most: a laptop's screen, a projector's under its title
# Fractions along an edge where its diamond may sit, the middle first, then outwards.
TRIES = tuple(sorted((round(0.15 + 0.025 * i, 3) for i in range(29)), key=lambda t: (abs(t - 0.5), t)))


METHOD_NAMES = {"eap": N_("EAP"), "eap-ig-inputs": N_("EAP-IG on the inputs"),
                "eap-ig-activations": N_("EAP-IG on the activations")}


def graph_title(model: str, method: str, steps: int | None, top: int, total: int) -> str:
    """The graph's one title (the Circuit page, the CLI and ``circuit_view(method=...)``)."""
    how = _(METHOD_NAMES[method]) + ("" if steps is None else _(", {n} steps").format(n=steps))
    # In lines short enough for half a laptop's page, where the faithfulness curve sits beside it
    return _("{model}: the {n} edges of largest |score|<br>of {total}, by {method}").format(
        model=model, n=min(top, total), total=total, method=how)


def node_place(node: str, layers: int, heads: int) -> tuple[float, float]:
    """(x, y) of a node: heads at (layer, head), a layer's MLP half a layer on, under the middle head
    row, the input before layer 0 and the logits after the last layer, both at the middle."""
    m = NODE.match(node)
    if m is None:
        raise ValueError(f"“{node}” is not a node of the graph.")
    mid = (heads - 1) / 2
    if m.group(1) == "input":
        return -0.8, mid
    if m.group(1) == "logits":
        return layers - 0.2, mid
    if m.group(2) is not None:
        return int(m.group(2)) + 0.45, heads - 0.2
    return int(m.group(3)), int(m.group(4))


def edge_kind(name: str) -> str:
    """"q", "k", "v", "mlp" or "logits": the input an edge ``sender->receiver`` reaches."""
    receiver = name.split("->")[1]
    if receiver == "logits":
        return "logits"
    if receiver.startswith("m"):
        return "mlp"
    return receiver[-2]


def edge_graph_figure(top: list[tuple[str, float]], layers: int, heads: int, mlp: bool, title: str,
                      style: FigureStyle = FigureStyle(), picked: str | None = None) -> go.Figure:
    """``top``: (edge name, signed score) pairs, drawn in the order given; ``picked``: an edge drawn
    thicker and outlined."""
    traces, shown = [], set()
    big = max((abs(s) for _n, s in top), default=0.0) or 1.0
    marks = []
    for name, score in top:
        sender, receiver = name.split("->")
        (x0, y0), (x1, y1) = node_place(sender, layers, heads), node_place(receiver, layers, heads)
        kind = edge_kind(name)
        width = max(1.0, WIDEST * abs(score) / big) + (3 if name == picked else 0)
        legend = {"q": _("into queries"), "k": _("into keys"), "v": _("into values"), "mlp": _("into an MLP"),
                  "logits": _("into the logits")}[kind]
        traces.append({"type": "scatter", "mode": "lines", "x": [x0, x1], "y": [y0, y1], "name": legend,
                       "legendgroup": kind, "showlegend": kind not in shown, "hoverinfo": "skip",
                       "line": {"color": COLOURS[kind], "width": width, "dash": "solid" if score >= 0 else "dot"}})
        shown.add(kind)
        marks.append(((x0, y0), (x1, y1), name, score, kind))
    for sign, dash in ((_("positive score"), "solid"), (_("negative score"), "dot")):  # the legend says the dashes
        if any((s >= 0) == (dash == "solid") for _n, s in top):
            traces.append({"type": "scatter", "mode": "lines", "x": [None], "y": [None], "name": sign,
                           "hoverinfo": "skip", "line": {"color": "#555555", "width": 2, "dash": dash}})
    labelled = layers * heads <= LABELLED_HEADS
    span = (heads + 0.3 if mlp else heads - 0.5) + 0.7 + 0.4 * (max(1.0, style.font_size / 12) - 1)  # y units
    plot = plot_height(heads, span, labelled, style)
    scale = (PLOT_WIDE_PX / (layers + 1.3), plot / span)  # px per x unit, per y unit
    marks = place_diamonds(marks, layers, heads, mlp, labelled, scale, style.font_size)
    if marks:  # Plotly reports a click on a marker, not on a line
        traces.append({"type": "scatter", "mode": "markers", "name": _("edges"), "showlegend": False,
                       "x": [m[0] for m in marks], "y": [m[1] for m in marks], "customdata": [[m[2]] for m in marks],
                       "marker": {"size": [16 if m[2] == picked else 11 for m in marks], "symbol": "diamond",
                                  "color": [COLOURS[m[4]] for m in marks],
                                  "line": {"width": [3 if m[2] == picked else 1 for m in marks],
                                           "color": ["#000000" if m[2] == picked else "#ffffff" for m in marks]}},
                       "hovertemplate": [f"{m[2]}: {m[3]:+.4g}<br>" + _("click for its exact effect") +
                                         "<extra></extra>" for m in marks]})
    nodes = ["input"] + [f"a{layer}.h{h}" for layer in range(layers) for h in range(heads)]
    nodes += [f"m{layer}" for layer in range(layers)] if mlp else []
    nodes += ["logits"]
    xy = np.array([node_place(n, layers, heads) for n in nodes])  # (nodes, 2)
    traces.append({"type": "scatter", "mode": "markers+text" if labelled else "markers", "name": _("nodes"),
                   "showlegend": False, "x": xy[:, 0].tolist(), "y": xy[:, 1].tolist(),
                   "text": [n.replace(".", "") if labelled or not n.startswith("a") else "" for n in nodes],
                   "textposition": "top center", "hovertemplate": "%{customdata[0]}<extra></extra>",
                   "customdata": [[n] for n in nodes],
                   "marker": {"size": [14 if not n.startswith("a") else 9 for n in nodes],
                              "symbol": ["square" if n.startswith("m") else "circle" for n in nodes],
                              "color": "#dddddd", "line": {"width": 1, "color": "#333333"}}})
    grow = max(1.0, style.font_size / 12)  # presenter mode's larger text needs as much more room
    layout = {"xaxis": {"title": {"text": _("layer")}, "tickmode": "array", "tickvals": list(range(layers)),
                        "range": [-1.2, layers + 0.1], "zeroline": False},
              "yaxis": {"title": {"text": _("head")}, "tickmode": "array", "tickvals": list(range(heads)),
                        "range": [heads + 0.3 if mlp else heads - 0.5, -0.7 - 0.4 * (grow - 1)], "zeroline": False},
              "clickmode": "event+select"}
    if style.presenting:  # beside the plot, in a column: under it, in rows, it took a projector's height
        layout["legend"] = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                            "font": {"size": round(0.75 * style.font_size)}}  # its six entries within the plot's height
        room = {"l": 60, "b": round(3.4 * style.font_size), "r": round(8.5 * style.font_size)}
    else:  # at the figure's foot, under the axis title, whatever the plot's height
        layout["legend"] = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"}
        room = {"l": 60, "b": 110}
    layout = layout_for(layout, style, title, room=room)
    if style.height is None:  # the margins the title and legend take, and the plot's rows beside them
        layout["height"] = round(layout["margin"]["t"] + layout["margin"]["b"] + plot)
    return figure(traces, layout)


def plot_height(heads: int, span: float, labelled: bool, style: FigureStyle) -> float:
    """The plot's height: each head row ``ROW_LEAST`` tall (a labelled node's name above it with room to spare for
    the diamonds between), within ``PLOT_MOST_PX``; at least 120 px."""
    px, fonts = ROW_LEAST[labelled]
    row = max(px, fonts * style.font_size)
    return max(120.0, min(PLOT_MOST_PX[style.presenting], span * row))


def _nodes(layers: int, heads: int, mlp: bool) -> list[str]:
    names = ["input", *(f"a{layer}.h{h}" for layer in range(layers) for h in range(heads))]
    return names + ([f"m{layer}" for layer in range(layers)] if mlp else []) + ["logits"]


def place_diamonds(marks: list, layers: int, heads: int, mlp: bool, labelled: bool, scale: tuple[float, float],
                   font: int) -> list[tuple]:
    """Each edge's diamond (x, y, name, score, kind), in ``marks``' order: at the first of ``TRIES`` along its line
    where it is at least a diamond and a gap from every diamond placed before it and off every node's circle and
    label (in pixels, at ``scale``: px per x and y unit); where no place is free, the one farthest from them."""
    sx, sy = scale
    keep_off = []  # (x, y, half width, half height) in px: each node's circle, and its label above it
    for node in _nodes(layers, heads, mlp):
        x, y = node_place(node, layers, heads)
        keep_off.append((x * sx, y * sy, 7.0, 7.0))
        if labelled:
            keep_off.append((x * sx, y * sy - 6 - font / 2, 0.32 * font * len(node.replace(".", "")) + 2, font / 2 + 2))
    placed: list[tuple[float, float]] = []
    out = []
    for (x0, y0), (x1, y1), name, score, kind in marks:
        best, room = None, -np.inf
        for t in (ALONG[kind], *TRIES):
            px, py = (x0 + t * (x1 - x0)) * sx, (y0 + t * (y1 - y0)) * sy
            gaps = [np.hypot(px - qx, py - qy) - (DIAMOND_PX + 2) for qx, qy in placed]
            gaps += [max(abs(px - bx) - w, abs(py - by) - h) - DIAMOND_PX / 2 for bx, by, w, h in keep_off]
            free = min(gaps, default=np.inf)
            if free > room:
                best, room = (px, py), free
            if free >= 0:
                break
        placed.append(best)
        out.append((best[0] / sx, best[1] / sy, name, score, kind))
    return out


def clicked_edge_name(point: dict) -> str | None:
    """The edge name a click on ``edge_graph_figure`` picked; None for a click on a node or elsewhere."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) != 1 or "->" not in str(data[0]):
        return None
    return str(data[0])
