"""The attribution graph's room (attnviz.plots.edgescores) at 2, 12 and 30 layers, on a laptop and a projector:
head rows far enough apart for their labels, and every edge's diamond a diamond and a gap from every other, off
every node's circle and its label, measured in the figure's own pixels (its plot's height and axis ranges, and
the width a full-width chart has)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.plots.edgescores import DIAMOND_PX, PLOT_WIDE_PX, edge_graph_figure
from attnviz.plots.style import FigureStyle


def edges(layers: int, heads: int, n: int, seed: int = 0) -> list[tuple[str, float]]:
    """``n`` edges a circuit would score: into later heads' q, k and v, into the logits, into MLPs."""
    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    while len(out) < n:
        s_layer = int(rng.integers(0, layers))
        sender = "input" if rng.random() < 0.15 else f"a{s_layer}.h{int(rng.integers(0, heads))}"
        kind = rng.random()
        if kind < 0.2 or s_layer == layers - 1:
            receiver = "logits"
        elif kind < 0.35:
            receiver = f"m{s_layer if sender != 'input' else 0}"
        else:
            r_layer = int(rng.integers(0 if sender == "input" else s_layer + 1, layers))
            receiver = f"a{r_layer}.h{int(rng.integers(0, heads))}<{'qkv'[int(rng.integers(0, 3))]}>"
        out[f"{sender}->{receiver}"] = float(rng.normal())
    return sorted(out.items(), key=lambda e: -abs(e[1]))


def pixels(fig) -> tuple[float, float, float]:
    """px per x unit, px per y unit (from the figure's plot height and ranges), and the plot's height."""
    lay = fig.layout
    plot = lay.height - lay.margin.t - lay.margin.b
    x0, x1 = lay.xaxis.range
    y0, y1 = lay.yaxis.range
    return PLOT_WIDE_PX / (x1 - x0 - 0.1), plot / abs(y0 - y1), plot


@pytest.mark.parametrize("layers,heads,top", [(2, 2, 29), (12, 4, 40), (12, 12, 30), (30, 9, 30)])
@pytest.mark.parametrize("font", [12, 22])
def test_rows_hold_their_labels_and_no_diamond_covers_a_label_or_another(layers, heads, top, font):
    fig = edge_graph_figure(edges(layers, heads, top), layers, heads, True, "the graph", FigureStyle(font_size=font))
    sx, sy, plot = pixels(fig)
    marks = next(t for t in fig.data if t.name == "edges")
    nodes = next(t for t in fig.data if t.name == "nodes")
    labelled = "text" in nodes.mode  # the nodes' names drawn above them (else in the hover only)
    assert sy >= (60 if labelled else 30) or plot >= (430 if font > 14 else 620)  # a row's room, or a screen's
    if labelled:
        assert sy >= font * 2.5  # a label, its node and room to spare between two rows
    d = np.stack([np.asarray(marks.x) * sx, np.asarray(marks.y) * sy], 1)  # (edges, 2) px
    gaps = np.hypot(*(d[:, None] - d[None]).transpose(2, 0, 1)) + np.eye(len(d)) * 1e9
    crowded = int((gaps.min(1) < DIAMOND_PX).sum())
    assert crowded <= len(d) // 10, f"{crowded} of {len(d)} diamonds on another"
    for x, y, text in zip(nodes.x, nodes.y, nodes.text, strict=True):
        cx, cy = x * sx, y * sy
        near = np.maximum(np.abs(d[:, 0] - cx), np.abs(d[:, 1] - cy))
        assert near.min() >= 7, f"a diamond on node {text or (x, y)}"
        if labelled and text:  # its label, centred above it
            w, h = 0.32 * font * len(text) + 2, font / 2 + 2
            inside = (np.abs(d[:, 0] - cx) < w) & (np.abs(d[:, 1] - (cy - 6 - font / 2)) < h)
            assert not inside.any(), f"a diamond on the label {text}"
