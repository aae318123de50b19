"""The circuit as a graph from a notebook (attnviz.circuit_view, attnviz.plots.circuit): every path
past the threshold is one edge of its component's colour, as wide as its share; composition
scores as dashed edges; the nodes are the heads patched; a one-layer model says it has no circuit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.models.tiny import AttentionOnly
from attnviz.plots.circuit import COLOURS, WIDEST, edges

CLEAN, CORRUPTED = "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9"


@pytest.fixture(scope="module")
def model():
    # Sharper attention and larger writes than at initialisation (paths that move the answer), well inside
    # float32's range: saturated softmaxes make paths equal up to rounding, which differs by machine.
    m = AttentionOnly(vocab=32, length=19, layers=3, heads=2, d_model=32, seed=0).eval()
    with torch.no_grad():
        for layer in m.layers:
            layer.in_proj_weight.mul_(1.5)
            layer.out_proj.weight.mul_(1.5)
    return m


def test_every_path_past_the_threshold_is_one_edge_of_its_components_colour(model):
    found = attnviz.circuit(model, CLEAN, CORRUPTED, answer="12", wrong="14")
    fig = attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", wrong="14", threshold=0.05)
    want = edges(found.paths, 0.05)
    drawn = [t for t in fig.data if t.name and t.name.startswith("path into")]
    assert len(drawn) == len(want) > 0
    for trace, (c, s, h, r, g, share) in zip(drawn, want, strict=True):
        assert (list(trace.x), list(trace.y)) == ([s, r], [h, g]) and trace.line.color == COLOURS[c]
        assert trace.line.width == pytest.approx(max(1.0, WIDEST * min(1.0, abs(share))))
        assert abs(found.paths[c][s, h, r, g]) >= 0.05 and r > s
    nodes = fig.data[-1]
    np.testing.assert_allclose(np.asarray(nodes.marker.color, dtype=float), found.heads.reshape(-1))
    scores = attnviz.composition_scores(model, "k").numpy()
    dashed = fig.data[0]
    assert dashed.line.dash == "dash" and list(dashed.x).count(None) == int((scores >= 0.2).sum())
    fewer = attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", wrong="14", threshold=0.5, composition=None)
    assert len([t for t in fewer.data if t.name and t.name.startswith("path into")]) == len(edges(found.paths, 0.5))


def test_a_one_layer_model_says_it_has_no_later_head_to_compose_with():
    one = AttentionOnly(vocab=32, length=19, layers=1, heads=2, d_model=32, seed=3).eval()
    fig = attnviz.circuit_view(one, CLEAN, CORRUPTED, answer="12", wrong="14", composition=None)
    assert "no later head to compose with" in fig.layout.title.text and len(fig.data) == 1


def test_a_threshold_outside_0_1_is_refused(model):
    with pytest.raises(ValueError, match="threshold must be between 0 and 1"):
        attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", threshold=2)
