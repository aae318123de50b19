"""The Image patches page (AppTest): a vision transformer's and the random layer's weights, norms,
knock-out and neuron view of the followed token, in English and Chinese."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.models import registry as R
from attnviz.views.state import ViewState
from tests.support.apphelp import app, figures, heatmaps, no_errors, shown, z
from tests.support.hfmodels import save as _save


def _titles(fig: dict) -> str:
    return fig["layout"]["title"]["text"]


IMAGE = "app_pages/image_patches.py"


def _image_run(**settings):
    """The image page's own run of the built-in picture (what the page computes)."""
    from attnviz import inputs as I
    from attnviz.views.modality import image_run
    from attnviz.views.state import ViewState

    state = ViewState.of(**settings)
    return image_run(state, I.sample_image(state.image_patches.image_sample))


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
    from attnviz.views.contributions import knockout_of

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
    want = knockout_of(result, ViewState()).moved
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
    from attnviz.views.contributions import knockout_of

    at = app("?view=norms&heads=4", page=IMAGE)
    no_errors(at)
    figs = figures(at)
    assert any("weighted value norms" in _titles(f) for f in figs)
    bars = next(f for f in figs if "set to zero before W_O" in _titles(f))
    _inp, result = _image_run(heads=4)
    assert _bars(bars) == pytest.approx(knockout_of(result, ViewState()).moved, abs=1e-9)
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
    from dataclasses import replace

    from attnviz.views import catalogue

    monkeypatch.setitem(catalogue.VIEWS, "norms", replace(catalogue.VIEWS["norms"],
                                                          problem=lambda result, state: "norms [cannot] from this run"))
    at = app("?model=vit&view=norms", page=IMAGE, timeout=120)
    no_errors(at)
    assert any(shown(i.value) == "norms [cannot] from this run" for i in at.info)  # escaped: shown as it is
    assert len(figures(at)) == 1  # the overlay only: no half-drawn view


@pytest.mark.parametrize("view", ["norms", "neurons"])
def test_the_image_pages_views_in_chinese(vit, view):
    from tests.test_i18n import texts, untranslated

    at = app(f"?lang=zh&model=vit&layer=1&view={view}", page=IMAGE, timeout=120)
    no_errors(at)
    assert not untranslated(texts(at)), untranslated(texts(at))[:3]
    captions = " ".join(c.value for c in at.caption)
    assert ("计入图片的每个词元" in captions) if view == "norms" else ("以图片所跟随的词元" in captions)
    assert "所有头及其平均" in at.segmented_control(key="view").options
