"""Bar and line charts: gradients per token, curves over a swept value, and the
per-head / per-query differences of a verification.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots import margins
from attnviz.plots.style import FigureStyle, axis_labels, figure, layout_for

# A line chart's plot and title on a projector: with its legend below, whole under a page's title and controls on a
# 1024 × 768 screen (at 450 px Why √d_k's first chart ran 105 px below it).
PRESENTER_LINES_PX = 330

def token_bars(tokens: list[str], series: dict[str, np.ndarray], title: str,
               style: FigureStyle = FigureStyle(), *, y_title: str = "") -> go.Figure:
    """Grouped bars, one group per token position, one bar per series."""
    x = axis_labels(tokens)
    traces = [{"type": "bar", "x": x, "y": np.asarray(v, dtype=np.float64), "name": name}
              for name, v in series.items()]
    layout = {"barmode": "group", "xaxis": {"type": "category"}, "yaxis": {"title": {"text": y_title or _("value")}}}
    return figure(traces, layout_for(layout, style, title))


def _axis(log: bool, title: str) -> dict:
    """A linear axis, or a log axis labelled at powers of ten only (Plotly's default labels
    its minor ticks too, "2 5 2 5", where the range spans a few decades)."""
    if not log:
        return {"type": "linear", "title": {"text": title}}
    return {"type": "log", "dtick": 1, "title": {"text": title}}


def lines_figure(x: list, series: dict[str, list[float]], title: str, style: FigureStyle = FigureStyle(), *,
                 x_title: str = "", y_title: str = "", log_x: bool = True, log_y: bool = False,
                 mark: tuple[float, str] | None = None, dash: tuple[str, ...] = ()) -> go.Figure:
    """A line per series; a ``None`` value is a gap (a size that was not run). ``mark``:
    a labelled vertical line at x; ``dash``: the series drawn dashed."""
    traces = [{"type": "scatter", "x": x, "y": y, "name": name, "mode": "lines+markers"}
              for name, y in series.items()]
    for t in traces:
        if t["name"] in dash:
            t["line"] = {"dash": "dash"}
    layout = {"xaxis": _axis(log_x, x_title), "yaxis": _axis(log_y, y_title)}
    if mark is not None:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": mark[0], "x1": mark[0], "y0": 0,
                             "y1": 1, "line": {"dash": "dot", "color": "#d62728"}}]
        layout["annotations"] = [{"x": mark[0], "y": 1, "xref": "x", "yref": "paper", "text": mark[1],
                                  "showarrow": False, "yanchor": "bottom", "font": {"color": "#d62728"}}]
        # The data's own range: Plotly widens an axis to hold an annotation's text, and a projector's
        # font ran the step axis from −2000.
        xs = [v for v in x if isinstance(v, (int, float)) and (v > 0 or not log_x)]
        if xs:
            lo, hi = (math.log10(min(xs)), math.log10(max(xs))) if log_x else (min(xs), max(xs))
            pad = 0.03 * (hi - lo or 1)
            layout["xaxis"]["range"] = [lo - pad, hi + pad]
    room, legend_gap = None, None
    if style.presenting and len(traces) > 1:
        # On a projector a legend beside the plot took half its width: below it, in rows.
        per_row = max(1, int(900 // (margins.labels_em([t["name"] for t in traces]) * style.font_size + 60)))
        rows = math.ceil(len(traces) / per_row)
        legend_gap = margins.bottom(["1"], style.font_size, title=bool(x_title))  # the x labels and title
        room = {"b": legend_gap + round(1.6 * style.font_size) * rows}
        layout["height"] = PRESENTER_LINES_PX + room["b"]
    layout = layout_for(layout, style, title, room=room)
    if legend_gap is not None:
        plot_px = layout["height"] - layout["margin"]["t"] - room["b"]
        layout["legend"] = {"orientation": "h", "x": 0, "xanchor": "left", "y": -legend_gap / max(1, plot_px),
                            "yanchor": "top"}
    return figure(traces, layout)


def stacked_lines_figure(x: list, series: dict[str, list[float]], title: str, style: FigureStyle = FigureStyle(),
                         *, x_title: str = "", y_title: str = "", row_px: int = 150) -> go.Figure:
    """A row per series on one shared x axis, each line titled beside it: series that lie close together
    (three sparse patterns' output changes per query) stay apart, where one chart would draw them on top of
    each other. One y range for all rows, so that heights compare."""
    n = len(series)
    gap = 0.06
    height = (1 - gap * (n - 1)) / n
    values = [v for ys in series.values() for v in ys if v is not None]
    top = max(values) if values else 1.0
    traces, layout = [], {"showlegend": False, "annotations": []}
    for i, (name, ys) in enumerate(series.items()):
        axis = "" if i == 0 else str(i + 1)
        lo = 1 - (i + 1) * height - i * gap
        traces.append({"type": "scatter", "x": x, "y": ys, "name": name, "mode": "lines", "line": {"width": 1.5},
                       "xaxis": "x", "yaxis": "y" + axis})
        layout["yaxis" + axis] = {"domain": [lo, lo + height], "range": [0, top * 1.05], "title": {"text": ""}}
        layout["annotations"].append({"text": name, "xref": "paper", "yref": "paper", "x": 0, "y": lo + height,
                                      "xanchor": "left", "yanchor": "bottom", "showarrow": False})
    layout["xaxis"] = {"title": {"text": x_title}, "anchor": "y" + ("" if n == 1 else str(n))}
    layout["yaxis"]["title"] = {"text": y_title}
    layout["height"] = 110 + row_px * n
    return figure(traces, layout_for(layout, style, title))


def difference_figure(head_diffs: list[float], row_diffs: list[float], row_tokens: list[str], threshold: float,
                      title: str, style: FigureStyle = FigureStyle(), value_name: str = "") -> go.Figure:
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
         "hovertemplate": "%{x}<br>" + (value_name or "max |difference|") + ": %{customdata:.3e}<extra></extra>"},
        {"type": "bar", "x": rows, "y": bars(row_diffs), "customdata": row_diffs, "name": "per query",
         "marker": {"color": color(row_diffs)}, "xaxis": "x2", "yaxis": "y2",
         "hovertemplate": "query %{x}<br>" + (value_name or "max |difference|") + ": %{customdata:.3e}<extra></extra>"},
    ]
    # One range for both, from below the smallest bar to above the threshold, so the
    # threshold line is always in view.
    values = [max(x, floor) for x in (*head_diffs, *row_diffs)] or [floor]
    lo = math.log10(min(min(values), threshold * 1e-3)) - 0.5
    hi = math.log10(max(max(values), threshold)) + 0.7
    axis = {"type": "log", "exponentformat": "power", "title": {"text": value_name or _("max |difference|")},
            "range": [lo, hi]}
    # On a log axis, shapes and annotations take log10 of the value.
    line = lambda ref: {"type": "line", "xref": f"{ref} domain", "x0": 0, "x1": 1, "yref": ref.replace("x", "y"),  # noqa: E731
                        "y0": math.log10(threshold), "y1": math.log10(threshold),
                        "line": {"color": "#d62728", "dash": "dash", "width": 2}}
    layout = {
        # Taller with presenter mode's font, which otherwise squeezed three decades of log axis into a few lines.
        "showlegend": False, "height": 360 + 12 * max(0, style.font_size - 12),
        "xaxis": {"domain": [0, 0.3], "type": "category", "title": {"text": _("head")}},
        "xaxis2": {"domain": [0.4, 1], "type": "category", "title": {"text": _("query token")}, "anchor": "y2"},
        "yaxis": {**axis, "anchor": "x"}, "yaxis2": {**axis, "anchor": "x2", "title": {"text": ""}},
        "shapes": [line("x"), line("x2")],
        "annotations": [{"text": _("threshold {t}").format(t=f"{threshold:.0e}"), "xref": "x2 domain", "x": 1,
                         "yref": "y2",
                         "y": math.log10(threshold), "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                         "font": {"color": "#d62728"}}],
    }
    # The log axis's labels ("10⁻⁶") and its title, beside it: the template's automargin left the title cut.
    return figure(traces, layout_for(layout, style, title, room={"l": margins.left(["10-16"], style.font_size,
                                                                                     title=True)}))
