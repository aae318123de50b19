"""attnviz.vl_view on tiny random vision-language folders: the overlay draws the chosen token's own weights
(the mean over the layer's heads and each head) over each patch's own box, the picture under it; the share map
is the token's image share by layer and head with its localization heads outlined in rank; a model is run
once on the spot; bad input is one sentence."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import attnviz
from attnviz.notebook.vl import looking_layer
from attnviz.plots.looking import box_edges
from tests.support import vlmodels

PICTURE = Image.fromarray((np.random.RandomState(1).rand(60, 90, 3) * 255).astype("uint8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("vl-view")
    out = {}
    for kind in ("llava_pad", "qwen2_vl"):
        folder = vlmodels.save(base, kind)[0]
        out[kind] = (folder, attnviz.vl_attention(str(folder), PICTURE, "the cat sat", answer="on the mat"))
    return out


@pytest.mark.parametrize("kind", ["llava_pad", "qwen2_vl"])
def test_the_overlay_draws_the_tokens_own_weights_over_each_patchs_box(runs, kind):
    _folder, r = runs[kind]
    fig = attnviz.vl_view(r, PICTURE, token=-2, layer=1)
    maps = r.maps[0][1, :, len(r.tokens) - 2].numpy()  # (H, rows, cols)
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == r.heads + 1
    np.testing.assert_allclose(np.asarray(heat[0].z), maps.mean(0), rtol=1e-6)
    for h in range(r.heads):
        np.testing.assert_array_equal(np.asarray(heat[h + 1].z), maps[h])
    xs, ys = box_edges(r.boxes[0])
    assert list(heat[0].x) == xs and list(heat[0].y) == ys  # each cell over its box in the picture's pixels
    assert np.allclose(np.diff(xs), np.diff(xs)[0]) and xs[0] <= 0 and xs[-1] >= 90  # a grid over the whole width
    assert [a.text for a in fig.layout.annotations][:2] == ["mean over heads", "head 0"]
    assert len(fig.layout.images) == r.heads + 1 and fig.layout.images[0].sizex == 90
    assert f"“{r.tokens[-2]}” → the picture, layer 1" in fig.layout.title.text
    assert fig.layout.coloraxis.cmax == pytest.approx(float(maps.max()))


def test_the_default_layer_is_the_one_that_looks_at_the_picture_most(runs):
    _folder, r = runs["llava_pad"]
    t = len(r.tokens) - 1
    best = looking_layer(r, t)
    assert all(r.image_share[best, :, t].mean() >= r.image_share[layer, :, t].mean() for layer in range(r.layers))
    assert f"layer {best}:" in attnviz.vl_view(r, PICTURE).layout.title.text


def test_the_share_map_is_the_tokens_image_share_with_its_localization_heads_outlined(runs):
    _folder, r = runs["llava_pad"]
    fig = attnviz.vl_view(r, PICTURE, token=3, show="share")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), r.image_share[:, :, 3].numpy())
    heads = r.localization_heads(3)
    assert [(s.y0 + 0.5, s.x0 + 0.5) for s in fig.layout.shapes] == [(float(a), float(b)) for a, b in heads]
    assert [a.text for a in fig.layout.annotations] == [str(i + 1) for i in range(len(heads))]


def test_a_model_runs_on_the_spot(runs):
    folder, r = runs["llava_pad"]
    fig = attnviz.vl_view(str(folder), PICTURE, "the cat sat", answer="on the mat", token=-1, layer=0)
    maps = r.maps[0][0, :, -1].numpy()
    np.testing.assert_allclose(np.asarray(fig.data[0].z), maps.mean(0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kwargs, says", [
    ({"token": 99}, "token must be a whole number from"),
    ({"layer": 7}, "layer must be a whole number from 0 to"),
    ({"show": "cams"}, "show must be one of overlay, share"),
    ({"prompt": "again"}, "Give the prompt with the model, not with a result"),
    ({"image": Image.new("RGB", (20, 20))}, "where the result read one of 90 × 60: give the picture it read."),
    ({"image": [PICTURE, PICTURE]}, "2 picture(s) given for a result of 1"),
])
def test_bad_input_is_one_sentence(runs, kwargs, says):
    _folder, r = runs["llava_pad"]
    image = kwargs.pop("image", PICTURE)
    prompt = kwargs.pop("prompt", None)
    with pytest.raises(ValueError) as e:
        attnviz.vl_view(r, image, prompt, **kwargs)
    assert says in str(e.value)
    with pytest.raises(ValueError, match="A model needs a prompt"):
        attnviz.vl_view("some/folder", PICTURE)


def test_llava_nexts_tiles_are_a_map_of_their_own_over_the_same_picture(tmp_path):
    folder = vlmodels.save(tmp_path, "llava_next")[0]
    r = attnviz.vl_attention(str(folder), PICTURE, "the cat sat", answer="on the mat")
    assert len(r.maps) == 2 and r.picture_of == [0, 0] and len(r.sizes) == 1  # the base view, then the tiles
    fig = attnviz.vl_view(r, PICTURE, token=-1, layer=0, picture=1)
    heat = [t for t in fig.data if t.type == "heatmap"]
    np.testing.assert_array_equal(np.asarray(heat[1].z), r.maps[1][0, 0, -1].numpy())
    xs, ys = box_edges(r.boxes[1])
    assert list(heat[0].x) == xs and list(heat[0].y) == ys and fig.layout.images[0].sizex == 90
