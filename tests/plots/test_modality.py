"""attnviz.plots.modality: the graph's node numbers read on their node's colour."""

import numpy as np
import pytest

from attnviz.plots.modality import graph_figure, relative_luminance
from attnviz.plots.style import FigureStyle, colorscale


def _luminance(hex_or_rgb: str) -> float:
    from plotly.colors import hex_to_rgb, unlabel_rgb

    rgb = hex_to_rgb(hex_or_rgb) if hex_or_rgb.startswith("#") else unlabel_rgb(hex_or_rgb)
    return relative_luminance(rgb)


@pytest.mark.parametrize("scale", ["Viridis", "Magma", "Greys", "Hot"])
def test_every_node_number_contrasts_with_its_node(scale):
    from plotly.colors import sample_colorscale

    weights = np.linspace(0, 1, 9)
    fig = graph_figure(9, [(i, i + 1) for i in range(8)], weights, 0, 0, FigureStyle(colors=scale))
    nodes = fig.data[-1]
    for w, text in zip(weights, nodes.textfont.color, strict=True):
        fill = sample_colorscale(colorscale(scale), [float(w)], colortype="rgb")[0]
        hi, lo = sorted((_luminance(fill), _luminance(text)), reverse=True)
        assert (hi + 0.05) / (lo + 0.05) >= 4.5, (scale, w, fill, text)  # WCAG AA for text
