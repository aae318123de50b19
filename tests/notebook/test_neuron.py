"""attnviz.neuron_view: BertViz's neuron view from a notebook, offline, for a run, a model
name or folder, or a model object."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz import AttentionConfig, compute
from attnviz.plots.html import Rendered
from tests.support.apphelp import z
from tests.support.hfmodels import save as _save


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


def _softmax_of_scores(fig, column: int):
    """softmax of the score column ``column`` over the keys the figure does not say are masked."""
    visible = np.array([t != ["masked"] for t in _heatmaps(fig)[4]["text"]]).ravel()
    s = np.where(visible, z(_heatmaps(fig)[3])[:, column], -np.inf)
    return np.exp(s - s.max()) / np.exp(s - s.max()).sum()


def test_a_folder_is_run_offline_and_a_rotary_one_shows_its_rotated_q_and_k(tmp_path):
    pytest.importorskip("transformers")
    gpt2, _m, _f = _save(tmp_path, "gpt2")
    out = attnviz.neuron_view(str(gpt2), "the cat sat on the mat", layer=1, head=0, model_type="gpt2",
                              tokenizer=object(), html_action="return")
    assert np.allclose(_softmax_of_scores(out.figure, 1), z(_heatmaps(out.figure)[4])[:, 0], atol=1e-3)
    llama, _m, _f = _save(tmp_path, "llama")
    out = attnviz.neuron_view(str(llama), "the cat sat on the mat", layer=1, head=3, query="all",
                              html_action="return")
    r = compute(AttentionConfig(text="the cat sat on the mat", model=str(llama), layer=1))
    assert len(out.figures) == r.lengths[0]
    for i, fig in enumerate(out.figures):
        q, k, product, sums, weight = _heatmaps(fig)
        assert list(sums["x"]) == ["Σ q∘k = q·k", "scaled"]
        assert np.allclose(z(product).sum(1), z(sums)[:, 0], atol=1e-5)  # the row of q∘k sums to q·k
        assert np.allclose(z(product), z(q) * z(k), atol=1e-6)
        assert np.allclose(_softmax_of_scores(fig, 1), r.weights[0, 3, i, :len(weight["y"])].numpy(), atol=1e-5)
        assert "rotated by position (rotary)" in fig.layout.title.text


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_a_t5_run_shows_q_k_its_position_bias_and_their_sum(tmp_path, stack):
    pytest.importorskip("transformers")
    t5, _m, _f = _save(tmp_path, "t5")
    r = compute(AttentionConfig(text="the cat sat on the mat", model=str(t5), layer=1, stack=stack))
    out = attnviz.neuron_view(r, head=2, query="all", html_action="return")
    for i, fig in enumerate(out.figures):
        sums, weight = _heatmaps(fig)[3], _heatmaps(fig)[4]
        cols = z(sums)
        if stack == "cross":  # no relative position bias across: q·k (× 1) is the score
            assert list(sums["x"]) == ["Σ q∘k = q·k", "scaled"] and "position bias" not in fig.layout.title.text
        else:  # T5 does not scale: q·k, the bias, their sum
            assert list(sums["x"]) == ["Σ q∘k = q·k", "position bias", "score"]
            assert np.allclose(cols[:, 0] + cols[:, 1], cols[:, 2], atol=1e-5)
            assert "plus the position bias gives the score" in fig.layout.title.text
        assert np.allclose(z(_heatmaps(fig)[2]).sum(1), cols[:, 0], atol=1e-5)
        assert np.allclose(_softmax_of_scores(fig, -1), z(weight)[:, 0], atol=1e-5)
        assert np.allclose(z(weight)[:, 0], r.weights[0, 2, i, :len(weight["y"])].numpy())
        assert np.isfinite(cols).all()


def test_a_model_whose_scores_are_not_its_q_k_says_why(tmp_path):
    pytest.importorskip("transformers")
    qwen3, _m, _f = _save(tmp_path, "qwen3")
    with pytest.raises(ValueError, match="even with rotary positions or a position bias taken in"):
        attnviz.neuron_view(str(qwen3), "the cat sat", html_action="return")
