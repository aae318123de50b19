"""Tiny GPT-2, LLaMA, BERT, T5, BART and ViT folders, listed by the operator, in the app:
each page that takes the model shows that model's own attention."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attnviz.views.cross import CROSS_SOURCES

pytest.importorskip("transformers", reason="pip install transformers (in requirements.txt)")

from attnviz import AttentionConfig, compute  # noqa: E402
from attnviz.models import registry as R  # noqa: E402
from tests.support.apphelp import app, figures, grid_heads, no_errors  # noqa: E402
from tests.support.hfmodels import model_dirs  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return model_dirs(tmp_path_factory.mktemp("models"))


@pytest.fixture
def listed(models, monkeypatch):
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(models))
    return models


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5", "bart"])
def test_the_explorer_draws_a_text_models_own_weights(listed, name):
    at = app(f"?model={name}&layer=1&view=grid")
    no_errors(at)
    want = compute(AttentionConfig(model=name, layer=1)).weights[0]  # (H, L, S)
    heads = grid_heads(figures(at)[0])
    assert len(heads) == want.shape[0] == 4
    for h in heads:
        assert np.allclose(h["z"], want[h["head"]].numpy(), atol=1e-6)


def test_an_encoder_decoders_stack_is_a_sidebar_choice_and_the_cross_page_shows_its_own(listed):
    at = app("?model=t5&stack=decoder")
    no_errors(at)
    assert at.selectbox(key="stack").value == "decoder"
    assert any("decoder attention" in i.value for i in at.info)
    at = app("?model=t5", page="app_pages/cross_attention.py")
    no_errors(at)
    assert not any("runs on the random model" in i.value for i in at.info)
    assert any("cross attention" in i.value for i in at.info)
    s = R.load("t5")  # the page's weights are the model's cross-attention over the source
    want = compute(AttentionConfig(model="t5", source=CROSS_SOURCES["en"], mask="padding", stack="cross")).weights[0]
    assert s.seq2seq and grid_heads(figures(at)[0])[0]["z"].shape == tuple(want.shape[1:])
    at = app("?model=gpt2", page="app_pages/cross_attention.py")
    no_errors(at)
    assert any("runs on the random model here" in i.value for i in at.info)


def test_the_image_page_runs_a_vision_transformer_over_its_own_patches(listed):
    at = app("?model=vit&layer=1", page="app_pages/image_patches.py")
    no_errors(at)
    assert at.number_input(key="patch").disabled
    assert any("4 × 4 patches of 8 px" in i.value for i in at.info)
    overlay = figures(at)[0]
    cells = [t for t in overlay["data"] if t["type"] == "heatmap"]
    assert len(cells) == 5  # four heads and their mean, each over 4 × 4 patches
    at = app("?model=vit")
    assert any("reads images" in e.value for e in at.error) and not at.exception


def test_a_slow_model_shows_its_progress_and_the_page_follows_when_it_is_ready(listed, monkeypatch):
    import ui.loading as UL
    from attnviz.models import hf

    gate = threading.Event()
    real = hf.HFModel.from_folder.__func__
    threads = []

    def slow(cls, name, folder, phase=lambda what: None):
        threads.append(threading.current_thread().name)
        phase("weights")
        gate.wait(10)
        return real(cls, name, folder, phase)

    shown = []
    progress = UL.st.progress

    def spy(value, text=None):
        shown.append(text)
        return progress(value, text=text)

    monkeypatch.setattr(hf.HFModel, "from_folder", classmethod(slow))
    monkeypatch.setattr(UL.st, "progress", spy)
    (listed / "llama" / "config.json").touch()  # a new stamp: loaded afresh
    from streamlit.testing.v1 import AppTest

    from tests.support.apphelp import APP

    at = AppTest.from_file(APP, default_timeout=60)  # not app(): it would wait for the load
    at.query_params["model"] = "llama"
    at.run()
    no_errors(at)
    assert shown and shown[0] == "Loading llama: loading the weights…"
    assert not figures(at)  # the run ended at once, without waiting for the load
    assert threads == ["attnviz-load-llama"]  # loaded in its own thread, not the page's
    gate.set()
    status = R.load_in_background("llama")  # None once it is loaded
    assert status is None or status.done.wait(10)
    at.run()  # what the page's polling fragment does once the load is done
    no_errors(at)
    assert figures(at)


def test_loaded_models_stay_within_the_operators_bound(listed, monkeypatch):
    monkeypatch.setattr(R, "LOADED", type(R.LOADED)(R.max_loaded_bytes()))
    from attnviz.models.hf import weight_bytes

    one = R.load("gpt2")
    sizes = [weight_bytes(listed / name) for name in ("gpt2", "bert")]
    bound = max(sizes) + 1  # room for either, not both
    assert R.loaded_bytes() == sizes[0] and bound < sum(sizes)
    monkeypatch.setenv("ATTNVIZ_MAX_LOADED_MB", str(bound / 2**20))
    R.load("bert")  # does not fit beside gpt2: gpt2 is unloaded
    assert [k[0] for k in R.LOADED.keys()] == ["bert"] and R.loaded_bytes() == sizes[1]
    assert R.load("gpt2") is not one  # loaded again, bert unloaded
    monkeypatch.setenv("ATTNVIZ_MAX_LOADED_MB", "0.001")
    with pytest.raises(ValueError, match="ATTNVIZ_MAX_LOADED_MB"):
        R.load("llama")


def test_a_causal_lm_generates_and_the_slider_walks_its_tokens(listed):
    from attnviz.models.generate import greedy
    from tests.support.apphelp import heatmaps, z

    at = app("?model=gpt2&generate=6&step=2&text=the+cat+sat&layer=1")
    no_errors(at)
    model = R.load("gpt2")
    ids = model.read_text(["the cat sat"]).ids[0].tolist()
    g = greedy(model, ids, 6)
    assert at.slider(key="step").value == 2 and at.slider(key="step").max == g.count - 1
    step = next(f for f in figures(at) if "what chose" in f["layout"]["title"]["text"])
    (trace,) = heatmaps(step)
    assert np.allclose(z(trace), g.rows[2, 1, :, : g.context + 2].numpy(), atol=1e-6)  # (H, keys seen)
    assert f"“{g.tokens[g.context + 2]}”" in step["layout"]["title"]["text"]
    at = app("?model=gpt2&generate=3&step=31&text=the+cat+sat")  # a step the run does not have
    no_errors(at)
    assert at.slider(key="step").value == 0
    at = app("?model=bert&generate=3")  # an encoder writes nothing: no section, no error
    no_errors(at)
    assert not any("wrote" in c.value for c in at.caption)


@pytest.mark.parametrize("name, args, layers", [
    ("gpt2", [], 2), ("llama", ["--layer", "1"], 2), ("bert", [], 2),
    ("t5", ["--stack", "cross", "--page", "cross-attention"], 3), ("bart", ["--stack", "decoder"], 2),
    ("vit", ["--page", "image-patches"], 2)])
def test_the_cli_renders_every_kind_from_its_folder(models, tmp_path, name, args, layers):
    """The run's JSON from ``render --model FOLDER``: every layer's weights, the model's tokens."""
    import json

    from attnviz import cli

    out = tmp_path / f"{name}.json"
    assert cli.main(["render", "--model", str(models / name), *args, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    weights = np.array(data["layer_weights"])  # (layers, N, H, L, S)
    assert weights.shape[0] == layers and weights.shape[2] == 4
    assert np.allclose(weights.sum(-1)[:, 0, :, : data["lengths"][0]], 1, atol=1e-5)  # real rows are softmaxes
    first = data["tokens"][0][0]
    # a decoder starts with its start token; "The" is not in the tiny vocabulary
    assert first == {"vit": "[CLS]", "t5": "[PAD]", "bart": "[SEP]"}.get(name, "[UNK]")


def test_the_cli_renders_a_generated_tokens_attention(models, tmp_path, capsys):
    import json

    from attnviz import cli
    from attnviz.models.generate import greedy
    from attnviz.models.registry import load
    from attnviz.plots import FigureStyle
    from attnviz.views.pages import page_figure
    from attnviz.views.state import ViewState
    from tests.support.apphelp import heatmaps, z

    folder = str(models / "gpt2")
    state = ViewState.of(model=folder, text="the cat sat", layer=1, generate=4, step=1)
    fig = json.loads(page_figure("explorer", state, FigureStyle()).to_json())  # what render --generate draws
    model = load(folder)
    g = greedy(model, model.read_text(["the cat sat"]).ids[0].tolist(), 4)
    (trace,) = heatmaps(fig)
    assert np.allclose(z(trace), g.rows[1, 1, :, : g.context + 1].numpy(), atol=1e-6)
    args = ["render", "--model", folder, "--text", "the cat sat", "--layer", "1", "--generate", "4"]
    assert cli.main([*args, "--step", "1", "--out", str(tmp_path / "gen.html")]) == 0
    assert (tmp_path / "gen.html").stat().st_size > 1000
    assert cli.main([*args, "--step", "9", "--out", str(tmp_path / "gen.html")]) == 2
    assert "Generated token 9 does not exist" in capsys.readouterr().err
    assert cli.main(["render", "--model", str(models / "bert"), "--generate", "3", "--out",
                     str(tmp_path / "b.html")]) == 2
    assert "not a causal language model" in capsys.readouterr().err


def test_a_weights_only_models_shapes_line_names_its_weights_not_empty_vectors(listed):
    r = compute(AttentionConfig(model="gpt2", text="the cat sat", layer=1))
    assert r.shapes() == {"weights": (1, 4, 3, 3), "every layer's weights": (2, 1, 4, 3, 3)}
    at = app("?model=gpt2&text=the+cat+sat")
    no_errors(at)
    line = next(m.value for m in at.markdown if "Shapes" in m.value)
    assert "(2, 1, 4, 3, 3)" in line and ", 0)" not in line


def test_a_load_in_progress_blocks_neither_loaded_models_nor_its_own_progress(listed, monkeypatch):
    from attnviz.models import hf

    R.load("gpt2")
    gate, started = threading.Event(), threading.Event()
    real = hf.HFModel.from_folder.__func__

    def slow(cls, name, folder, phase=lambda what: None):
        phase("weights")
        started.set()
        gate.wait(10)
        return real(cls, name, folder, phase)

    monkeypatch.setattr(hf.HFModel, "from_folder", classmethod(slow))
    (listed / "t5" / "config.json").touch()  # a new stamp: loaded afresh, slowly
    status = R.load_in_background("t5")
    assert started.wait(10)
    t0 = __import__("time").perf_counter()
    assert R.load("gpt2").name == "gpt2"  # already loaded: answered at once
    again = R.load_in_background("t5")  # the same load's progress, without waiting for it
    assert __import__("time").perf_counter() - t0 < 1.0 and again is status and again.words == R.PHASES["weights"][1]
    gate.set()
    assert status.done.wait(10) and not status.error and R.load_in_background("t5") is None


def test_a_model_the_operator_lists_for_download_is_fetched_by_its_load_and_drawn(tmp_path, monkeypatch):
    """ATTNVIZ_ALLOW_DOWNLOAD=1 with an id in ATTNVIZ_DOWNLOAD_IDS: the picker offers it, its load job fetches
    it (from a hub faked offline), and the explorer draws its own weights."""
    from attnviz.models import hub
    from tests.support import longmodels
    from tests.support.fakehub import FakeHub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv(hub.HF_CACHE_ENV, "0")
    monkeypatch.setenv(hub.ALLOW_ENV, "1")
    monkeypatch.setenv(hub.IDS_ENV, "tiny-org/tiny-llama")
    fake = FakeHub(longmodels.save(tmp_path / "built", "llama", 512), monkeypatch)
    at = app("?model=tiny-org/tiny-llama&view=grid", timeout=120)
    no_errors(at)
    assert "tiny-org/tiny-llama" in at.selectbox(key="model").options
    want = compute(AttentionConfig(model="tiny-org/tiny-llama")).weights[0]  # (H, L, S)
    heads = grid_heads(figures(at)[0])
    assert len(heads) == want.shape[0] and len(fake.calls) == 1
    for h in heads:
        assert np.allclose(h["z"], want[h["head"]].numpy(), atol=1e-6)
