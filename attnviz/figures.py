"""Plotly figures of an attention run. Builders return ``go.Figure``; nothing is shown.

Data and drawing are separate: ``*_data`` functions prepare what a figure shows as
plain numbers and labels (``HeatmapData``), so tests can check them; the
``*_figure`` functions only draw.

Token labels are user text. Plotly renders a subset of HTML in labels (``<b>``,
``<a href>``), so every label is HTML-escaped here and shows literally. Repeated
tokens ("the ... the") get invisible zero-width suffixes so that Plotly's
categorical axes keep one row/column per position instead of merging them.

Figures are written as plain dicts and wrapped in ``go.Figure`` without Plotly's
per-property validation (``_validate=False``): validating a figure and its template
costs ~10 ms, building it this way ~0.3 ms, and a server rebuilds figures for every
session. ``tests/test_figures.py`` validates every builder's output instead.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch

from .i18n import _
from .pipeline import AttentionResult

COLOR_SCALES = ("Viridis", "Cividis", "Magma", "Blues", "Greys", "Hot")  # first: colour-blind safe
DIVERGING = "RdBu_r"
THEMES = {"light": "plotly_white", "dark": "plotly_dark"}
# Beyond this many rows/columns, grid views are max-pooled to stay light in a browser.
DEFAULT_MAX_CELLS = 96


@dataclass(frozen=True)
class FigureStyle:
    colors: str = COLOR_SCALES[0]
    theme: str = "light"
    font_size: int = 12  # presenter mode raises this
    width: int | None = None
    height: int | None = None
    lang: str = "en"  # the language of titles and labels (part of a cached figure's key)


@dataclass
class HeatmapData:
    z: np.ndarray  # (rows, cols) float32
    x: list[str]  # column labels (escaped, unique)
    y: list[str]  # row labels (escaped, unique)
    title: str
    value_name: str = ""  # "" = "weight", in the current language
    zmin: float | None = 0.0
    zmax: float | None = 1.0
    pooled: int = 1  # block size when max-pooled (1 = full detail)
    notes: list[str] = field(default_factory=list)


def escape_label(token: str) -> str:
    """Show ``token`` literally in Plotly text (no tags, no links, no entities)."""
    return html.escape(token, quote=True)


# Invisible characters used as digits to tell repeated labels apart (not U+200D, the
# zero-width joiner, which would fuse with an emoji label).
_INVISIBLE_DIGITS = ("\u200b", "\u200c", "\u2060", "\ufeff")


def _invisible_suffix(k: int) -> str:
    """The k-th repeat's suffix: k written in base 4 with invisible digits ('' for k = 0)."""
    out = ""
    while k:
        k, d = divmod(k, len(_INVISIBLE_DIGITS))
        out += _INVISIBLE_DIGITS[d]
    return out


def axis_labels(tokens: list[str]) -> list[str]:
    """Escaped labels, made unique by invisible suffixes so no two positions merge.

    The suffix grows with log(repeats), so 512 copies of one token stay cheap.
    """
    seen: dict[str, int] = {}
    out = []
    for t in tokens:
        lab = escape_label(t)
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab + _invisible_suffix(k))
    return out


def plain_label(label: str) -> str:
    """A label without its invisible suffix (for tests and tables)."""
    return label.rstrip("".join(_INVISIBLE_DIGITS))


def pool_block(rows: int, cols: int, max_cells: int) -> int:
    """The square block size that brings both sides to at most ``max_cells`` (1 = none)."""
    return max(1, math.ceil(max(rows, cols) / max_cells))


def pooling_note(rows: int, cols: int, block: int) -> str:
    return _("Overview: {rows}×{cols} weights are max-pooled in {block}×{block} blocks so the page stays fast; "
             "each cell shows its block's largest weight, so peaks survive.").format(rows=rows, cols=cols, block=block)


def max_pool(z: np.ndarray, max_cells: int) -> tuple[np.ndarray, int]:
    """Max-pool a (rows, cols) matrix with square blocks so that neither side
    exceeds ``max_cells``; peaks survive (a mean would wash them out).

    Returns the pooled matrix and the block size (1 when nothing was pooled).
    """
    rows, cols = z.shape
    block = pool_block(rows, cols, max_cells)
    if block == 1:
        return z, 1
    R, C = math.ceil(rows / block), math.ceil(cols / block)
    padded = np.full((R * block, C * block), -np.inf, dtype=np.float32)
    padded[:rows, :cols] = z
    pooled = padded.reshape(R, block, C, block).max(axis=(1, 3))  # (R, C)
    return pooled, block


def _block_labels(n: int, block: int) -> list[str]:
    return [f"{i}–{min(i + block, n) - 1}" for i in range(0, n, block)]


def _matrix_data(z, rows: list[str], cols: list[str], title: str, max_cells: int | None,
                 **kw) -> HeatmapData:
    z = np.asarray(z, dtype=np.float32)
    block = 1
    if max_cells is not None:
        z, block = max_pool(z, max_cells)
    if block > 1:
        x, y = _block_labels(len(cols), block), _block_labels(len(rows), block)
        return HeatmapData(z, x, y, title, pooled=block, notes=[pooling_note(len(rows), len(cols), block)], **kw)
    return HeatmapData(z, axis_labels(cols), axis_labels(rows), title, **kw)


# --- data ---------------------------------------------------------------------------


def head_data(result: AttentionResult, n: int = 0, h: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    """Weights of head ``h`` of sequence ``n``: (L, S)."""
    w = result.weights[n, h].numpy()  # (L, S)
    return _matrix_data(w, result.tokens[n], result.source_tokens[n], _("head {h}").format(h=h), max_cells)


def grid_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = DEFAULT_MAX_CELLS) -> list[HeatmapData]:
    """One ``HeatmapData`` per head, pooled when the text is long."""
    return [head_data(result, n, h, max_cells=max_cells) for h in range(result.weights.shape[1])]


def mean_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    w = result.weights[n].mean(dim=0).numpy()  # (H, L, S) -> (L, S)
    return _matrix_data(w, result.tokens[n], result.source_tokens[n], _("mean over heads"),
                        max_cells)


def mask_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    """1 where a query may attend, 0 where blocked: (L, S)."""
    m = result.mask_matrix(n).to(torch.float32).numpy()  # (L, S)
    title = _("mask: {kind}").format(kind=result.config.mask)
    return _matrix_data(m, result.tokens[n], result.source_tokens[n], title, max_cells,
                        value_name=_("may attend"))


def output_data(result: AttentionResult, n: int = 0) -> HeatmapData:
    """The output vectors: tokens × d_model."""
    o = result.output[n].numpy()  # (L, E)
    lim = float(np.abs(o).max()) or 1.0
    return HeatmapData(o, [str(i) for i in range(o.shape[1])], axis_labels(result.tokens[n]),
                       _("output vectors"), value_name=_("value"), zmin=-lim, zmax=lim)


def query_data(result: AttentionResult, n: int = 0, q: int = 0) -> tuple[np.ndarray, list[str], str]:
    """Weights of query ``q`` over every key, per head: (H, S), key labels, query label."""
    w = result.weights[n, :, q, :].numpy()  # (H, S)
    return w, axis_labels(result.source_tokens[n]), escape_label(result.tokens[n][q])


# --- drawing ------------------------------------------------------------------------

_TEMPLATE_CACHE: dict[str, dict] = {}
_SCALE_CACHE: dict[str, list] = {}


def colorscale(name: str) -> list:
    """A named scale as explicit [position, colour] stops. Plotly's Python names
    ("Magma", "RdBu_r") are not all known to plotly.js, and the figures skip the
    validation that would expand them."""
    if name not in _SCALE_CACHE:
        from plotly.colors import get_colorscale

        _SCALE_CACHE[name] = [[pos, _not_a_placeholder(c)] for pos, c in get_colorscale(name)]
    return _SCALE_CACHE[name]


def _not_a_placeholder(color: str) -> str:
    """Streamlit's frontend treats colours "#000001"… as placeholders for its theme and
    swaps them for theme colours, whatever the chart's theme: Magma's first stop,
    "#000004", came out purple. Nudge such a colour by one step of red (invisible)."""
    return "#01" + color[3:] if re.fullmatch(r"#0000[0-9a-fA-F]{2}", color) else color


def template(theme: str) -> dict:
    """The theme's Plotly template as a plain dict, prepared once per process."""
    name = THEMES.get(theme, THEMES["light"])
    if name not in _TEMPLATE_CACHE:
        _TEMPLATE_CACHE[name] = pio.templates[name].to_plotly_json()
    return _TEMPLATE_CACHE[name]


def figure(data: list[dict], layout: dict) -> go.Figure:
    """Wrap plain trace and layout dicts without re-validating them (see the module doc)."""
    return go.Figure(data=data, layout=layout, _validate=False)


def _layout(layout: dict, style: FigureStyle, title: str, *, top_axis: bool = False) -> dict:
    # A key axis drawn on top needs room between it and the title.
    top = 60 + style.font_size + (6 * style.font_size if top_axis else 0)
    layout.update(
        template=template(style.theme),
        title={"text": title, "font": {"size": round(style.font_size * 1.3)}},
        font={"size": style.font_size},
        margin={"l": 10, "r": 10, "t": top, "b": 10},
    )
    # An explicit size wins; otherwise keep the height a builder chose for its content.
    if style.width is not None:
        layout["width"] = style.width
    if style.height is not None:
        layout["height"] = style.height
    return layout


def _heatmap_trace(d: HeatmapData, style: FigureStyle, *, shared: bool, diverging: bool = False) -> dict:
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
    layout = {
        "yaxis": {"autorange": "reversed", "type": "category",
                  "title": {"text": _("query") if not diverging else _("token")}},
        "xaxis": {"type": "category" if not diverging else "linear",
                  "title": {"text": _("key") if not diverging else _("dimension")},
                  "side": "top" if not diverging else "bottom"},
    }
    return figure([_heatmap_trace(d, style, shared=False, diverging=diverging)],
                  _layout(layout, style, d.title, top_axis=not diverging))


def grid_layout(H: int, font_size: int) -> tuple[int, int]:
    """(rows, cols) of head blocks: four per row, two in presenter mode."""
    cols = min(H, 4) if font_size <= 14 else min(H, 2)
    return math.ceil(H / cols), cols


def grid_figure(data: list[HeatmapData], style: FigureStyle = FigureStyle(), *,
                title: str | None = None, cols: int | None = None,
                ticks: bool = True, clickable: bool = False) -> go.Figure:
    """Every head in ONE heatmap trace: head blocks laid out in rows of four (two in
    presenter mode), separated by blank gaps (NaN), on one shared 0–1 colour scale,
    each titled "head h" above it.

    One trace and one pair of axes instead of one subplot per head: Plotly draws it in
    a fraction of the time. The axes are categorical, one unique label per row and
    column (the token, made unique with invisible suffixes), so the hover names the
    query and the key; an int8 ``customdata`` names the head.
    """
    H = len(data)
    title = _("attention weights per head") if title is None else title
    rows, cols = grid_layout(H, style.font_size) if cols is None else (math.ceil(H / cols), cols)
    L, S = data[0].z.shape
    gap_x = max(1, round(0.06 * S))  # blank columns between blocks
    gap_y = max(2, round(0.12 * L))  # blank rows: room for the next row's titles
    R, C = rows * L + (rows - 1) * gap_y, cols * S + (cols - 1) * gap_x
    z = np.full((R, C), np.nan, dtype=np.float32)  # (R, C): NaN = the gaps, not drawn
    head = np.full((R, C), -1, dtype=np.int8 if H < 128 else np.int16)  # which block each cell shows
    x_raw, y_raw = ["\u2007"] * C, ["\u2007"] * R  # gaps: a figure space, blank but not empty
    annotations = []
    for i, d in enumerate(data):
        r, c = divmod(i, cols)
        y0, x0 = r * (L + gap_y), c * (S + gap_x)
        z[y0:y0 + L, x0:x0 + S] = d.z
        head[y0:y0 + L, x0:x0 + S] = i
        x_raw[x0:x0 + S] = [plain_label(t) for t in d.x]
        y_raw[y0:y0 + L] = [plain_label(t) for t in d.y]
        annotations.append({"text": d.title, "x": x0 + (S - 1) / 2, "y": y0 - 0.5, "xref": "x", "yref": "y",
                            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                            "font": {"size": style.font_size + 1}})
    # Labels are already escaped (HeatmapData); only made unique across blocks here.
    x_lab, y_lab = _unique(x_raw), _unique(y_raw)
    trace = {"type": "heatmap", "z": z, "x": x_lab, "y": y_lab, "customdata": head, "coloraxis": "coloraxis",
             "hoverongaps": False, "xgap": 0, "ygap": 0,
             "hovertemplate": f"{_('head')} %{{customdata}}<br>{_('query')}: %{{y}}<br>{_('key')}: %{{x}}<br>"
                              f"{_('weight')}: %{{z:.4f}}<extra></extra>"}
    traces = [trace]
    if clickable:
        # Heatmaps cannot be selected in Plotly; a near-invisible marker at each block's
        # centre can, so a click on a block reports that block (customdata = its index).
        centres = [divmod(i, cols) for i in range(H)]
        traces.append({"type": "scatter", "mode": "markers", "showlegend": False,
                       "x": [x_lab[c * (S + gap_x) + S // 2] for _row, c in centres],
                       "y": [y_lab[r * (L + gap_y) + L // 2] for r, _col in centres],
                       "customdata": list(range(H)), "text": [d.title for d in data],
                       "marker": {"size": 28, "opacity": 0.01, "color": "#000000"},
                       "hovertemplate": "%{text}: " + _("click to open") + "<extra></extra>"})
    layout: dict = {
        "clickmode": "event+select",
        "coloraxis": {"colorscale": colorscale(style.colors), "cmin": 0.0, "cmax": 1.0,
                      "colorbar": {"title": {"text": _("weight")}}},
        "annotations": annotations,
        "xaxis": {"type": "category", "showgrid": False, "tickangle": -45, "showticklabels": ticks},
        "yaxis": {"type": "category", "showgrid": False, "autorange": "reversed", "showticklabels": ticks},
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    if style.height is None and not ticks:  # small multiples: square-ish blocks, no labels
        layout["height"] = max(300, min(1400, 110 * rows + 120))
    elif style.height is None:
        # Tall enough for a label per token on short texts (Plotly thins labels it cannot fit).
        per_row = min(520, max(260, 14 * L + 60)) if style.font_size <= 14 else min(760, max(420, 26 * L + 100))
        layout["height"] = per_row * rows + 80
    return figure(traces, _layout(layout, style, title))


def _unique(labels: list[str]) -> list[str]:
    """Labels made unique by invisible suffixes (repeats across blocks and gaps)."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab + _invisible_suffix(k))
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
              "xaxis": {"type": "category", "title": {"text": _("key")}}}
    return figure(traces, _layout(layout, style, _("query “{token}” (position {q}): weights over keys").format(
        token=qlab, q=q)))


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
    layout = {"yaxis": {"autorange": "reversed", "type": "category", "title": {"text": _("query")}, **_every_tick(d.y)},
              "xaxis": {"type": "category", "side": "top" if key_axis_top else "bottom", "title": {"text": _("key")},
                        **_every_tick(d.x)}}
    if not key_axis_top:
        layout["height"] = matrix_height(len(d.y))
    return figure([trace], _layout(layout, style, d.title + " " + _("(dark = blocked)"), top_axis=key_axis_top))


# --- teaching pages -------------------------------------------------------------------


# Up to this many categories, every one gets its tick label (Plotly thins them otherwise).
EVERY_TICK_UP_TO = 48


def _every_tick(labels: list[str]) -> dict:
    return {"tickmode": "array", "tickvals": labels, "ticktext": labels} if len(labels) <= EVERY_TICK_UP_TO else {}


def matrix_height(rows: int) -> int:
    """Tall enough for a readable label per row."""
    return max(300, 22 * rows + 150)


def matrix_figure(matrix: np.ndarray, rows: list[str], cols: list[str], title: str,
                  style: FigureStyle = FigureStyle(), *, value_name: str = "",
                  zero_one: bool = False, highlight_row: int | None = None) -> go.Figure:
    """Any intermediate as a heatmap. −∞ cells (blocked scores) are left blank with
    "−∞ (masked)" on hover, never drawn as a number. ``highlight_row`` outlines one row
    (the token a lesson follows)."""
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
    x, y = trace["x"], trace["y"]
    layout: dict = {"yaxis": {"autorange": "reversed", "type": "category", **_every_tick(y)},
                    "xaxis": {"type": "category", **_every_tick(x)}, "height": matrix_height(len(rows))}
    if highlight_row is not None:  # categories sit at 0, 1, ...: the row spans r ± 0.5
        layout["shapes"] = [{"type": "rect", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y",
                             "y0": highlight_row - 0.5, "y1": highlight_row + 0.5,
                             "line": {"color": "#111111", "width": 3}}]
    return figure([trace], _layout(layout, style, title))


def token_bars(tokens: list[str], series: dict[str, np.ndarray], title: str,
               style: FigureStyle = FigureStyle(), *, y_title: str = "") -> go.Figure:
    """Grouped bars, one group per token position, one bar per series."""
    x = axis_labels(tokens)
    traces = [{"type": "bar", "x": x, "y": np.asarray(v, dtype=np.float64), "name": name}
              for name, v in series.items()]
    layout = {"barmode": "group", "xaxis": {"type": "category"}, "yaxis": {"title": {"text": y_title or _("value")}}}
    return figure(traces, _layout(layout, style, title))


def lines_figure(x: list, series: dict[str, list[float]], title: str, style: FigureStyle = FigureStyle(), *,
                 x_title: str = "", y_title: str = "", log_x: bool = True) -> go.Figure:
    traces = [{"type": "scatter", "x": x, "y": y, "name": name, "mode": "lines+markers"}
              for name, y in series.items()]
    layout = {"xaxis": {"type": "log" if log_x else "linear", "title": {"text": x_title}},
              "yaxis": {"title": {"text": y_title}}}
    return figure(traces, _layout(layout, style, title))


def difference_figure(head_diffs: list[float], row_diffs: list[float], row_tokens: list[str], threshold: float,
                      title: str, style: FigureStyle = FigureStyle()) -> go.Figure:
    """Two bar charts on a log axis, per head and per query position, with the pass
    threshold as a line: a failing check shows where it fails. Exact zeros are drawn
    at a floor far below the threshold (the hover says 0)."""
    floor = threshold * 1e-6
    bars = lambda v: [max(x, floor) for x in v]  # noqa: E731 - log axes cannot draw 0
    heads = [_("head {h}").format(h=h) for h in range(len(head_diffs))]
    rows = axis_labels(row_tokens[: len(row_diffs)])
    color = lambda v: ["#d62728" if x > threshold else "#2a9d8f" for x in v]  # noqa: E731
    traces = [
        {"type": "bar", "x": heads, "y": bars(head_diffs), "customdata": head_diffs, "name": "per head",
         "marker": {"color": color(head_diffs)}, "xaxis": "x", "yaxis": "y",
         "hovertemplate": "%{x}<br>max |difference|: %{customdata:.3e}<extra></extra>"},
        {"type": "bar", "x": rows, "y": bars(row_diffs), "customdata": row_diffs, "name": "per query",
         "marker": {"color": color(row_diffs)}, "xaxis": "x2", "yaxis": "y2",
         "hovertemplate": "query %{x}<br>max |difference|: %{customdata:.3e}<extra></extra>"},
    ]
    # One range for both, from below the smallest bar to above the threshold, so the
    # threshold line is always in view.
    values = [max(x, floor) for x in (*head_diffs, *row_diffs)] or [floor]
    lo = math.log10(min(min(values), threshold * 1e-3)) - 0.5
    hi = math.log10(max(max(values), threshold)) + 0.7
    axis = {"type": "log", "exponentformat": "power", "title": {"text": _("max |difference|")}, "range": [lo, hi]}
    # On a log axis, shapes and annotations take log10 of the value.
    line = lambda ref: {"type": "line", "xref": f"{ref} domain", "x0": 0, "x1": 1, "yref": ref.replace("x", "y"),  # noqa: E731
                        "y0": math.log10(threshold), "y1": math.log10(threshold),
                        "line": {"color": "#d62728", "dash": "dash", "width": 2}}
    layout = {
        "showlegend": False, "height": 360,
        "xaxis": {"domain": [0, 0.3], "type": "category", "title": {"text": _("head")}},
        "xaxis2": {"domain": [0.4, 1], "type": "category", "title": {"text": _("query token")}, "anchor": "y2"},
        "yaxis": {**axis, "anchor": "x"}, "yaxis2": {**axis, "anchor": "x2", "title": {"text": ""}},
        "shapes": [line("x"), line("x2")],
        "annotations": [{"text": _("threshold {t}").format(t=f"{threshold:.0e}"), "xref": "x2 domain", "x": 1,
                         "yref": "y2",
                         "y": math.log10(threshold), "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                         "font": {"color": "#d62728"}}],
    }
    return figure(traces, _layout(layout, style, title))


# --- long inputs: a picture of every cell, exact numbers for a region ---------------------

# Past this many cells, a full-detail view is drawn as an image (one pixel per cell, PNG)
# rather than a heatmap: 2048 × 2048 float32 would be 22 MB of JSON, the PNG a few MB.
IMAGE_ABOVE_CELLS = 512 * 512
REGION = 64  # rows and columns of the hoverable close-up


def _rgb(scale: list, n: int = 256) -> np.ndarray:
    """A colour scale sampled at ``n`` points: (n, 3) uint8."""
    from plotly.colors import hex_to_rgb, unlabel_rgb

    pos = np.array([float(p) for p, _c in scale])
    cols = np.array([hex_to_rgb(c) if c.startswith("#") else unlabel_rgb(c) for _p, c in scale], dtype=float)
    t = np.linspace(0, 1, n)
    return np.stack([np.interp(t, pos, cols[:, i]) for i in range(3)], axis=1).round().astype(np.uint8)


def png_data_uri(z: np.ndarray, scale: list, zmin: float, zmax: float) -> str:
    """``z`` (rows, cols) coloured by ``scale`` as a PNG data URI; NaN is white."""
    import base64
    import io

    from PIL import Image

    lut = _rgb(scale)  # (256, 3)
    t = np.clip((np.nan_to_num(z, nan=zmin) - zmin) / ((zmax - zmin) or 1.0), 0, 1)
    rgb = lut[(t * 255).round().astype(np.uint8)]  # (rows, cols, 3)
    rgb[np.isnan(z)] = 255
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, format="PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image_figure(d: HeatmapData, style: FigureStyle = FigureStyle(), *, scale: list | None = None) -> go.Figure:
    """Every cell of a long (rows × cols) matrix as one image pixel, with a colour bar.
    Hover gives the position (query i, key j); the close-up below it gives exact numbers."""
    rows, cols = d.z.shape
    scale = scale or colorscale(style.colors)
    image = {"type": "image", "source": png_data_uri(d.z, scale, d.zmin, d.zmax), "x0": 0, "y0": 0,
             "dx": 1, "dy": 1,
             "hovertemplate": f"{_('query')} %{{y}}<br>{_('key')} %{{x}}<extra>" + _("exact values: the close-up")
             + "</extra>"}
    # An invisible one-point heatmap carries the colour bar for the image.
    bar = {"type": "heatmap", "z": [[d.zmin, d.zmax]], "x": [0, 0], "y": [0, 0], "opacity": 0, "hoverinfo": "skip",
           "colorscale": scale, "zmin": d.zmin, "zmax": d.zmax,
           "colorbar": {"title": {"text": d.value_name or _("weight")}}}
    layout = {"xaxis": {"title": {"text": _("key position")}, "side": "top", "range": [-0.5, cols - 0.5],
                        "showgrid": False},
              "yaxis": {"title": {"text": _("query position")}, "range": [rows - 0.5, -0.5], "showgrid": False,
                        "scaleanchor": "x"},
              "height": 760}
    title = _("{title}: all {rows}×{cols} cells, one pixel each (zoom in, or read exact values below)").format(
        title=d.title, rows=rows, cols=cols)
    return figure([image, bar], _layout(layout, style, title, top_axis=True))


def region_data(result: AttentionResult, n: int, h: int | None, q0: int, k0: int, size: int = REGION) -> HeatmapData:
    """A size × size close-up of head ``h`` (None: the mean over heads) from query q0, key k0,
    labelled "position: token"."""
    L, S = result.weights.shape[-2:]
    q0, k0 = max(0, min(q0, L - 1)), max(0, min(k0, S - 1))
    q1, k1 = min(L, q0 + size), min(S, k0 + size)
    w = result.weights[n, :, q0:q1, k0:k1]  # (H, size, size)
    z = (w.mean(dim=0) if h is None else w[h]).numpy()
    rows = [f"{i}: {t}" for i, t in enumerate(result.tokens[n][q0:q1], q0)]
    cols = [f"{j}: {t}" for j, t in enumerate(result.source_tokens[n][k0:k1], k0)]
    what = _("mean over heads") if h is None else _("head {h}").format(h=h)
    title = _("{what}, queries {q0}–{q1} × keys {k0}–{k1}").format(what=what, q0=q0, q1=q1 - 1, k0=k0, k1=k1 - 1)
    return HeatmapData(z, axis_labels(cols), axis_labels(rows), title)


def region_figure(d: HeatmapData, style: FigureStyle = FigureStyle()) -> go.Figure:
    """The close-up as a hoverable heatmap with exact (6-decimal) weights."""
    trace = _heatmap_trace(d, style, shared=False)
    trace["hovertemplate"] = "query: %{y}<br>key: %{x}<br>weight: %{z:.6f}<extra></extra>"
    layout = {"yaxis": {"autorange": "reversed", "type": "category", "title": {"text": "query"}},
              "xaxis": {"type": "category", "side": "top", "title": {"text": "key"}}, "height": 760}
    return figure([trace], _layout(layout, style, d.title, top_axis=True))


# --- other inputs: image patches, audio frames, graph nodes -------------------------------


def image_uri(image: np.ndarray) -> str:
    """An (H, W, 3) float image as a PNG data URI."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8), "RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def overlay_figure(image: np.ndarray, panels: list[tuple[str, np.ndarray]], grid: tuple[int, int], patch: int,
                   stride: int, chosen: int, style: FigureStyle = FigureStyle(), *, title: str = "") -> go.Figure:
    """The image once per panel, each panel's (nH, nW) weights over it as a translucent
    heatmap (cell = the patch's stride square at its place), the chosen patch outlined.
    A near-invisible marker at each patch centre makes a click pick that patch."""
    nH, nW = grid
    H, W = image.shape[:2]
    cols = min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    gap_x, gap_y = 0.04, 0.1 / max(1, rows - 1) if rows > 1 else 0.0
    w = (1 - gap_x * (cols - 1)) / cols
    h = (1 - gap_y * (rows - 1)) / rows
    uri = image_uri(image)
    # Spread over many patches, weights are small: the scale runs to the largest one shown.
    top = max(float(np.max(z)) for _name, z in panels) or 1.0
    layout: dict = {"images": [], "annotations": [], "shapes": [], "showlegend": False,
                    "coloraxis": {"colorscale": colorscale(style.colors), "cmin": 0, "cmax": top,
                                  "colorbar": {"title": {"text": f"{_('weight')}<br>(0–{top:.3f})"}}},
                    "clickmode": "event+select", "height": 300 * rows + 100}
    traces = []
    cx = [c * stride + patch / 2 for c in range(nW)]
    cy = [r * stride + patch / 2 for r in range(nH)]
    for i, (name, z) in enumerate(panels):
        r, c = divmod(i, cols)
        x0, y1 = c * (w + gap_x), 1 - r * (h + gap_y)
        ax = "" if i == 0 else str(i + 1)
        layout[f"xaxis{ax}"] = {"domain": [round(x0, 6), round(min(1, x0 + w), 6)], "range": [0, W],
                                "showticklabels": False, "showgrid": False, "zeroline": False, "anchor": f"y{ax}"}
        layout[f"yaxis{ax}"] = {"domain": [round(max(0, y1 - h), 6), round(y1, 6)], "range": [H, 0],
                                "showticklabels": False, "showgrid": False, "zeroline": False, "anchor": f"x{ax}",
                                "scaleanchor": f"x{ax}"}
        layout["images"].append({"source": uri, "xref": f"x{ax}", "yref": f"y{ax}", "x": 0, "y": 0, "sizex": W,
                                 "sizey": H, "xanchor": "left", "yanchor": "top", "layer": "below",
                                 "sizing": "stretch"})
        layout["annotations"].append({"text": name, "x": x0 + w / 2, "y": y1, "xref": "paper", "yref": "paper",
                                      "xanchor": "center", "yanchor": "bottom", "showarrow": False})
        traces.append({"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": cx, "y": cy, "opacity": 0.6,
                       "coloraxis": "coloraxis", "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                       "hovertemplate": f"{_('weight')}: %{{z:.4f}}<extra></extra>"})
        pr, pc = divmod(chosen, nW)
        layout["shapes"].append({"type": "rect", "xref": f"x{ax}", "yref": f"y{ax}", "x0": pc * stride,
                                 "x1": pc * stride + patch, "y0": pr * stride, "y1": pr * stride + patch,
                                 "line": {"color": "#ff2d55", "width": 2}})
        traces.append({"type": "scatter", "mode": "markers", "x": [x for _y in cy for x in cx],
                       "y": [y for y in cy for _x in cx], "customdata": list(range(nH * nW)),
                       "marker": {"size": 10, "opacity": 0.01, "color": "#000000"}, "xaxis": f"x{ax}",
                       "yaxis": f"y{ax}",
                       "hovertemplate": _("patch {n}: click to follow it").format(n="%{customdata}")
                                        + "<extra></extra>"})
    return figure(traces, _layout(layout, style, title))


def spectrogram_figure(spec: np.ndarray, times: list[str], weights: np.ndarray, chosen: int, rate: int, frame: int,
                       style: FigureStyle = FigureStyle()) -> go.Figure:
    """The spectrogram (frames × frequency) above, the chosen frame's weights over every
    frame below (a line per head), on one time axis."""
    freqs = np.fft.rfftfreq(frame, 1 / rate)
    traces = [{"type": "heatmap", "z": np.asarray(spec, dtype=np.float32).T, "x": list(range(len(times))),
               "y": freqs.astype(np.float32), "colorscale": colorscale("Magma"), "showscale": False,
               "xaxis": "x", "yaxis": "y2",
               "hovertemplate": f"{_('frame')} %{{x}}<br>%{{y:.0f}} Hz<br>log|X|: %{{z:.2f}}<extra></extra>"}]
    for h in range(weights.shape[0]):
        traces.append({"type": "scatter", "mode": "lines", "x": list(range(len(times))), "y": weights[h],
                       "name": f"head {h}", "xaxis": "x", "yaxis": "y",
                       "hovertemplate": "frame %{x}<br>weight: %{y:.4f}<extra>head " + str(h) + "</extra>"})
    layout = {"height": 560, "xaxis": {"title": {"text": _("frame")}, "anchor": "y"},
              "yaxis": {"domain": [0, 0.38], "title": {"text": _("weight from frame {n}").format(n=chosen)},
                        "rangemode": "tozero"},
              "yaxis2": {"domain": [0.45, 1], "title": {"text": _("frequency (Hz)")}, "anchor": "x"},
              "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": chosen, "x1": chosen, "y0": 0, "y1": 1,
                          "line": {"color": "#2a9d8f", "width": 2, "dash": "dot"}}]}
    return figure(traces, _layout(layout, style, _("spectrogram, and what frame {n} ({time}) attends to").format(
        n=chosen, time=times[chosen])))


def graph_figure(n: int, edges: list[tuple[int, int]], weights: np.ndarray, chosen: int, seed: int,
                 style: FigureStyle = FigureStyle()) -> go.Figure:
    """A node-link drawing (networkx spring layout, seeded): the graph's edges in grey, and
    a line from the chosen node to every node it attends to, as wide as the weight."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    pos = nx.spring_layout(g, seed=seed)
    xs, ys = [], []
    for a, b in edges:
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
    traces = [{"type": "scatter", "mode": "lines", "x": xs, "y": ys, "line": {"color": "#bbbbbb", "width": 1},
               "hoverinfo": "skip", "showlegend": False}]
    for j in range(n):
        wj = float(weights[j])
        if wj <= 1e-4 or j == chosen:
            continue
        traces.append({"type": "scatter", "mode": "lines", "x": [pos[chosen][0], pos[j][0]],
                       "y": [pos[chosen][1], pos[j][1]], "showlegend": False, "hoverinfo": "skip",
                       "line": {"color": "#e63946", "width": 1 + 14 * wj}, "opacity": 0.75})
    traces.append({"type": "scatter", "mode": "markers+text", "x": [pos[i][0] for i in range(n)],
                   "y": [pos[i][1] for i in range(n)], "text": [str(i) for i in range(n)],
                   "customdata": np.asarray(weights, dtype=np.float64), "textposition": "middle center",
                   "marker": {"size": [34 if i == chosen else 22 for i in range(n)],
                              "color": np.asarray(weights, dtype=np.float64), "coloraxis": "coloraxis",
                              "line": {"color": ["#e63946" if i == chosen else "#333333" for i in range(n)],
                                       "width": 2}},
                   "hovertemplate": _("node {n}").format(n="%{text}") + "<br>"
                                    + _("weight from node {n}").format(n=chosen)
                                    + ": %{customdata:.4f}"
                                    "<extra></extra>", "showlegend": False})
    layout = {"height": 520, "xaxis": {"visible": False}, "yaxis": {"visible": False, "scaleanchor": "x"},
              "coloraxis": {"colorscale": colorscale(style.colors), "cmin": 0, "cmax": 1,
                            "colorbar": {"title": {"text": _("weight")}}}}
    return figure(traces, _layout(layout, style, _("what node {n} attends to (mean over heads)").format(n=chosen)))
