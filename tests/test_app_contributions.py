"""The norms and neuron views in the app (AppTest): the random layer, MiniLM, a Hugging
Face folder, and a model that cannot give them saying so."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.models import registry as R

from .apphelp import app, figures, heatmaps, no_errors, shown, z
from .hfmodels import save as _save

MINILM = R._package_dir() is not None


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


@pytest.mark.skipif(not MINILM, reason=f"the model's files are not installed: {R.INSTALL}")
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
    from .test_i18n import texts, untranslated

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
    from .test_i18n import texts, untranslated

    at = app(f"lang=zh&view={view}&mask=causal&text=the+cat+sat")
    no_errors(at)
    assert not untranslated(texts(at)), untranslated(texts(at))[:3]
    titles = " ".join(_titles(f) for f in figures(at))
    assert ("范数" in titles) if view == "norms" else ("q∘k 这一行" in titles)


# --- the image page: a vision transformer's (and the random layer's) patches --------------

IMAGE = "app_pages/image_patches.py"


def _image_run(**settings):
    """The image page's own run of the built-in picture (what the page computes)."""
    from attnviz import inputs as I
    from attnviz.views.modality import image_run
    from attnviz.views.state import ViewState

    state = ViewState.of(**settings)
    return image_run(state, I.sample_image(state.image_sample))


def _bars(fig: dict) -> list[float]:
    (bars,) = [t for t in fig["data"] if t["type"] == "bar"]
    return z({"z": bars["y"]}).tolist()


@pytest.fixture
def vit(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    _save(tmp_path, "vit")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    return "vit"


def test_the_image_page_shows_a_vision_transformers_norms_and_its_knock_out(vit):
    from attnviz.views.explorer import knockout

    at = app("?model=vit&layer=1&view=norms", page=IMAGE, timeout=120)
    no_errors(at)
    assert at.segmented_control(key="view").value == "norms"  # the link opened the view
    figs = figures(at)
    titles = [_titles(f) for f in figs]
    assert titles[0].startswith("what patch [CLS] attends to")  # the overlay stays on top
    norms = next(f for f in figs if "weighted value norms" in _titles(f))
    assert _titles(norms).startswith("layer 1:")
    blocks = [a["text"] for a in norms["layout"]["annotations"]]
    assert blocks[:4] == ["head 0: weights", "head 0: norms", "head 1: weights", "head 1: norms"]
    assert any("‖A[i, j] · v_j W_O^h‖ (Kobayashi et al. 2020)" in c.value for c in at.caption)  # the explorer's words
    bars = next(f for f in figs if "set to zero before W_O" in _titles(f))
    _inp, result = _image_run(model="vit", layer=1)
    want = knockout(result, 0).moved
    assert _bars(bars) == pytest.approx(want, abs=1e-9) and len(want) == 4
    assert not any("q∘k" in t for t in titles) and not any("mean over heads" == t for t in titles)  # only this view


def test_the_image_page_shows_a_vision_transformers_neuron_view_for_the_followed_token(vit):
    from attnviz.analysis.contributions import neuron_row

    at = app("?model=vit&layer=1&view=neurons&head=2", page=IMAGE, timeout=120)
    no_errors(at)
    fig = next(f for f in figures(at) if "q∘k sums to q·k" in _titles(f))
    assert "head 2, query “[CLS]” (0)" in _titles(fig)  # a ViT follows [CLS] first
    assert any("the row of q∘k sums to it" in c.value for c in at.caption)
    _q, k, product, dot = (z(t) for t in heatmaps(fig)[:4])
    _inp, result = _image_run(model="vit", layer=1)
    row = neuron_row(result, 0, 2, 0)
    assert product.shape == (17, 8) and np.allclose(product, row.product, atol=1e-6)  # [CLS] + 16 patches, D = 8
    assert np.allclose(product.sum(1), dot[:, 0], atol=1e-5)
    at = app("?model=vit&layer=1&view=neurons&head=1&patch_at=5", page=IMAGE, timeout=120)  # a patch followed
    no_errors(at)
    fig = next(f for f in figures(at) if "q∘k sums to q·k" in _titles(f))
    assert "head 1, query “r1c1” (6)" in _titles(fig)
    assert np.allclose(z(heatmaps(fig)[2]), neuron_row(result, 0, 1, 6).product, atol=1e-6)


def test_the_random_layer_on_the_image_page_gives_the_same_views():
    """It keeps every step: its norms, knock-out and neuron view are drawn, with a line on the
    identity projections of its default (Q = K = V = X)."""
    from attnviz.views.explorer import knockout

    at = app("?view=norms&heads=4", page=IMAGE)
    no_errors(at)
    figs = figures(at)
    assert any("weighted value norms" in _titles(f) for f in figs)
    bars = next(f for f in figs if "set to zero before W_O" in _titles(f))
    _inp, result = _image_run(heads=4)
    assert _bars(bars) == pytest.approx(knockout(result, 0).moved, abs=1e-9)
    assert any("every projection here is the identity" in c.value for c in at.caption)
    at = app("?view=neurons&heads=4&head=3&patch_at=3&input_projections=1", page=IMAGE)
    no_errors(at)
    assert any("head 3, query “r0c3” (3)" in _titles(f) for f in figures(at))
    assert not any("every projection here is the identity" in c.value for c in at.caption)


def test_the_image_page_keeps_its_weights_by_default_and_for_an_explorer_only_view(vit):
    for query in ("?model=vit", "?model=vit&view=head"):
        at = app(query, page=IMAGE, timeout=120)
        no_errors(at)
        titles = [_titles(f) for f in figures(at)]
        assert len(titles) == 3 and titles[2] == "mean over heads", titles  # the overlay, the grid, the mean
        assert at.segmented_control(key="view").value == "grid"
        assert not any("W_O" in t for t in titles)  # nothing of the other views is built


def test_a_view_the_image_run_cannot_give_says_so_in_one_line(vit, monkeypatch):
    import ui.heads

    monkeypatch.setattr(ui.heads, "view_problem", lambda result, view: f"{view} [cannot] from this run")
    at = app("?model=vit&view=norms", page=IMAGE, timeout=120)
    no_errors(at)
    assert any(shown(i.value) == "norms [cannot] from this run" for i in at.info)  # escaped: shown as it is
    assert len(figures(at)) == 1  # the overlay only: no half-drawn view


@pytest.mark.parametrize("view", ["norms", "neurons"])
def test_the_image_pages_views_in_chinese(vit, view):
    from .test_i18n import texts, untranslated

    at = app(f"?lang=zh&model=vit&layer=1&view={view}", page=IMAGE, timeout=120)
    no_errors(at)
    assert not untranslated(texts(at)), untranslated(texts(at))[:3]
    captions = " ".join(c.value for c in at.caption)
    assert ("计入图片的每个词元" in captions) if view == "norms" else ("以图片所跟随的词元" in captions)
    assert "所有头及其平均" in at.segmented_control(key="view").options
