"""Long texts drawn as images (one pixel per weight), with a hoverable close-up.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots.data import HeatmapData
from attnviz.plots.heatmaps import heatmap_trace
from attnviz.plots.style import FigureStyle, colorscale, colour_bar, figure, layout_for, rows_down

# Past this many cells, a full-detail view is drawn as an image (one pixel per cell, PNG)
# rather than a heatmap: 2048 × 2048 float32 would be 22 MB of JSON, the PNG a few MB.
IMAGE_ABOVE_CELLS = 512 * 512


def rgb_table(scale: list, n: int = 256) -> np.ndarray:
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

    lut = rgb_table(scale)  # (256, 3)
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
           "colorbar": colour_bar(d.value_name or _("weight"))}
    layout = {"xaxis": {"title": {"text": _("key position")}, "side": "top", "range": [-0.5, cols - 0.5],
                        "showgrid": False},
              "yaxis": {"title": {"text": _("query position")}, "range": [rows - 0.5, -0.5], "showgrid": False,
                        "scaleanchor": "x"},
              "height": 760}
    title = _("{title}: all {rows}×{cols} cells, one pixel each (zoom in, or read exact values below)").format(
        title=d.title, rows=rows, cols=cols)
    return figure([image, bar], layout_for(layout, style, title, top_axis=True))


def region_figure(d: HeatmapData, style: FigureStyle = FigureStyle()) -> go.Figure:
    """The close-up as a hoverable heatmap with exact (6-decimal) weights."""
    trace = heatmap_trace(d, style, shared=False)
    trace["hovertemplate"] = "query: %{y}<br>key: %{x}<br>weight: %{z:.6f}<extra></extra>"
    layout = {"yaxis": {**rows_down(len(d.y)), "type": "category", "title": {"text": "query"}},
              "xaxis": {"type": "category", "side": "top", "title": {"text": "key"}}, "height": 760}
    return figure([trace], layout_for(layout, style, d.title, top_axis=True))


def image_uri(image: np.ndarray) -> str:
    """An (H, W, 3) float image as a PNG data URI."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8), "RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
