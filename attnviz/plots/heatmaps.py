"""Heatmaps of weights: one head, every head as one grid trace, a query's focus, the
output vectors, the mask, and any labelled matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots import margins
from attnviz.plots.data import HeatmapData, mask_data, output_data, query_data
from attnviz.plots.style import (
    DIVERGING,
    PROJECTOR_CHART_PX,
    FigureStyle,
    axis_labels,
    colorscale,
    colour_bar,
    figure,
    invisible_suffix,
    layout_for,
    plain_label,
    presenting,
    rows_down,
    title_line_px,
    wrap_title,
)
from attnviz.plots.ticks import every_fitting
from attnviz.plots.ticks import every_tick as _every_tick
from attnviz.plots.ticks import labelled as _labelled
from attnviz.run.result import AttentionResult


def heatmap_trace(d: HeatmapData, style: FigureStyle, *, shared: bool, diverging: bool = False) -> dict:
    value = d.value_name or _("weight")
    hover = (f"{_('query')}: %{{y}}<br>{_('key')}: %{{x}}<br>{value}: %{{z:.4f}}<extra></extra>"
             if not diverging else
             f"{_('token')}: %{{y}}<br>{_('dimension')}: %{{x}}<br>{value}: %{{z:.4f}}<extra></extra>")
    trace = {"type": "heatmap", "z": d.z, "x": d.x, "y": d.y, "hovertemplate": hover}
    if shared:
        trace["coloraxis"] = "coloraxis"
    else:
        trace.update(colorscale=colorscale(DIVERGING if diverging else style.colors), zmin=d.zmin, zmax=d.zmax)
        if diverging:
            trace["zmid"] = 0
    return trace


def heatmap_figure(d: HeatmapData, style: FigureStyle = FigureStyle(), *,
                   diverging: bool = False) -> go.Figure:
    """One matrix, a row per query (or token), the keys on top. Its height gives each row a readable label
    (at most a projector's screen, or 900 px); where they do not all fit, one in k is labelled, said in the
    title (``ticks.labelled``)."""
    fs = style.font_size
    height = style.height or min(PROJECTOR_CHART_PX if presenting(fs) else 900, max(450, matrix_height(len(d.y), fs)))
    words = ("key", "token" if diverging else "query")
    top = margins.top(d.x, fs, wrap_title(d.title + "<br>" + words[0], fs)) if not diverging else 60 + fs
    every = (None if diverging else every_fitting(d.x, fs, FULL_WIDTH_PLOT_PX),
             every_fitting(d.y, fs, height - top - margins.bottom((), fs, title=True)))
    layout = {
        "height": height,
        "yaxis": {**rows_down(len(d.y)), "type": "category", **_every_tick(d.y, _(words[1]), every[1])},
        "xaxis": {"type": "category" if not diverging else "linear",
                  **(_every_tick(d.x, _("key"), every[0]) if not diverging else {"title": {"text": _("dimension")}}),
                  "side": "top" if not diverging else "bottom",
                  # upright on top: a slanted label Plotly picks itself runs into the axis title above it
                  **({"tickangle": -90} if not diverging else {})},
    }
    title = _labelled(d.title, None if diverging else d.x, d.y, words=words, every=every)
    room = {"l": margins.left(d.y, fs, title=True), "r": margins.colorbar("", fs, d.zmin, d.zmax),
            "b": margins.bottom((), fs, title=True) if diverging else fs + 4,  # the last row label's descent
            **({} if diverging else {"t": margins.top(d.x, fs, wrap_title(title, fs))})}
    return figure([heatmap_trace(d, style, shared=False, diverging=diverging)],
                  layout_for(layout, style, title, top_axis=not diverging, room=room))


FULL_WIDTH_PLOT_PX = 800  # a full-width chart's plot on a laptop or a projector, its margins taken


# Every token labelled (the first screen's promise): the grid's tick labels are drawn at TICK_PX,
# each taking LABEL_PITCH_PX along its axis, so a layout fits as many labels across as the plot's
# width holds at that pitch. PLOT_PX: the plot's drawable width (between the query labels and
# the colour bar) on a 1366 px laptop with the sidebar open, and on a 1024 px projector in
# presenter mode with the sidebar closed (measured in Chromium; tests/app/test_browser_first_screen.py).
TICK_PX = 10
LABEL_PITCH_PX = 13
PLOT_PX = {False: 720, True: 760}
# The most pixels one row of blocks takes: a row of heads stays on a laptop's screen, and in presenter
# mode every row of heads shares one projector screen (1024 × 768, the view selector above).
ROW_PX = {False: 560, True: 470}
COLS = (4, 2, 1)  # heads per row, the widest that labels every key first


@dataclass(frozen=True)
class GridPlan:
    """How a grid of ``H`` heads of ``L`` queries × ``S`` keys is laid out: rows × cols of
    blocks, and every ``every_x``-th key and ``every_y``-th query labelled (1: all)."""

    rows: int
    cols: int
    every_x: int
    every_y: int

    @property
    def thinned(self) -> bool:
        return self.every_x > 1 or self.every_y > 1


def _gap_x(S: int) -> int:
    return max(1, round(0.06 * S))  # blank columns between blocks


def grid_plan(H: int, L: int, S: int, font_size: int, cols: int | None = None) -> GridPlan:
    """The widest row of heads (4, 2, 1) whose keys all fit across at ``LABEL_PITCH_PX``,
    every label drawn; past what one head a row holds, every k-th label. Presenter mode
    (``presenting``) fits all rows of heads in one projector screen."""
    projector = presenting(font_size)
    across = PLOT_PX[projector] // LABEL_PITCH_PX  # categories a row can label
    if cols is None:
        cols = next((c for c in COLS if c <= H and c * S + (c - 1) * _gap_x(S) <= across), 1)
    cols = max(1, min(cols, H))
    rows = math.ceil(H / cols)
    every_x = max(1, math.ceil((cols * S + (cols - 1) * _gap_x(S)) / across))
    row_px = ROW_PX[projector] // rows if projector else ROW_PX[projector]
    down = max(1, (row_px - 2 * LABEL_PITCH_PX) // LABEL_PITCH_PX)  # labels a block holds, its title aside
    return GridPlan(rows, cols, every_x, max(1, math.ceil(L / down)))


def grid_layout(H: int, font_size: int, L: int = 1, S: int = 1) -> tuple[int, int]:
    """(rows, cols) of head blocks for ``L`` × ``S`` tokens (``grid_plan``)."""
    plan = grid_plan(H, L, S, font_size)
    return plan.rows, plan.cols


def thinning_note(plan: GridPlan, L: int, S: int) -> str | None:
    """What the page says when the grid labels only some tokens (None: every one)."""
    if not plan.thinned:
        return None
    keys = _("every key") if plan.every_x == 1 else _("one key in {k}").format(k=plan.every_x)
    queries = _("every query") if plan.every_y == 1 else _("one query in {k}").format(k=plan.every_y)
    return _("Labelled: {keys} and {queries} ({S} keys, {L} queries do not all fit at a readable size); hover a "
             "cell for its tokens, or open One head, which labels each.").format(keys=keys, queries=queries, S=S, L=L)


def grid_figure(data: list[HeatmapData], style: FigureStyle = FigureStyle(), *,
                title: str | None = None, cols: int | None = None,
                ticks: bool = True, clickable: bool = False, value_name: str = "",
                row_names: list[str] | None = None, col_ids: list[int] | None = None) -> go.Figure:
    """Every head in ONE heatmap trace: head blocks laid out in rows of four (two in
    presenter mode), separated by blank gaps (NaN), on one shared 0–1 colour scale,
    each titled "head h" above it.

    One trace and one pair of axes instead of one subplot per head: Plotly draws it in
    a fraction of the time. The axes are categorical, one unique label per row and
    column (the token, made unique with invisible suffixes), so the hover names the
    query and the key; an int8 ``customdata`` names the head. ``value_name``: what the
    cells hold, on the hover and the colour bar ("weight" unless told).

    ``row_names`` (small multiples, a row per layer): each row of blocks is named at its
    left and on the hover ("L3 · head 5": a block is named by ``col_ids[column]``, its
    column's head, 0, 1, ... unless told), one trace per row; a block title may hold two
    lines ("H5<br>sink"), and the gap above each row is sized for them, so that twelve
    titles a row no longer run into each other.
    """
    H = len(data)
    value_name = value_name or _("weight")
    title = _("attention weights per head") if title is None else title
    L, S = data[0].z.shape
    plan = grid_plan(H, L, S, style.font_size, cols)
    rows, cols = plan.rows, plan.cols
    if ticks and plan.thinned:  # said on the chart, wherever it is drawn (a page's caption may say more)
        title = _labelled(title, [], [], every=(plan.every_x, plan.every_y))
    lines = max(d.title.count("<br>") + 1 for d in data)  # title lines above each block
    per_row = SMALL_ROW_PX + TITLE_LINE_PX * (lines - 1)  # small multiples: pixels per row of blocks
    gap_x = _gap_x(S)
    gap_y = max(2, round(0.12 * L))  # blank rows: room for the next row's titles
    if lines > 1:  # rows of cells enough for the title's lines, at per_row pixels for L + gap rows
        need = TITLE_LINE_PX * lines + 4
        gap_y = max(gap_y, math.ceil(L * need / max(1, per_row - need)))
    # A labelled grid: a label pitch per kept label, and blank rows enough for the next row's titles.
    block_px = max(4 * LABEL_PITCH_PX, math.ceil(L / plan.every_y) * LABEL_PITCH_PX)
    if ticks:
        gap_y = max(2, math.ceil((style.font_size + 1) * 1.5 * L / block_px))
    R, C = rows * L + (rows - 1) * gap_y, cols * S + (cols - 1) * gap_x
    z = np.full((R, C), np.nan, dtype=np.float32)  # (R, C): NaN = the gaps, not drawn
    head = np.full((R, C), -1, dtype=np.int8 if H < 128 else np.int16)  # which block each cell shows
    x_raw, y_raw = ["\u2007"] * C, ["\u2007"] * R  # gaps: a figure space, blank but not empty
    annotations = []
    plain: dict[int, list[str]] = {}  # the heads of one text share their label lists: strip each once

    def plain_labels(labels: list[str]) -> list[str]:
        if id(labels) not in plain:
            plain[id(labels)] = [plain_label(t) for t in labels]
        return plain[id(labels)]

    for i, d in enumerate(data):
        r, c = divmod(i, cols)
        # One axis of labels per row and per column of blocks: blocks side by side must read the same rows, blocks
        # one above another the same columns (two prompts in one grid were both labelled with the second's).
        for j, axis in ((r * cols, "y"), (c, "x")):
            if j != i and getattr(d, axis) is not getattr(data[j], axis) and \
                    list(getattr(d, axis)) != list(getattr(data[j], axis)):
                raise ValueError(f"grid_figure: block {i} ({d.title}) has other {'rows' if axis == 'y' else 'columns'} "
                                 f"than block {j} ({data[j].title}), which shares its labels; draw them apart.")
        y0, x0 = r * (L + gap_y), c * (S + gap_x)
        z[y0:y0 + L, x0:x0 + S] = d.z
        head[y0:y0 + L, x0:x0 + S] = i
        x_raw[x0:x0 + S] = plain_labels(d.x)
        y_raw[y0:y0 + L] = plain_labels(d.y)
        annotations.append({"text": d.title, "x": x0 + (S - 1) / 2, "y": y0 - 0.5, "xref": "x", "yref": "y",
                            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                            "font": {"size": style.font_size + 1}})
    # Labels are already escaped (HeatmapData); only made unique across blocks here.
    x_lab, y_lab = _unique(x_raw), _unique(y_raw)
    hover = (f"{_('head')} %{{customdata}}<br>{_('query')}: %{{y}}<br>{_('key')}: %{{x}}<br>"
             f"{value_name}: %{{z:.4f}}<extra></extra>")
    trace = {"type": "heatmap", "z": z, "x": x_lab, "y": y_lab, "customdata": head, "coloraxis": "coloraxis",
             "hoverongaps": False, "xgap": 0, "ygap": 0, "hovertemplate": hover}
    traces = [trace]
    if row_names is not None:  # a trace per row of blocks (with the gap above it), named on the hover
        traces = []
        for r, name in enumerate(row_names[:rows]):
            top, y1 = max(0, r * (L + gap_y) - gap_y), r * (L + gap_y) + L
            ids = np.asarray(list(range(cols)) if col_ids is None else col_ids)  # each column's head
            block = np.where(head[top:y1] >= 0, ids[np.clip(head[top:y1] - r * cols, 0, cols - 1)],
                             -1).astype(head.dtype)  # (rows of this trace, C)
            traces.append({**trace, "z": z[top:y1], "y": y_lab[top:y1], "customdata": block,
                           "hovertemplate": f"{name} · " + hover})
    if clickable:
        # Heatmaps cannot be selected in Plotly; a near-invisible marker at each block's
        # centre can, so a click on a block reports that block (customdata = its index).
        centres = [divmod(i, cols) for i in range(H)]
        traces.append({"type": "scatter", "mode": "markers", "showlegend": False,
                       "x": [x_lab[c * (S + gap_x) + S // 2] for _row, c in centres],
                       "y": [y_lab[r * (L + gap_y) + L // 2] for r, _col in centres],
                       "customdata": list(range(H)),
                       "text": [(f"{row_names[r]} " if row_names else "") + d.title.replace("<br>", " · ")
                                for (r, _c), d in zip(centres, data, strict=True)],
                       "marker": {"size": 28, "opacity": 0.01, "color": "#000000"},
                       "hovertemplate": "%{text}: " + _("click to open") + "<extra></extra>"})
    layout: dict = {
        "clickmode": "event+select",
        "coloraxis": {"colorscale": colorscale(style.colors), "cmin": 0.0, "cmax": 1.0,
                      "colorbar": colour_bar(value_name)},
        "annotations": annotations,
        "xaxis": {"type": "category", "showgrid": False, "tickangle": -90, "showticklabels": ticks},
        "yaxis": {"type": "category", "showgrid": False, **rows_down(R), "showticklabels": ticks},
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    fs = style.font_size
    room = {"r": margins.colorbar(value_name, fs)}
    if ticks:
        # Every label the plan keeps, drawn (Plotly thins category labels it cannot fit, and the
        # ones it kept alternated between blocks: "The, brown, …" over one head, "quick, fox, …"
        # over the next), in the grid's own tick size, which presenter mode does not enlarge.
        x_ticks = [x_lab[c * (S + gap_x) + k] for c in range(cols) for k in range(0, S, plan.every_x)
                   if c * (S + gap_x) + k < C]
        y_ticks = [y_lab[r * (L + gap_y) + k] for r in range(rows) for k in range(0, L, plan.every_y)]
        # The margins are reserved for these labels below, so Plotly need not measure them: with
        # automargin (the template's) or a title standoff it took every label's box, one layout
        # each (~70 ms of the first paint at 64 tokens × 8 heads; bench/bench_browser.py).
        tick = {"tickmode": "array", "tickfont": {"size": TICK_PX}, "automargin": False,
                "title": {"standoff": None}}
        layout["xaxis"].update(tick, tickvals=x_ticks, ticktext=[plain_label(t) for t in x_ticks])
        layout["yaxis"].update(tick, tickvals=y_ticks, ticktext=[plain_label(t) for t in y_ticks])
        room.update(l=margins.left(y_ticks, TICK_PX), b=margins.bottom(x_ticks, TICK_PX, angle=90))
    if style.height is None and not ticks:  # small multiples: square-ish blocks, no labels
        layout["height"] = max(300, min(1400, per_row * rows + 120))
    elif style.height is None:
        # A row of cells per label pitch (or per kept label), a title line above each row of blocks,
        # and the margins layout_for and the labels take.
        plot_px = math.ceil(R * block_px / L)
        top = 60 + fs + title.count("<br>") * round(fs * 1.3 * 1.3)
        layout["height"] = plot_px + top + room.get("b", fs)
    if not ticks and row_names is not None:  # each row's name at its middle, left of it
        layout["yaxis"].update(showticklabels=True, tickmode="array", ticktext=list(row_names[:rows]),
                               tickvals=[y_lab[r * (L + gap_y) + L // 2] for r in range(rows)])
        room["l"] = margins.left(row_names[:rows], fs)
    layout = layout_for(layout, style, title, room=room)
    if ticks and plan.thinned:  # the note's line counted twice, as a wrapped line is: Plotly centres the title's
        # lines from the first down, and a second one ran into the first row's block titles
        layout["margin"]["t"] += title_line_px(fs)
        if style.height is None and "height" in layout:  # an explicit size wins, as everywhere
            layout["height"] += title_line_px(fs)
    return figure(traces, layout)


SMALL_ROW_PX = 110  # small multiples: a row of blocks with one title line
TITLE_LINE_PX = 18  # one more line of block title


def _unique(labels: list[str]) -> list[str]:
    """Labels made unique by invisible suffixes (repeats across blocks and gaps)."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab + invisible_suffix(k))
    return out


def query_figure(result: AttentionResult, n: int = 0, q: int = 0,
                 style: FigureStyle = FigureStyle()) -> go.Figure:
    """Query ``q``'s weights over all keys, one bar group per head (a line per head past
    ``BARS_UP_TO`` keys, where grouped bars would be thinner than a pixel)."""
    w, keys, qlab = query_data(result, n, q)
    kind = {"type": "bar"} if len(keys) <= BARS_UP_TO else {"type": "scatter", "mode": "lines"}
    traces = [{**kind, "x": keys, "y": w[h], "name": _("head {h}").format(h=h),
               "hovertemplate": f"{_('key')}: %{{x}}<br>{_('weight')}: %{{y:.4f}}<extra>"
                                + _("head {h}").format(h=h) + "</extra>"}
              for h in range(w.shape[0])]
    layout = {"barmode": "group", "yaxis": {"range": [0, 1], "title": {"text": _("weight")}},
              "xaxis": {"type": "category", **_every_tick(keys, _("key"))}}
    fs = style.font_size
    room = {"l": margins.left(["0.8"], fs, title=True), "b": margins.bottom(keys, fs, title=True),
            "r": margins.legend([t["name"] for t in traces], fs)}
    return figure(traces, layout_for(layout, style, _labelled(
        _("query “{token}” (position {q}):<br>weights over keys").format(token=qlab, q=q), keys), room=room))


BARS_UP_TO = 128


def output_figure(result: AttentionResult, n: int = 0, style: FigureStyle = FigureStyle()) -> go.Figure:
    return heatmap_figure(output_data(result, n), style, diverging=True)


MASK_COLORS = [[0.0, "#3b3b3b"], [0.5, "#3b3b3b"], [0.5, "#f2e8b6"], [1.0, "#f2e8b6"]]


def mask_figure(result: AttentionResult, n: int = 0, style: FigureStyle = FigureStyle(), *,
                max_cells: int | None = None, key_axis_top: bool = True) -> go.Figure:
    """The mask as a two-colour matrix; pad positions are labelled [PAD].

    ``key_axis_top=False`` draws it like ``matrix_figure`` (key axis below, same
    height), so it lines up with the matrices beside it in the mask lab.
    """
    d = mask_data(result, n, max_cells=max_cells)
    trace = {"type": "heatmap", "z": d.z, "x": d.x, "y": d.y, "zmin": 0, "zmax": 1, "showscale": False,
             "colorscale": MASK_COLORS,
             "hovertemplate": f"{_('query')}: %{{y}}<br>{_('key')}: %{{x}}<br>{_('may attend')}: %{{z}}<extra></extra>"}
    layout = {"yaxis": {**rows_down(len(d.y)), "type": "category", **_every_tick(d.y, _("query"))},
              "xaxis": {"type": "category", "side": "top" if key_axis_top else "bottom",
                        **({"tickangle": -90} if key_axis_top else {}),
                        **_every_tick(d.x, _("key"))}}  # as heatmap_figure
    if not key_axis_top:
        layout["height"] = matrix_height(len(d.y), style.font_size)
    fs = style.font_size
    title = _labelled(d.title + " " + _("(dark = blocked)"), d.x, d.y)
    room = {"l": margins.left(d.y, fs, title=True), "b": fs if key_axis_top else margins.bottom(d.x, fs, title=True),
            **({"t": margins.top(d.x, fs, wrap_title(title, fs))} if key_axis_top else {})}
    return figure([trace], layout_for(layout, style, title, top_axis=key_axis_top, room=room))


def matrix_height(rows: int, font_size: int = 12) -> int:
    """Tall enough for a readable label per row, and (larger text: presenter mode) for the title, the column
    labels and the rows' own labels at that size."""
    grow = max(1.0, font_size / 12)
    return round(max(300, (22 * rows + 150) * grow))


def matrix_figure(matrix: np.ndarray, rows: list[str], cols: list[str], title: str,
                  style: FigureStyle = FigureStyle(), *, value_name: str = "",
                  zero_one: bool = False, highlight_row: int | None = None, bar_title: str = "") -> go.Figure:
    """Any intermediate as a heatmap. −∞ cells (blocked scores) are left blank with
    "−∞ (masked)" on hover, never drawn as a number. ``highlight_row`` outlines one row
    (the token a lesson follows); ``bar_title`` titles the colour bar."""
    value_name = value_name or _("value")
    m = np.asarray(matrix, dtype=np.float64)
    blocked = np.isneginf(m)
    finite = m[np.isfinite(m)]
    z = np.where(blocked, np.nan, m).tolist()
    z = [[None if isinstance(v, float) and math.isnan(v) else v for v in row] for row in z]
    text = [[_("−∞ (masked)") if b else "" for b in row] for row in blocked]
    lim = float(np.abs(finite).max()) if finite.size else 1.0
    trace = {"type": "heatmap", "z": z, "x": axis_labels(cols), "y": axis_labels(rows), "text": text,
             "hoverongaps": True,
             "hovertemplate": f"{_('row')}: %{{y}}<br>{_('column')}: %{{x}}<br>{value_name}: %{{z:.4f}} %{{text}}"
                              "<extra></extra>"}
    trace.update({"zmin": 0.0, "zmax": 1.0, "colorscale": colorscale(style.colors)} if zero_one else
                 {"zmin": -lim or -1.0, "zmax": lim or 1.0, "zmid": 0.0, "colorscale": colorscale(DIVERGING)})
    if bar_title:
        trace["colorbar"] = colour_bar(bar_title)
    x, y = trace["x"], trace["y"]
    layout: dict = {"yaxis": {**rows_down(len(y)), "type": "category", **_every_tick(y)},
                    "xaxis": {"type": "category", **_every_tick(x)},
                    "height": matrix_height(len(rows), style.font_size)}
    if highlight_row is not None:  # categories sit at 0, 1, ...: the row spans r ± 0.5
        layout["shapes"] = [{"type": "rect", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y",
                             "y0": highlight_row - 0.5, "y1": highlight_row + 0.5,
                             "line": {"color": "#111111", "width": 3}}]
    fs = style.font_size
    room = {"l": margins.left(y, fs), "b": margins.bottom(x, fs),
            "r": margins.colorbar(bar_title, fs, trace["zmin"], trace["zmax"])}
    return figure([trace], layout_for(layout, style, _labelled(title, x, y, words=("column", "row")), room=room))
