"""attnviz.plots.modality: the graph's node numbers read on their node's colour; the image's panel titles fit
their panels on a projector."""

import numpy as np
import pytest

from attnviz.plots import margins
from attnviz.plots.modality import graph_figure, overlay_figure, relative_luminance
from attnviz.plots.style import FigureStyle, colorscale, presenting


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


@pytest.mark.parametrize("heads", [4, 8])
@pytest.mark.parametrize("font_size", [12, 24])
def test_every_panel_title_stays_in_the_figure_and_off_its_neighbours(heads, font_size):
    """Image patches' panels are titled over their centre: a title wider than four panels across
    allow ran past the figure's left edge on a 1024 px projector ("ean over heads")."""
    panels = [(f"head {h}", np.full((2, 2), 0.25)) for h in range(heads)] + [("mean over heads", np.full((2, 2), 0.25))]
    fig = overlay_figure(np.zeros((16, 16, 3), dtype=np.uint8), panels, (2, 2), 8, 8, 0,
                         FigureStyle(font_size=font_size))
    # The page's content column (a 1024 px projector without the sidebar; a 1366 px laptop with it)
    # less the margins and the colour bar (its title's widest line), which takes its room out of the plot.
    m = fig.layout.margin
    width = (864 if presenting(font_size) else 1000) - m.l - m.r - margins.colorbar("(0–0.250)", font_size, 0, 0.25)
    domains = sorted({tuple(ax["domain"]) for name, ax in fig.layout.to_plotly_json().items()
                      if name.startswith("xaxis")})
    pitch = (domains[1][0] - domains[0][0]) * width  # one panel and its gap
    titles = [a for a in fig.layout.annotations if a.text in dict(panels)]
    assert len(titles) == len(panels)
    for a in titles:
        half = margins.text_em(a.text) * font_size / 2
        assert a.x * width - half >= -m.l, (a.text, "past the left edge")
        assert 2 * half <= pitch, (a.text, "into its neighbour's title")
