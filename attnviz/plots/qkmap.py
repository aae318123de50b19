"""The Q/K map's figures: one head's joint map of queries and keys, and every head of a layer
as small multiples. Both read the plain record of ``attnviz.analysis.qkmap``.

Queries are circles and keys are diamonds. The colour is the token's position, its kind
(word, punctuation, special) or its sentence. Each point's ``customdata`` is its index in
``record["points"]``, so a click names the point. Every token and sentence is escaped
before it reaches Plotly.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.style import (
    PROJECTOR_FIRST_CHART_PX,
    FigureStyle,
    colorscale,
    colour_bar,
    escape_label,
    figure,
    layout_for,
    wrap_title,
)

SYMBOLS = {"query": "circle", "key": "diamond"}
NORM_NAMES = {"mips": "MIPS→NN", "attentionviz": "AttentionViz"}  # the normalisation, named in the title
KIND_COLOURS = {"word": "#4c78a8", "punctuation": "#f58518", "special": "#54a24b"}  # Tableau 10, colour-blind fair


def _kind_names() -> dict[str, str]:
    return {"word": _("word"), "punctuation": _("punctuation"), "special": _("special")}


def _short(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def hover_texts(record: dict) -> list[str]:
    """Per point: kind, token, sentence (number and words) and position, escaped."""
    sentences = record.get("sentences") or []
    names = {"query": _("query"), "key": _("key")}
    out = []
    for p in record["points"]:
        words = sentences[p["sentence"]] if p["sentence"] < len(sentences) else ""
        line = _("{kind} “{token}” · sentence {n} · position {pos}").format(
            kind=names[p["kind"]], token=escape_label(p["token"]), n=p["sentence"] + 1, pos=p["position"])
        out.append(line + ("<br>" + escape_label(_short(words)) if words else ""))
    return out


def agreement_line(record: dict) -> str:
    line = _("agreement {a:.0%} (random placement {b:.0%}; k = {k} nearest keys of the sentence)").format(
        a=record["agreement"], b=record["baseline"], k=record["k"])
    if record.get("warning"):  # the record's own verdict (attnviz.analysis.qkmap.trust_warning)
        line = "⚠ " + line + " · " + _("near or below chance: nearness here does not follow attention")
    return line


def map_figure(record: dict, color: str, style: FigureStyle = FigureStyle(), *, title: str = "") -> go.Figure:
    """One head's map: queries and keys, coloured by ``color`` (position, kind or sentence)."""
    pts, own_title = record["points"], bool(title)
    hover = hover_texts(record)
    traces = []
    names = {"query": _("queries"), "key": _("keys")}
    groups = ([(kind, tk) for kind in SYMBOLS for tk in KIND_COLOURS] if color == "kind"
              else [(kind, None) for kind in SYMBOLS])
    values = np.array([p["position"] if color == "position" else p["sentence"] for p in pts], dtype=np.float64)
    top = float(values.max()) if len(values) else 1.0
    for kind, tk in groups:
        idx = [i for i, p in enumerate(pts) if p["kind"] == kind and (tk is None or p["token_kind"] == tk)]
        if not idx:
            continue
        marker = {"symbol": SYMBOLS[kind], "size": 6 if kind == "query" else 7, "opacity": 0.75,
                  "line": {"width": 0.5 if kind == "key" else 0, "color": "#333"}}
        if tk is not None:
            marker["color"] = KIND_COLOURS[tk]
            name = f"{names[kind]} · {_kind_names()[tk]}"
        else:
            marker.update(color=values[idx], colorscale=colorscale(style.colors), cmin=0.0, cmax=max(top, 1.0),
                          showscale=kind == "query",
                          colorbar=colour_bar(_("position") if color == "position" else _("sentence"), thickness=12))
            name = names[kind]
        traces.append({"type": "scatter", "mode": "markers", "name": name, "x": np.array([pts[i]["x"] for i in idx]),
                       "y": np.array([pts[i]["y"] for i in idx]), "customdata": np.array(idx, dtype=np.int32),
                       "text": [hover[i] for i in idx], "hovertemplate": "%{text}<extra></extra>",
                       "marker": marker})
    head = record.get("head")
    norm = NORM_NAMES.get((record.get("normalisation") or {}).get("name"), "")
    method = record["method"].upper().replace("TSNE", "t-SNE") + (f" · {norm}" if norm else "")
    title = title or (_("layer {layer}, head {head}: queries (●) and keys (◆), {method}").format(
        layer=record.get("layer", 0), head=head, method=method)
        if head is not None else _("queries (●) and keys (◆), {method}").format(method=method))
    layout = {"height": 640, "xaxis": {"showticklabels": False, "zeroline": False, "title": {"text": ""}},
              "yaxis": {"showticklabels": False, "zeroline": False, "scaleanchor": "x"},
              "legend": {"orientation": "h", "y": -0.04}, "hovermode": "closest", "clickmode": "event+select",
              "annotations": [{"text": wrap_title(agreement_line(record), style.font_size), "xref": "paper",
                               "yref": "paper", "x": 0, "y": 1.02, "showarrow": False, "xanchor": "left",
                               "align": "left", "yanchor": "bottom"}]}
    if style.presenting and head is not None and not style.height and not own_title:
        # On a projector the title is one line, the head and its agreement against the baseline (the method is in
        # the page's row above, the queries' and keys' marks in the legend): the map whole on the first screen (its
        # two title lines and two-line note left it a strip at 460 px).
        title = ("⚠ " if record.get("warning") else "") + _("L{layer} H{head}: agreement {a:.0%} (random placement "
                                                             "{b:.0%})").format(layer=record.get("layer", 0), head=head,
                                                                                a=record["agreement"],
                                                                                b=record["baseline"])
        layout.update(height=PROJECTOR_FIRST_CHART_PX + 60, annotations=[])
        return figure(traces, layout_for(layout, style, title, room={"b": 40}))
    agreement = layout["annotations"][0]["text"]  # already wrapped: the room above the plot holds its lines
    return figure(traces, layout_for(layout, style, title, room={"b": 40}, note_lines=agreement.count("<br>") + 1))


def overview_figure(records: list[dict], style: FigureStyle = FigureStyle(), *, layer: int = 0) -> go.Figure:
    """Every head's map in one pair of axes: head h in cell h of a grid, each scaled to its
    cell, titled with its agreement and baseline."""
    H = len(records)
    cols = min(H, 4) if H <= 8 else min(H, 6)
    rows = math.ceil(H / cols)
    xs = {"query": [], "key": []}
    ys = {"query": [], "key": []}
    texts = {"query": [], "key": []}
    notes = []
    for h, rec in enumerate(records):
        r, c = divmod(h, cols)
        pts = rec["points"]
        x = np.array([p["x"] for p in pts])
        y = np.array([p["y"] for p in pts])
        span = max(float(x.max() - x.min()), float(y.max() - y.min()), 1e-12) if len(pts) else 1.0
        cx, cy = (x.max() + x.min()) / 2 if len(pts) else 0, (y.max() + y.min()) / 2 if len(pts) else 0
        for p, px, py in zip(pts, (x - cx) / span * 0.85 + c, (y - cy) / span * 0.85 - r, strict=True):
            xs[p["kind"]].append(float(px))
            ys[p["kind"]].append(float(py))
            texts[p["kind"]].append(_("head {h} · {kind} “{token}”").format(
                h=h, kind=_("query") if p["kind"] == "query" else _("key"), token=escape_label(p["token"])))
        label = _("head {h}: {a:.0%} (random {b:.0%})").format(h=h, a=rec["agreement"], b=rec["baseline"])
        if rec.get("warning"):  # not above its baseline by the record's margin: the page says so in words
            label = "⚠ " + label
        notes.append({"text": label.replace(": ", ":<br>", 1),  # two lines: six cells fit side by side
                      "x": c, "y": -r + 0.44, "xref": "x", "yref": "y", "showarrow": False, "yanchor": "bottom",
                      "font": {"size": style.font_size}})
    colours = {"query": "#4c78a8", "key": "#e45756"}
    traces = [{"type": "scatter", "mode": "markers", "name": _("queries") if kind == "query" else _("keys"),
               "x": np.array(xs[kind]), "y": np.array(ys[kind]), "text": texts[kind],
               "hovertemplate": "%{text}<extra></extra>",
               "marker": {"symbol": SYMBOLS[kind], "size": 4, "color": colours[kind], "opacity": 0.6}}
              for kind in SYMBOLS]
    layout = {"height": 80 + 240 * rows, "showlegend": True, "legend": {"orientation": "h", "y": -0.02},
              "xaxis": {"visible": False, "range": [-0.55, cols - 0.45]},
              "yaxis": {"visible": False, "range": [-rows + 0.45, 0.72]},
              "annotations": notes, "hovermode": "closest"}
    k = records[0]["k"] if records else 3
    title = _("layer {layer}: every head's queries and keys (PCA); agreement at k = {k}").format(layer=layer, k=k)
    return figure(traces, layout_for(layout, style, title, room={"b": 30}))
