"""Attention drawn on its own data: an image with a map per head, a spectrogram with a
line per head, a graph with its nodes sized by weight.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.images import image_uri
from attnviz.plots.style import FigureStyle, colorscale, colour_bar, figure, layout_for


def picture_panel(layout: dict, i: int, cols: int, size: tuple[float, float], gap: tuple[float, float],
                  picture: tuple[str, int, int], ranges: tuple[list, list], name: str, axis: dict) -> str:
    """Panel ``i`` of a grid of ``cols``: its axes (``axis``'s settings on both), the picture (its data URI,
    width and height) under them and ``name`` above; its axes' suffix ("" for the first)."""
    (w, h), (gap_x, gap_y), (uri, W, H) = size, gap, picture
    r, c = divmod(i, cols)
    x0, y1 = c * (w + gap_x), 1 - r * (h + gap_y)
    ax = "" if i == 0 else str(i + 1)
    layout[f"xaxis{ax}"] = {"domain": [round(x0, 6), round(min(1, x0 + w), 6)], "range": ranges[0], **axis,
                            "anchor": f"y{ax}"}
    layout[f"yaxis{ax}"] = {"domain": [round(max(0, y1 - h), 6), round(y1, 6)], "range": ranges[1], **axis,
                            "anchor": f"x{ax}", "scaleanchor": f"x{ax}"}
    layout["images"].append({"source": uri, "xref": f"x{ax}", "yref": f"y{ax}", "x": 0, "y": 0, "sizex": W,
                             "sizey": H, "xanchor": "left", "yanchor": "top", "layer": "below", "sizing": "stretch"})
    # A thin frame at the picture's edges: a white picture on a white page vanished without it.
    layout.setdefault("shapes", []).append({"type": "rect", "xref": f"x{ax}", "yref": f"y{ax}", "x0": 0, "y0": 0,
                                            "x1": W, "y1": H, "line": {"color": "#8c8c8c", "width": 1},
                                            "layer": "above"})
    layout["annotations"].append({"text": name, "x": x0 + w / 2, "y": y1, "xref": "paper", "yref": "paper",
                                  "xanchor": "center", "yanchor": "bottom", "showarrow": False})
    return ax


def overlay_figure(image: np.ndarray, panels: list[tuple[str, np.ndarray]], grid: tuple[int, int], patch: int,
                   stride: int, chosen: int, style: FigureStyle = FigureStyle(), *, title: str = "") -> go.Figure:
    """The image once per panel, each panel's (nH, nW) weights over it as a translucent
    heatmap (cell = the patch's stride square at its place), the chosen patch outlined
    (none for ``chosen`` = -1).
    A near-invisible marker at each patch centre makes a click pick that patch."""
    nH, nW = grid
    H, W = image.shape[:2]
    # Three across on a projector: a panel's title at presenter size ("mean over heads") is wider than a
    # quarter of 1024 px and was cut at the figure's edge; 4 or 8 heads and the mean take as many rows.
    cols = min(len(panels), 3 if style.presenting else 4)
    rows = math.ceil(len(panels) / cols)
    gap_x, gap_y = 0.04, 0.1 / max(1, rows - 1) if rows > 1 else 0.0
    w = (1 - gap_x * (cols - 1)) / cols
    h = (1 - gap_y * (rows - 1)) / rows
    uri = image_uri(image)
    # Spread over many patches, weights are small: the scale runs to the largest one shown.
    top = max(float(np.max(z)) for _name, z in panels) or 1.0
    layout: dict = {"images": [], "annotations": [], "shapes": [], "showlegend": False,
                    "coloraxis": {"colorscale": colorscale(style.colors), "cmin": 0, "cmax": top,
                                  "colorbar": colour_bar(f"{_('weight')}<br>(0–{top:.3f})")},
                    "clickmode": "event+select", "height": 300 * rows + 100}
    traces = []
    cx = [c * stride + patch / 2 for c in range(nW)]
    cy = [r * stride + patch / 2 for r in range(nH)]
    for i, (name, z) in enumerate(panels):
        ax = picture_panel(layout, i, cols, (w, h), (gap_x, gap_y), (uri, W, H), ([0, W], [H, 0]), name,
                           {"showticklabels": False, "showgrid": False, "zeroline": False})
        traces.append({"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": cx, "y": cy, "opacity": 0.6,
                       "coloraxis": "coloraxis", "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                       "hovertemplate": f"{_('weight')}: %{{z:.4f}}<extra></extra>"})
        pr, pc = divmod(chosen, nW)
        if chosen >= 0:  # -1: a token that is no patch ([CLS]) is followed
            layout["shapes"].append({"type": "rect", "xref": f"x{ax}", "yref": f"y{ax}", "x0": pc * stride,
                                     "x1": pc * stride + patch, "y0": pr * stride, "y1": pr * stride + patch,
                                     "line": {"color": "#ff2d55", "width": 2}})
        traces.append({"type": "scatter", "mode": "markers", "x": [x for _y in cy for x in cx],
                       "y": [y for y in cy for _x in cx], "customdata": list(range(nH * nW)),
                       "marker": {"size": 10, "opacity": 0.01, "color": "#000000"}, "xaxis": f"x{ax}",
                       "yaxis": f"y{ax}",
                       "hovertemplate": _("patch {n}: click to follow it").format(n="%{customdata}")
                                        + "<extra></extra>"})
    return figure(traces, layout_for(layout, style, title))


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
              "yaxis": {"domain": [0, 0.38], "title": {"text": _("weight")},  # the title names the frame: a
                        # longer axis title outgrows this short lower panel at a projector's font
                        "rangemode": "tozero"},
              # the unit alone: "frequency (Hz)" ran into the lower panel's title on a projector
              "yaxis2": {"domain": [0.45, 1], "title": {"text": "Hz"}, "anchor": "x"},
              "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": chosen, "x1": chosen, "y0": 0, "y1": 1,
                          "line": {"color": "#2a9d8f", "width": 2, "dash": "dot"}}]}
    return figure(traces, layout_for(layout, style, _("spectrogram, and what frame {n} ({time}) attends to").format(
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
                   "textfont": {"color": [_readable_on(style.colors, float(w)) for w in weights]},
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
                            "colorbar": colour_bar(_("weight"))}}
    return figure(traces, layout_for(layout, style, _("what node {n} attends to (mean over heads)").format(n=chosen)))


def _readable_on(scale: str, value: float) -> str:
    """Near-black or white, whichever contrasts more (WCAG's contrast ratio) with the colour that
    ``scale`` gives ``value`` (0–1): a node's number on a dark node (Viridis's low end) was dark on
    dark purple."""
    from plotly.colors import sample_colorscale, unlabel_rgb

    fill = relative_luminance(unlabel_rgb(sample_colorscale(colorscale(scale), [min(1.0, max(0.0, value))],
                                                            colortype="rgb")[0]))
    dark, light = relative_luminance((17, 17, 17)), 1.0
    return "#111111" if (fill + 0.05) / (dark + 0.05) >= (light + 0.05) / (fill + 0.05) else "#ffffff"


def relative_luminance(rgb) -> float:
    """WCAG 2's relative luminance of an sRGB colour (0–255 channels)."""
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b
