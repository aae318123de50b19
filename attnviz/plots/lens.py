"""The logit lens's pictures (``attnviz.analysis.lens``): the grid of points × positions, each cell the
top token in words coloured by its probability, the entropy or the KL to the model's own distribution;
the answer's probability and rank through the points at one position; one step's parts as bars.

The builders read a ``LensResult`` (and a ``LensStep``) by their fields: this floor imports no analysis.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import N_, _
from attnviz.plots import margins
from attnviz.plots.style import (
    FigureStyle,
    axis_labels,
    colorscale,
    colour_bar,
    escape_label,
    figure,
    layout_for,
    title_line_px,
    wrap_title,
)
from attnviz.plots.ticks import every_fitting, every_tick, labelled

COLOURS = ("probability", "entropy", "kl")
# What a cell's colour is, in the grid's title; the colour bar's own title is short (a projector's right margin).
COLOUR_WORDS = {"probability": N_("its probability"), "entropy": N_("the prediction's entropy"),
                "kl": N_("the KL from the model's own")}
COLOUR_UNITS = {"probability": N_("p"), "entropy": N_("nats"), "kl": N_("nats")}
FIGURE_PX = 860  # a full-width chart's width at a 1366 px laptop (beside the sidebar) and a 1024 px projector
ROW_PX = 22  # a grid row on a laptop: 25 points (12 layers and their middles) in one screen
MIN_PLOT_PX = 160
PRESENTER_CAP_PX = 680  # attnviz.plots.style.PROJECTOR_CHART_PX: the grid whole on a 1024 × 768 projector
CELL_CHARS = 6  # a cell's token is cut to at most this many characters (its hover spells it whole)
READABLE_EM = 2.6  # a narrow column's text shrinks (to MIN_CELL_FONT at most) to hold this much: 4 letters
MIN_CELL_FONT = 9  # smaller than this, a cell shows its colour only
CELL_PAD_EM = 0.3  # a cell's room on either side of its text, in em of its font
STEP_COLOUR, PART_COLOURS = "#264653", {"head": "#2a9d8f", "attention biases": "#8d99ae", "mlp": "#e9c46a",
                                        "embeddings": "#8d99ae", "biases": "#8d99ae"}


def point_label(name: str) -> str:
    """A point's row label: "embed", "L3 mid" (after layer 3's attention), "L3 end"."""
    if name == "embeddings":
        return _("embed")
    _layer_word, layer, where = name.split()
    return (_("L{layer} mid") if where == "middle" else _("L{layer} end")).format(layer=layer)


def cell_text(token: str, room_em: float | None = None) -> str:
    """A token as a cell shows it: a word's leading space (GPT-2's Ġ, SentencePiece's ▁) as ·, a newline as ↵,
    at most ``CELL_CHARS`` characters and ``room_em`` wide (a cut one ends in …; "" where nothing fits)."""
    shown = token.replace("Ġ", "·").replace("▁", "·").replace("Ċ", "↵").replace("\n", "↵")
    for k in range(min(len(shown), CELL_CHARS), 0, -1):
        cut = shown if k == len(shown) else shown[:k - 1] + "…" if k > 1 else ""
        if cut and (room_em is None or margins.text_em(cut.replace("·", ".")) <= room_em):  # · is as narrow as .
            return cut
    return ""


def grid_values(r, colour: str) -> np.ndarray:
    """(points, positions): what the grid's colour shows."""
    if colour not in COLOURS:
        raise ValueError(f"colour must be one of {', '.join(COLOURS)}; got {colour!r}.")
    return {"probability": lambda: r.top_probs[:, :, 0], "entropy": lambda: r.entropy, "kl": lambda: r.kl}[colour]()


def position_labels(r) -> list[str]:
    return axis_labels([f"{p}: {r.tokens[p]}" for p in r.positions])


def _grid_plan(rows: int, x: list[str], y: list[str], style: FigureStyle, bar: str, hi: float, title: str,
               widest: float) -> dict:
    """The grid's room: its margins, its labels' fonts and angle, its height and each cell's font. On a projector
    the grid stays within one screen (``PRESENTER_CAP_PX``), its rows and columns labelled each at the size that
    fits them, the axis titles left out (the labels say what they are)."""
    fs, presenting = style.font_size, style.presenting
    top = 60 + fs + title.count("<br>") * title_line_px(fs)
    right = margins.colorbar(bar, fs, 0.0, hi)
    yfs = fs
    for _pass in range(2):  # the rows' font sets the left margin, which sets the columns' width: twice settles it
        left = margins.left(y, yfs, title=not presenting)
        width = FIGURE_PX - left - right
        col_px = max(1.0, width / max(1, len(x)))
        xfs = max(MIN_CELL_FONT, min(fs, math.floor(col_px / 1.4)))  # upright, one label per column where it fits
        angle = 0 if len(x) * (margins.labels_em(x) + 1) * xfs <= width else 90
        bottom = margins.bottom(x, xfs, angle=angle) + (0 if presenting else fs + 15)
        plot = max(MIN_PLOT_PX, rows * (round(1.9 * fs) if presenting else ROW_PX))
        height = min(top + bottom + plot, PRESENTER_CAP_PX) if presenting else top + bottom + plot
        row_px = (height - top - bottom) / rows
        yfs = max(MIN_CELL_FONT, min(fs, math.floor(0.85 * row_px)))
    # A cell's text: its whole token at the rows' font where the column holds it; else as large as holds
    # READABLE_EM of it (no smaller than MIN_CELL_FONT), each token cut to what the column holds at that font.
    font = min(fs, math.floor(0.62 * row_px))
    if (widest + CELL_PAD_EM) * font > col_px:
        font = max(MIN_CELL_FONT, min(font, math.floor(col_px / (READABLE_EM + CELL_PAD_EM))))
    room_em = col_px / font - CELL_PAD_EM
    # A row shorter than the smallest readable text shows its colour only (61 rows of SmolLM2 on a projector: 6 px
    # each), and its labels are thinned to one row in k, so that none covers another.
    fits = room_em >= 1.2 and math.floor(0.62 * row_px) >= MIN_CELL_FONT  # two narrow characters, or one and …
    rows_every = max(1, math.ceil(yfs / (0.85 * row_px)))
    return {"room": {"l": left, "r": right, "b": bottom}, "xfs": xfs, "yfs": yfs, "angle": angle, "height": height,
            "font": font if fits else 0, "room_em": room_em, "every": every_fitting(x, xfs, width),
            "rows_every": rows_every}


def lens_grid(r, colour: str, style: FigureStyle = FigureStyle(), cell: tuple[int, int] | None = None) -> go.Figure:
    """Points (rows, the embeddings at the top) × positions: each cell the top token in words, coloured by
    ``colour`` ("probability", "entropy", "kl"); ``cell`` (row, column) outlined. A click on a cell reports it
    (customdata row · columns + column)."""
    values = grid_values(r, colour)
    P, n = values.shape
    x, y = position_labels(r), axis_labels([point_label(p) for p in r.points])
    hi = 1.0 if colour == "probability" else max(1e-6, float(np.nanmax(values)))
    bar = _(COLOUR_UNITS[colour])
    title = _("{model}: the top token at each point, coloured by {what}").format(
        model=escape_label(r.model), what=_(COLOUR_WORDS[colour]))
    if r.mode != "final-scale":
        title += "<br>" + (_("a tuned lens") if r.mode == "tuned" else _("the final norm recomputed at every point"))
    widest = max(margins.text_em(cell_text(t[0]).replace("·", ".")) for row in r.top_tokens for t in row)
    title = wrap_title(title, style.font_size)  # wrapped here, so that the plan counts its lines
    plan = _grid_plan(P, x, y, style, bar, hi, title, widest)
    if plan["every"] > 1 or plan["rows_every"] > 1:  # one position (or row) in k labelled: said in the title
        title = labelled(title, x, y, words=("position", "row"), every=(plan["every"], plan["rows_every"]))
        plan = _grid_plan(P, x, y, style, bar, hi, title, widest)
    hover = [[escape_label(f"{r.points[i]} · {r.positions[j]}: {r.tokens[r.positions[j]]} → ") +
              ", ".join(f"{escape_label(t)} {p:.2f}" for t, p in zip(r.top_tokens[i][j][:3], r.top_probs[i, j, :3],
                                                                     strict=False)) +
              f"<br>{_('entropy')} {r.entropy[i, j]:.2f} · KL {r.kl[i, j]:.3f}" for j in range(n)] for i in range(P)]
    heat = {"type": "heatmap", "z": values.astype(np.float32), "x": x, "y": y, "zmin": 0.0, "zmax": hi,
            "colorscale": colorscale(style.colors), "colorbar": colour_bar(bar), "hoverinfo": "skip",
            "xgap": 1, "ygap": 1}
    if plan["font"]:
        heat.update(text=[[escape_label(cell_text(t[0], plan["room_em"])) for t in row] for row in r.top_tokens],
                    texttemplate="%{text}",
                    textfont={"size": plan["font"]})
    # Heatmaps cannot be selected in Plotly; a near-invisible marker at each cell's centre can (patching's way).
    clicks = {"type": "scatter", "mode": "markers", "showlegend": False,
              "x": [x[c] for _r in range(P) for c in range(n)], "y": [y[r_] for r_ in range(P) for _c in range(n)],
              "customdata": list(range(P * n)), "text": [h for row in hover for h in row],
              "marker": {"size": max(6, min(24, plan["font"] * 2 or 12)), "opacity": 0.01, "color": "#000000"},
              "hovertemplate": "%{text}<br>" + _("click to open its step") + "<extra></extra>"}
    presenting = style.presenting
    layout = {"xaxis": {"type": "category", **every_tick(x, "" if presenting else _("position: token"),
                                                         plan["every"]),
                        "tickangle": -plan["angle"], "tickfont": {"size": plan["xfs"]}},
              "yaxis": {"type": "category", "range": [P - 0.5, -0.5], **every_tick(y, "", plan["rows_every"]),
                        "tickfont": {"size": plan["yfs"]},
                        **({} if presenting else {"title": {"text": _("point of the residual stream")}})},
              "clickmode": "event+select", "height": plan["height"]}
    if cell is not None:
        row, col = cell
        layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "y", "x0": col - 0.5, "x1": col + 0.5,
                             "y0": row - 0.5, "y1": row + 0.5, "line": {"color": "#d62728", "width": 3}}]
    return figure([heat, clicks], layout_for(layout, style, title, room=plan["room"]))


def clicked_grid_cell(point: dict, columns: int) -> tuple[int, int] | None:
    """(row, column) of a click on the grid's marker (its customdata), or None for a click elsewhere."""
    data = point.get("customdata")
    if isinstance(data, list):
        data = data[0] if data else None
    if not isinstance(data, (int, float)) or isinstance(data, bool) or columns < 1:
        return None
    return divmod(int(data), columns)


def answer_lines(r, position: int, style: FigureStyle = FigureStyle(), point: int | None = None) -> go.Figure:
    """The answer's probability (left axis) and rank (right axis, log, the top token at the top) at every point
    at ``position`` (an index of ``r.positions``); ``point``: a row marked."""
    if r.answer_prob is None:
        raise ValueError("The lens was read without an answer: give answer= to draw its rank and probability.")
    x = axis_labels([point_label(p) for p in r.points])
    prob, rank = r.answer_prob[:, position].astype(np.float64), r.answer_rank[:, position].astype(np.float64)
    fs = style.font_size
    blue, red = "#1f77b4", "#d62728"
    traces = [{"type": "scatter", "mode": "lines+markers", "x": x, "y": prob, "name": _("probability"),
               "line": {"color": blue}, "hovertemplate": "%{x}: p = %{y:.3f}<extra></extra>"},
              {"type": "scatter", "mode": "lines+markers", "x": x, "y": rank + 1, "customdata": rank, "yaxis": "y2",
               "name": _("rank"), "line": {"color": red, "dash": "dash"},
               "hovertemplate": "%{x}: " + _("rank") + " %{customdata:d}<extra></extra>"}]
    top = math.log10(max(2.0, float(rank.max()) + 1))
    angle = 0 if len(x) * (margins.labels_em(x) + 1) * fs <= FIGURE_PX - 200 else 90
    layout = {"showlegend": False, "height": 560 if style.presenting else 340,
              "xaxis": {"type": "category", "title": {"text": _("point of the residual stream")},
                        "tickangle": -angle},
              "yaxis": {"title": {"text": _("probability"), "font": {"color": blue}}, "range": [0, 1.02],
                        "tickfont": {"color": blue}},
              "yaxis2": {"title": {"text": _("rank (0: the top)"), "font": {"color": red}},
                         "type": "log", "overlaying": "y", "side": "right", "range": [top + 0.1, -0.05],
                         "tickvals": [1, *(10 ** k + 1 for k in range(1, int(top) + 1))],  # rank + 1, drawn
                         "ticktext": ["0", *(f"{10 ** k:g}" for k in range(1, int(top) + 1))],
                         "tickfont": {"color": red},
                         "showgrid": False}}
    if point is not None:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": point, "x1": point, "y0": 0,
                             "y1": 1, "line": {"dash": "dot", "color": "#555555"}}]
    at = r.positions[position]
    title = _("“{answer}”{wrong} at position {position} (“{token}”), point by point").format(
        answer=escape_label(r.answer), position=at, token=escape_label(r.tokens[at]),
        wrong=_(" (against “{wrong}”)").format(wrong=escape_label(r.wrong)) if r.wrong else "")
    room = {"l": margins.left(["0.8"], fs, title=True), "r": margins.left(["9999"], fs, title=True),
            "b": margins.bottom(x, fs, angle=angle, title=True)}
    return figure(traces, layout_for(layout, style, title, room=room))


def part_label(kind: str, layer: int | None, head: int | None) -> str:
    if kind == "head":
        return f"L{layer} H{head}"
    return {"attention biases": _("L{layer} attention biases"), "mlp": _("L{layer} MLP"),
            "embeddings": _("embeddings"), "biases": _("final biases")}[kind].format(layer=layer)


def step_bars(step, style: FigureStyle = FigureStyle()) -> go.Figure:
    """One bar per part added between two points (each head, the attention biases, the MLP), then the step
    itself, their sum, in logits toward the answer: across, one part a row, so that every name reads level."""
    names = axis_labels([part_label(k, layer, h) for k, layer, h, _v in step.parts] + [_("the step")])
    values = [v for *_kind, v in step.parts]
    colours = [PART_COLOURS[k] for k, *_rest in step.parts]
    trace = {"type": "bar", "orientation": "h", "y": names, "x": np.asarray([*values, step.step], dtype=np.float64),
             "marker": {"color": [*colours, STEP_COLOUR]}, "hovertemplate": "%{y}: %{x:+.4f}<extra></extra>"}
    fs = style.font_size
    into = point_label(step.point)
    if step.previous is None:
        title = _("{point} at position {position} (“{token}”): the embeddings and the final biases make "
                  "{step:+.3f}").format(point=into, position=step.position, token=escape_label(step.token),
                                        step=step.step)
    else:
        title = _("{before} → {point} at position {position} (“{token}”): {step:+.3f}, the sum of these "
                  "parts").format(before=point_label(step.previous), point=into, position=step.position,
                                  token=escape_label(step.token), step=step.step)
    title = wrap_title(title, fs)
    bottom = margins.bottom(["−0.0"], fs, title=True)
    top = 60 + fs + title.count("<br>") * title_line_px(fs)
    layout = {"showlegend": False, "height": top + bottom + max(MIN_PLOT_PX, len(names) * round(2.2 * fs)),
              "yaxis": {"type": "category", "range": [len(names) - 0.5, -0.5], **every_tick(names, "", 1)},
              "xaxis": {"title": {"text": _("logits toward the answer")}, "zeroline": True}}
    room = {"l": margins.left(names, fs), "b": bottom}
    return figure([trace], layout_for(layout, style, title, room=room))
