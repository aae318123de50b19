"""One true record of a run: the JSON, the file names and the sidebar name the settings that
ran (a model's own heads, width, layers and mask), never the random layer's that did not apply."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnviz import AttentionConfig, compute, save_attention
from attnviz.views.attention_file import file_run
from tests.support.apphelp import app, no_errors

RANDOM_ONLY = ("seed", "projections", "positional", "tokenize_mode", "window")


def _sidebar_keys(at) -> set[str]:
    return {w.key for kind in ("selectbox", "number_input", "toggle", "slider") for w in getattr(at.sidebar, kind)}


@pytest.mark.minilm
def test_a_minilm_runs_json_names_its_12_heads_width_384_and_its_padding_mask(tmp_path):
    from attnviz import cli

    out = tmp_path / "run.json"
    assert cli.main(["render", "--from-url", "?model=minilm-l6&head=7", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    cfg = data["config"]
    assert (cfg["num_heads"], cfg["d_model"], cfg["layers"], cfg["mask"]) == (12, 384, 6, "padding")
    assert not set(RANDOM_ONLY) & set(cfg)  # the random layer's settings did not run
    w = np.array(data["weights"])  # (N, H, L, S): bidirectional, as the record says
    assert w.shape[1] == 12 and np.triu(w[0, 7], 1).sum() > 0.5


def test_the_random_layers_record_is_its_own_settings():
    r = compute(AttentionConfig(text="I love AI", num_heads=2, d_model=16, mask="causal", seed=3))
    ran = r.settings
    assert (ran["num_heads"], ran["d_model"], ran["mask"], ran["seed"]) == (2, 16, "causal", 3)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("transformers", reason="pip install transformers (in requirements.txt)")
    from tests.support.hfmodels import model_dirs

    return model_dirs(tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("name, stack, layers, mask", [
    ("gpt2", "encoder", 2, "causal"), ("llama", "encoder", 2, "causal"), ("bert", "encoder", 2, "padding"),
    ("t5", "encoder", 2, "padding"), ("t5", "decoder", 3, "causal"), ("t5", "cross", 3, "padding"),
    ("bart", "decoder", 2, "causal")])
def test_every_folder_kinds_record_and_facts_are_the_models_own(models, monkeypatch, name, stack, layers, mask):
    from attnviz.models import registry as R

    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(models))
    source = "the cat sat" if stack == "cross" else ""
    r = compute(AttentionConfig(model=name, text="the cat sat on the mat", stack=stack, source=source,
                                num_heads=2, d_model=8, mask="window", seed=5))
    cfg = r.settings
    assert (cfg["num_heads"], cfg["d_model"], cfg["layers"], cfg["mask"]) == (4, 32, layers, mask)
    assert not set(RANDOM_ONLY) & set(cfg)
    facts = R.model_facts(name, stack)  # what the sidebar shows, from config.json alone
    assert (facts.layers, facts.heads, facts.width, facts.mask) == (layers, 4, 32, mask)


def test_a_vision_transformers_facts_are_its_own(models, monkeypatch):
    from attnviz.models import registry as R

    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(models))
    facts = R.model_facts("vit")
    assert (facts.layers, facts.heads, facts.width, facts.mask) == (2, 4, 32, "padding")


def test_an_uploaded_files_record_is_its_heads_and_layers_and_the_mask_its_weights_show(tmp_path):
    g = torch.Generator().manual_seed(0)
    full = torch.softmax(torch.randn(2, 3, 5, 5, generator=g), -1)  # (layers, H, L, S)
    causal = torch.softmax(torch.randn(3, 5, 5, 5, generator=g).masked_fill(~torch.tril(torch.ones(5, 5)).bool(),
                                                                          float("-inf")), -1)
    for w, layers, heads, mask in ((full, 2, 3, "none"), (causal, 3, 5, "causal")):
        path = tmp_path / f"{mask}.safetensors"
        save_attention(path, w.numpy(), [f"t{i}" for i in range(5)])
        r = file_run(path.read_bytes(), path.name)
        cfg = r.settings
        assert (cfg["num_heads"], cfg["layers"], cfg["mask"], cfg["file"]) == (heads, layers, mask, path.name)
        assert "d_model" not in cfg  # a file gives weights without vectors: no width to name
        assert torch.equal(r.weights[0], w[0].float())  # naming the mask changed no weight


@pytest.mark.minilm
def test_the_sidebar_shows_a_models_own_heads_and_width_never_the_random_layers(models, monkeypatch):
    from attnviz.models import registry as R

    at = app("?model=minilm-l6&heads=2&mask=causal")
    no_errors(at)
    assert not {"d_model", "heads", "mask", "window"} & _sidebar_keys(at)
    facts = next(c.value for c in at.sidebar.caption if "heads" in c.value)
    assert "6 layers × 12 heads, width 384" in facts and "padding" in facts
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(models))
    at = app("?model=gpt2")
    no_errors(at)
    assert "2 layers × 4 heads, width 32" in next(c.value for c in at.sidebar.caption if "heads" in c.value)
    assert "causal" in next(c.value for c in at.sidebar.caption if "heads" in c.value)
    at = app("?heads=2&d_model=16")  # the random layer's own controls are back, with its values
    assert at.selectbox(key="heads").value == 2 and at.selectbox(key="d_model").value == 16


def test_the_attention_file_page_draws_no_random_layer_setting():
    at = app("?heads=2", page="app_pages/attention_file.py")
    no_errors(at)
    assert not {"d_model", "heads", "mask", "seed"} & _sidebar_keys(at)


@pytest.mark.minilm
def test_a_models_file_names_name_the_model_and_what_it_masked():
    from attnviz.views.selection import file_stem
    from attnviz.views.state import ViewState

    s = ViewState.of(model="minilm-l6", heads=4, mask="causal")
    r = compute(s.config)
    stem = file_stem(s, "grid", r)
    assert stem == "attnviz-grid-minilm-l6-layer0-padding-12h-384d"
    rs = ViewState.of(heads=2, d_model=16, mask="causal", seed=4)
    assert file_stem(rs, "grid", compute(rs.config)) == "attnviz-grid-causal-2h-16d-seed4"
