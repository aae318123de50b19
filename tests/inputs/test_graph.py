"""attnviz.inputs.graph: the adjacency mask, and edge lists parsed with what is wrong named."""

from __future__ import annotations

import pytest
import torch

from attnviz import inputs as I
from attnviz.models.random import RandomLayer
from attnviz.run.run import run


def test_the_graph_mask_is_the_adjacency_plus_the_identity():
    n, edges, notes = I.parse_edges("0-1, 1-2\n3 1")
    assert n == 4 and edges == [(0, 1), (1, 2), (1, 3)] and not notes
    g = I.graph_input(n, edges, 16, 0, "adjacency")
    expected = torch.eye(4, dtype=torch.bool)
    for a, b in edges:
        expected[a, b] = expected[b, a] = True
    assert torch.equal(g.mask, expected)
    assert I.graph_input(n, edges, 16, 0, "none").mask is None
    r = run(g, RandomLayer(16, 2), keep_steps=True)
    assert r.mask_name == "adjacency"
    assert (r.weights[0][:, ~expected] == 0).all()  # non-neighbours get exactly nothing


@pytest.mark.parametrize("text, words", [("0-1, 1-1000000000", "names node 1000000000"),
                                         ("0-1\nfoo", "Edge 2 .* is not of the form"), ("", "empty")])
def test_bad_edge_lists(text, words):
    with pytest.raises(ValueError, match=words):
        I.parse_edges(text)


def test_self_loops_and_repeats_are_dropped_with_a_note():
    n, edges, notes = I.parse_edges("0-1, 1-1, 1-0, 2-1")
    assert edges == [(0, 1), (1, 2)] and any("Self-loop 1-1" in x for x in notes) and any("twice" in x for x in notes)
