"""attnviz.notebook: normalising attention from anywhere, the views, the BertViz and
CircuitsVis entry points, offline HTML, and attention files (never pickle)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import notebook as nb
from attnviz.analysis.heads import rollout
from attnviz.plots import DIVERGING, FigureStyle, colorscale, plain_label
from tests.support.apphelp import z  # figures decoded as a browser gets them (base64 "bdata")
from tests.support.weights import LAYERS, TOKENS, H, L, W, as_dict, blocks_of, weights

# -- show --------------------------------------------------------------------------------

def test_the_grid_shows_every_head_of_the_layer_with_escaped_tokens():
    tokens = ["<b>x</b>", "cat", "cat", "a&b"]
    fig = as_dict(nb.show(W, tokens, "grid", layer=1))
    (trace,) = [t for t in fig["data"] if t["type"] == "heatmap"]
    got = blocks_of(trace)
    assert len(got) == H
    for h, b in enumerate(got):
        np.testing.assert_array_equal(b["z"], W[1, h])
        assert [plain_label(s) for s in b["y"]] == ["&lt;b&gt;x&lt;/b&gt;", "cat", "cat", "a&amp;b"]
    assert fig["layout"]["coloraxis"]["colorscale"] == colorscale(FigureStyle().colors)
    assert "layer 1" in fig["layout"]["title"]["text"]


def test_the_head_model_and_query_views_show_the_input():
    head = as_dict(nb.show(W, TOKENS, "head", layer=1, head=2))
    np.testing.assert_array_equal(z(head["data"][0]), W[1, 2])
    model = as_dict(nb.show(W, TOKENS, "model"))
    rows = [t for t in model["data"] if t["type"] == "heatmap"]  # a trace per layer, its blocks numbered by head
    assert len(rows) == LAYERS and [t["hovertemplate"].split(" · ")[0] for t in rows] == [
        f"L{layer}" for layer in range(LAYERS)]
    for layer, trace in enumerate(rows):
        got = blocks_of(trace)
        assert len(got) == H
        for h, b in enumerate(got):
            np.testing.assert_array_equal(b["z"], W[layer, h])
    query = as_dict(nb.show(W, TOKENS, "query", layer=1))  # query=-1: the last
    assert len(query["data"]) == H
    for h, t in enumerate(query["data"]):
        np.testing.assert_allclose(z({"z": t["y"]}), W[1, h, L - 1], rtol=1e-6)


def test_the_analysis_view_and_table_measure_known_heads():
    known = np.stack([np.full((1, L, L), 1 / L), np.eye(L)[None]]).astype(np.float32)  # (layers=2, H=1, L, L)
    rows = nb.head_table(known, TOKENS)
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (1, 0)]
    assert rows[0]["entropy"] == pytest.approx(np.log(L)) and rows[1]["entropy"] == pytest.approx(0.0, abs=1e-9)
    assert rows[1]["distance"] == pytest.approx(0.0) and rows[1]["self"] == pytest.approx(1.0)
    fig = as_dict(nb.show(known, TOKENS, "analysis"))
    entropy, distance = (z(t) for t in fig["data"])
    np.testing.assert_allclose(entropy[:, 0], [np.log(L), 0.0], atol=1e-6)
    np.testing.assert_allclose(distance[:, 0], [rows[0]["distance"], 0.0], atol=1e-6)
    cross = nb.head_table(weights(q=2, k=3), ["a", "b"], source_tokens=["x", "y", "z"])
    assert len(cross) == LAYERS * H and set(cross[0]) == {"layer", "head", "entropy", "distance"}


def test_the_rollout_view_is_the_analysis_rollout():
    fig = as_dict(nb.show(W, TOKENS, "rollout"))
    np.testing.assert_allclose(z(fig["data"][0]), rollout(torch.from_numpy(W)).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="self-attention"):
        nb.show(weights(q=2, k=3), ["a", "b"], "rollout", source_tokens=["x", "y", "z"])


def test_signed_values_use_the_diverging_scale_centred_on_zero():
    signed = W - 0.3
    grid = as_dict(nb.show(signed, TOKENS, "grid", signed=True))["layout"]["coloraxis"]
    assert grid["colorscale"] == colorscale(DIVERGING) and grid["cmin"] == -grid["cmax"] > -1
    head = as_dict(nb.show(signed, TOKENS, "head", signed=True))["data"][0]
    assert head["colorscale"] == colorscale(DIVERGING) and head["zmin"] == -head["zmax"] and head["zmid"] == 0
    model = as_dict(nb.show(signed, TOKENS, "model", signed=True))["layout"]["coloraxis"]
    assert model["colorscale"] == colorscale(DIVERGING) and model["cmin"] == -model["cmax"]
    query = as_dict(nb.show(signed, TOKENS, "query", signed=True))["layout"]["yaxis"]["range"]
    assert query[0] == -query[1] < 0
    with pytest.raises(ValueError, match="signed values"):
        nb.show(signed, TOKENS, "analysis", signed=True)


def test_an_unknown_view_or_index_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unknown view 'heads'; the views are: grid, head, model, query, analysis"):
        nb.show(W, TOKENS, "heads")
    with pytest.raises(ValueError, match=r"layer 2 does not exist: there are 2 layers \(0–1\)"):
        nb.show(W, TOKENS, layer=2)
    with pytest.raises(ValueError, match="head 3 does not exist"):
        nb.show(W, TOKENS, "head", head=3)
