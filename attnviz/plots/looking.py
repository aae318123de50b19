"""Where a vision-language model's text looks in a picture: the picture under a translucent map of one text
token's attention over its patches (each patch drawn over its own box in the picture's pixels, so that a resized,
cropped or padded picture's map lands where the model looked), and the layer × head map of how much of that
token's attention goes to the picture at all."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.images import image_uri
from attnviz.plots.modality import picture_panel
from attnviz.plots.style import (
    FigureStyle,
    colorscale,
    colour_bar,
    figure,
    layout_for,
    short_bar_ticks,
    title_line_px,
    wrap_title,
)


def box_edges(boxes: np.ndarray) -> tuple[list[float], list[float]]:
    """(x edges, y edges) of a grid of boxes (rows, cols, 4) of (left, top, right, bottom): cols + 1 and rows + 1
    values, the boxes being a grid's (every row's columns at the same x, every column's rows at the same y)."""
    xs = [float(b) for b in boxes[0, :, 0]] + [float(boxes[0, -1, 2])]
    ys = [float(b) for b in boxes[:, 0, 1]] + [float(boxes[-1, 0, 3])]
    return xs, ys


def see_through(scale: list, most: float = 0.8) -> list:
    """``scale``'s stops with their alpha rising from 0 (a patch of no weight leaves the picture as it is) to
    ``most``: over a picture, an opaque scale's low end hid it where the model did not look."""
    from plotly.colors import hex_to_rgb, unlabel_rgb

    out = []
    for pos, colour in scale:
        r, g, b = hex_to_rgb(colour) if colour.startswith("#") else unlabel_rgb(colour)
        out.append([pos, f"rgba({int(r)},{int(g)},{int(b)},{round(most * float(pos) ** 0.5, 3)})"])
    return out


def picture_overlay(picture: np.ndarray, panels: list[tuple[str, np.ndarray]], boxes: np.ndarray,
                    style: FigureStyle = FigureStyle(), *, title: str = "", marked: np.ndarray | None = None,
                    top: float | None = None) -> go.Figure:
    """``picture`` (H, W, 3) uint8 once per panel, each panel's (rows, cols) weights over it as a translucent
    heatmap whose cells are ``boxes`` (rows, cols, 4). The colour scale runs from 0 to ``top``, by default the
    largest weight shown (spread over hundreds of patches, weights are small); a weight above it is drawn at the
    scale's end. ``marked`` (rows, cols) bool: patches outlined in every panel (visual sinks)."""
    H, W = picture.shape[:2]
    xs, ys = box_edges(boxes)
    x_range = [min(0.0, xs[0]), max(float(W), xs[-1])]  # a padded picture's boxes reach past its edges
    y_range = [max(float(H), ys[-1]), min(0.0, ys[0])]  # downwards, as the picture reads
    cols = min(len(panels), 3 if style.presenting else 4)
    rows = math.ceil(len(panels) / cols)
    gap_x, gap_y = 0.04, (0.12 / (rows - 1) if rows > 1 else 0.0)
    w, h = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    top = (max(float(np.max(z)) for _name, z in panels) if top is None else float(top)) or 1.0
    uri = image_uri(picture.astype(np.float32) / 255)
    aspect = (y_range[0] - y_range[1]) / max(1e-9, x_range[1] - x_range[0])
    panel_px = 880 * w * aspect  # a panel's height on a chart about 1,000 px wide, its colour bar beside
    layout: dict = {"images": [], "annotations": [], "showlegend": False,
                    "coloraxis": {"colorscale": see_through(colorscale(style.colors)), "cmin": 0, "cmax": top,
                                  "colorbar": colour_bar(f"{_('weight')}<br>(0–{top:.3f})")},
                    "height": round(min(panel_px, 600) * rows / (1 - gap_y * (rows - 1)) + 40 * rows + 90)}
    traces = []
    for i, (name, z) in enumerate(panels):
        ax = picture_panel(layout, i, cols, (w, h), (gap_x, gap_y), (uri, W, H), (x_range, y_range), name,
                           {"visible": False})
        traces.append({"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": xs, "y": ys,
                       "coloraxis": "coloraxis", "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                       "hovertemplate": f"{_('weight')}: %{{z:.4f}}<extra>{name}</extra>"})
        for r, c in zip(*np.nonzero(marked), strict=True) if marked is not None else ():
            left, upper, right, lower = (float(v) for v in boxes[r, c])
            layout.setdefault("shapes", []).append({"type": "rect", "xref": f"x{ax}", "yref": f"y{ax}", "x0": left,
                                                    "x1": right, "y0": upper, "y1": lower,
                                                    "line": {"color": "#ff2d55", "width": 2, "dash": "dot"}})
    return figure(traces, layout_for(layout, style, title))


def share_map(share: np.ndarray, marked: list[tuple[int, int]], style: FigureStyle = FigureStyle(), *,
              title: str = "") -> go.Figure:
    """(layers, heads) shares of one token's attention on the picture, layer 0 at the top; ``marked`` heads
    (the localization heads) outlined, numbered in their rank."""
    L, H = share.shape
    # A row a layer, and a plot tall enough for its colour bar's title and ticks (eleven font heights) under the
    # title's lines: a model of two layers under a four-line title left the bar shorter than its two tick labels on a
    # projector.
    above = 100 + (wrap_title(title, style.font_size).count("<br>") + 1) * title_line_px(style.font_size)
    height = max(320, 22 * L + 160, above + 11 * style.font_size)
    heat = {"type": "heatmap", "z": np.asarray(share, dtype=np.float32), "x": list(range(H)), "y": list(range(L)),
            "zmin": 0.0, "zmax": 1.0, "colorscale": colorscale(style.colors),
            "colorbar": colour_bar(_("share on<br>the picture"), **short_bar_ticks(height - above, style.font_size)),
            "hovertemplate": _("layer {l}, head {h}").format(l="%{y}", h="%{x}") + ": %{z:.3f}<extra></extra>"}
    shapes = [{"type": "rect", "x0": h - 0.5, "x1": h + 0.5, "y0": layer - 0.5, "y1": layer + 0.5,
               "line": {"color": "#ff2d55", "width": 3}} for layer, h in marked]
    notes = [{"x": h, "y": layer, "text": str(i + 1), "showarrow": False, "font": {"color": "#ffffff"}}
             for i, (layer, h) in enumerate(marked)]
    # Heatmaps cannot be selected in Plotly; a near-invisible marker at each cell's centre can (a click opens the
    # head: customdata is layer × H + head).
    # ("skip" as its hover would drop the click too: its hover names the cell, as the heatmap's does.)
    clicks = {"type": "scatter", "mode": "markers", "showlegend": False,
              "x": [h for _layer in range(L) for h in range(H)], "y": [layer for layer in range(L) for _h in range(H)],
              "customdata": list(range(L * H)), "text": [f"{float(v):.3f}" for v in np.asarray(share).ravel()],
              "marker": {"size": 12, "opacity": 0.01, "color": "#000000"},
              "hovertemplate": _("layer {l}, head {h}").format(l="%{y}", h="%{x}") + ": %{text}<br>"
                               + _("click to open its overlay") + "<extra></extra>"}
    layout = {"xaxis": {"title": {"text": _("head")}, "dtick": 1}, "shapes": shapes, "annotations": notes,
              "yaxis": {"title": {"text": _("layer")}, "autorange": "reversed", "dtick": 1},
              "height": height, "clickmode": "event+select"}
    return figure([heat, clicks], layout_for(layout, style, title))
