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


def test_with_a_method_the_whole_graph_is_drawn_from_the_attribution(model):
    """Each of the top edges by |score| is one line from its sender's node to its receiver's, in the colour of the
    input it reaches, as wide as its share of the largest, solid for a positive score and dotted for a negative
    one; a diamond on each reports its name."""
    from attnviz.plots.edgescores import COLOURS as EDGE_COLOURS
    from attnviz.plots.edgescores import edge_kind, node_place

    e = attnviz.edge_attribution(model, CLEAN, CORRUPTED, answer="12", wrong="14", method="eap-ig-inputs", steps=4)
    fig = attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", wrong="14", method="eap-ig-inputs", steps=4,
                               top=6)
    lines = [t for t in fig.data if t.mode == "lines" and t.x[0] is not None]  # not the legend's sign entries
    top = e.top(6)
    big = max(abs(s) for _n, s in top)
    assert len(lines) == 6 and any(s < 0 for _n, s in top)
    for trace, (name, score) in zip(lines, top, strict=True):
        sender, receiver = name.split("->")
        assert list(zip(trace.x, trace.y, strict=True)) == [node_place(sender, 3, 2), node_place(receiver, 3, 2)]
        assert trace.line.color == EDGE_COLOURS[edge_kind(name)]
        assert trace.line.width == pytest.approx(max(1.0, WIDEST * abs(score) / big))
        assert trace.line.dash == ("solid" if score >= 0 else "dot")
    marks = next(t for t in fig.data if t.name == "edges")
    assert [d[0] for d in marks.customdata] == [n for n, _s in top]
    assert "the 6 edges of largest |score|<br>of " in fig.layout.title.text
    for top in (0, 201, 2.5):
        with pytest.raises(ValueError, match="top must be a whole number from 1 to 200"):
            attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", method="eap", top=top)
    with pytest.raises(ValueError, match="method must be 'eap'"):
        attnviz.circuit_view(model, CLEAN, CORRUPTED, answer="12", method="acdc")


def test_node_places_and_edge_kinds():
    from attnviz.plots.edgescores import edge_kind, node_place

    assert node_place("a2.h1", 3, 4) == (2, 1) and node_place("input", 3, 4) == (-0.8, 1.5)
    assert node_place("logits", 3, 4) == (2.8, 1.5) and node_place("m1", 3, 4) == (1.45, 3.8)
    assert [edge_kind(n) for n in ("input->a0.h1<q>", "a0.h0->a1.h1<v>", "a0.h0->m0", "m1->logits")] == \
        ["q", "v", "mlp", "logits"]
    with pytest.raises(ValueError, match="is not a node of the graph"):
        node_place("b0", 3, 4)
