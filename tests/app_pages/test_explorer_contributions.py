"""The norms and neuron views in the app (AppTest): the random layer, MiniLM, a Hugging
Face folder, and a model that cannot give them saying so."""

from __future__ import annotations

import pytest

from attnviz.models import registry as R
from tests.support.apphelp import app, figures, heatmaps, no_errors, z
from tests.support.hfmodels import save as _save


def _titles(fig: dict) -> str:
    return fig["layout"]["title"]["text"]


def test_the_norms_view_puts_weights_beside_norms_and_draws_the_knock_out():
    at = app("view=norms&heads=4&mask=causal&text=the+cat+sat+on+the+mat")
    no_errors(at)
    figs = figures(at)
    norms = next(f for f in figs if "weighted value norms" in _titles(f))
    blocks = [a["text"] for a in norms["layout"]["annotations"]]
    assert blocks[:4] == ["head 0: weights", "head 0: norms", "head 1: weights", "head 1: norms"]
    bars = next(f for f in figs if "set to zero before W_O" in _titles(f))
    assert [t["type"] for t in bars["data"]] == ["bar"] and len(bars["data"][0]["x"]) == 4
    assert at.query_params["view"] in ("norms", ["norms"])


def test_the_neuron_view_reads_the_head_and_query_selectors():
    at = app("view=neurons&heads=4&head=2&query=3&mask=causal&text=the+cat+sat+on+the+mat")
    no_errors(at)
    fig = next(f for f in figures(at) if "q∘k sums to q·k" in _titles(f))
    assert "head 2, query “on” (3)" in _titles(fig)
    k, product = heatmaps(fig)[1], heatmaps(fig)[2]
    assert z(k).shape == (6, 16) and z(product).shape == (6, 16)  # d_model 64 / 4 heads
    sums = heatmaps(fig)[3]
    assert abs(z(product).sum(1) - z(sums)[:, 0]).max() < 1e-4  # the row of q∘k sums to the score's column


@pytest.mark.minilm
@pytest.mark.parametrize("view", ["norms", "neurons"])
def test_minilm_draws_both_views(view):
    at = app(f"model=minilm-l6&layer=2&view={view}&text=I+love+AI", timeout=120)
    no_errors(at)
    titles = [_titles(f) for f in figures(at)]
    want = ["weighted value norms", "set to zero before W_O"] if view == "norms" else ["q∘k sums to q·k"]
    assert all(any(w in t for t in titles) for w in want), titles


def test_a_causal_folder_shows_its_next_tokens_moving_and_its_rotated_q_and_k(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    _save(tmp_path, "llama")
    _save(tmp_path, "gpt2")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=llama&layer=1&view=norms&text=the+cat+sat", timeout=120)
    no_errors(at)
    bars = next(f for f in figures(at) if "set to zero before W_O" in _titles(f))
    assert len(bars["data"]) == 2 and "next-token probability" in bars["layout"]["yaxis2"]["title"]["text"]
    assert any("top-10 overlap" in d.value.columns for d in at.dataframe)
    at = app("model=llama&layer=1&view=neurons&head=3&text=the+cat+sat", timeout=120)
    no_errors(at)
    assert not any("neuron view needs" in i.value for i in at.info), [i.value for i in at.info]
    fig = next(f for f in figures(at) if "q∘k sums to q·k" in _titles(f))
    assert "rotated by position (rotary)" in _titles(fig)
    assert any("rotated by position (rotary positions)" in c.value for c in at.caption)
    product, sums = heatmaps(fig)[2], heatmaps(fig)[3]
    assert abs(z(product).sum(1) - z(sums)[:, 0]).max() < 1e-4
    at = app("model=gpt2&layer=1&view=neurons&text=the+cat+sat", timeout=120)
    no_errors(at)
    assert any("q∘k sums to q·k" in _titles(f) for f in figures(at))
    assert not any("rotary" in c.value or "position bias" in c.value for c in at.caption)


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_t5s_every_stack_draws_the_neuron_view_with_its_position_bias(tmp_path, monkeypatch, stack):
    pytest.importorskip("transformers")
    _save(tmp_path, "t5")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app(f"model=t5&stack={stack}&layer=1&view=neurons&text=the+cat+sat", timeout=120)
    no_errors(at)
    assert not any("neuron view needs" in i.value for i in at.info), [i.value for i in at.info]
    fig = next(f for f in figures(at) if "q∘k sums to q·k" in _titles(f))
    sums = heatmaps(fig)[3]
    biased = stack != "cross"  # T5's cross-attention adds no relative position bias
    assert ("position bias" in sums["x"]) == biased
    assert any(("position bias b[i, j]" in c.value) == biased and "neuron view" in c.value for c in at.caption)
    if biased:
        cols = z(sums)
        assert abs(cols[:, 0] + cols[:, 1] - cols[:, 2]).max() < 1e-5  # q·k + bias = the score


@pytest.mark.parametrize("name,stack,said", [("llama", "encoder", "旋转位置编码"), ("t5", "decoder", "位置偏置")])
def test_the_rotary_and_position_bias_neuron_views_in_chinese(tmp_path, monkeypatch, name, stack, said):
    pytest.importorskip("transformers")
    from tests.test_i18n import texts, untranslated

    _save(tmp_path, name)
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app(f"lang=zh&model={name}&stack={stack}&layer=1&view=neurons&text=the+cat+sat", timeout=120)
    no_errors(at)
    assert not untranslated(texts(at)), untranslated(texts(at))[:3]
    fig = next(f for f in figures(at) if "q∘k 这一行" in _titles(f))
    assert said in _titles(fig) and any(said in c.value for c in at.caption)


def test_a_folder_whose_scores_are_not_its_q_k_says_why_it_has_no_neuron_view(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    _save(tmp_path, "qwen3")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=qwen3&layer=1&view=neurons&text=the+cat+sat", timeout=120)
    no_errors(at)
    assert not any("q∘k" in _titles(f) for f in figures(at)) and any("rotary positions" in i.value for i in at.info)


@pytest.mark.parametrize("view", ["norms", "neurons"])
def test_both_views_in_chinese(view):
    from tests.test_i18n import texts, untranslated

    at = app(f"lang=zh&view={view}&mask=causal&text=the+cat+sat")
    no_errors(at)
    assert not untranslated(texts(at)), untranslated(texts(at))[:3]
    titles = " ".join(_titles(f) for f in figures(at))
    assert ("范数" in titles) if view == "norms" else ("q∘k 这一行" in titles)
