"""attnviz.neuron_view: BertViz's neuron view from a notebook, offline, for a run, a model
name or folder, or a model object."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz import AttentionConfig, compute
from attnviz.notebook.page import Rendered

from .apphelp import z
from .hfmodels import save as _save


def _heatmaps(fig):
    return [t for t in fig.to_dict()["data"] if t["type"] == "heatmap"]


def test_a_run_is_drawn_with_q_k_their_product_its_sum_and_the_weight():
    r = compute(AttentionConfig(text="the cat sat on the mat", num_heads=4, d_model=16, mask="causal"))
    out = attnviz.neuron_view(r, head=2, query=3, html_action="return", display_mode="light")
    assert isinstance(out, Rendered) and len(out.figures) == 1 and "<div" in out.data
    q, k, product, sums, weight = _heatmaps(out.figure)
    assert np.allclose(z(product), z(q) * z(k), atol=1e-6)
    assert np.allclose(z(product).sum(1), z(sums)[:, 0], atol=1e-5)
    assert np.allclose(z(weight)[:, 0], r.weights[0, 2, 3].numpy(), atol=1e-6)
    assert weight["text"][4] == ["masked"]  # causal: query 3 cannot see key 4
    assert "query “on” (3)" in out.figure.layout.title.text


def test_a_model_name_or_object_is_run_on_sentence_a_and_every_query_can_be_drawn():
    from attnviz.models.random import RandomLayer

    by_name = attnviz.neuron_view("random", "the cat sat", query="all", html_action="return")
    assert len(by_name.figures) == 3
    by_object = attnviz.neuron_view(RandomLayer(64, 4), "the cat sat", head=3, html_action="return")
    same = compute(AttentionConfig(text="the cat sat", d_model=64, num_heads=4, mask="none"))
    assert np.allclose(z(_heatmaps(by_object.figure)[4])[:, 0], same.weights[0, 3, 2].numpy(), atol=1e-6)


def test_bertviz_arguments_that_do_not_apply_are_refused_with_a_message():
    with pytest.raises(ValueError, match="sentence_b"):
        attnviz.neuron_view("random", "the cat", "sat down", html_action="return")
    with pytest.raises(ValueError, match="display_mode"):
        attnviz.neuron_view("random", "the cat", display_mode="blue", html_action="return")
    with pytest.raises(ValueError, match="html_action"):
        attnviz.neuron_view("random", "the cat", html_action="show")
    with pytest.raises(ValueError, match="head 9 does not exist"):
        attnviz.neuron_view("random", "the cat", head=9, html_action="return")
    with pytest.raises(ValueError, match="sentence_a is required"):
        attnviz.neuron_view("random", html_action="return")


def test_a_folder_is_run_offline_and_one_without_plain_q_k_says_why(tmp_path):
    pytest.importorskip("transformers")
    gpt2, _m, _f = _save(tmp_path, "gpt2")
    out = attnviz.neuron_view(str(gpt2), "the cat sat on the mat", layer=1, head=0, model_type="gpt2",
                              tokenizer=object(), html_action="return")
    s = np.where(np.array([t != ["masked"] for t in _heatmaps(out.figure)[4]["text"]]).ravel(),
                 z(_heatmaps(out.figure)[3])[:, 1], -np.inf)
    soft = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    assert np.allclose(soft, z(_heatmaps(out.figure)[4])[:, 0], atol=1e-3)  # the scaled scores' softmax: its weights
    llama, _m, _f = _save(tmp_path, "llama")
    with pytest.raises(ValueError, match="rotary positions"):
        attnviz.neuron_view(str(llama), "the cat sat", html_action="return")
