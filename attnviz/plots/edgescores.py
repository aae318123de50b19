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
        at = ALONG[kind]  # q, k and v edges between the same two nodes share their line: each diamond its own place
        marks.append((x0 + at * (x1 - x0), y0 + at * (y1 - y0), name, score, kind))
    for sign, dash in ((_("positive score"), "solid"), (_("negative score"), "dot")):  # the legend says the dashes
        if any((s >= 0) == (dash == "solid") for _n, s in top):
            traces.append({"type": "scatter", "mode": "lines", "x": [None], "y": [None], "name": sign,
                           "hoverinfo": "skip", "line": {"color": "#555555", "width": 2, "dash": dash}})
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
    labelled = layers * heads <= LABELLED_HEADS
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
    if style.height is None:  # the margins the title and legend take, and a plot of a row per head beside them
        plot = min(420 * grow, max(120 * grow, 34 * grow * (heads + 1.5)))
        layout["height"] = round(layout["margin"]["t"] + layout["margin"]["b"] + plot)
    return figure(traces, layout)


def clicked_edge_name(point: dict) -> str | None:
    """The edge name a click on ``edge_graph_figure`` picked; None for a click on a node or elsewhere."""
    data = point.get("customdata")
    if not isinstance(data, (list, tuple)) or len(data) != 1 or "->" not in str(data[0]):
        return None
    return str(data[0])
