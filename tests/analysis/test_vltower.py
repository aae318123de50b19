"""Visual sinks against hand-made maps, and the vision tower's own attention against its definition computed here
from the tower's hidden states and projection weights (CLS's row of softmax(q·kᵀ/√d) in the layer the language
model reads), on a tiny random LLaVA folder; a tower it does not read (Qwen2-VL's) is refused with why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attnviz.analysis.vlattention import vl_attention
from attnviz.analysis.vltower import SINK_FACTOR, tower_attention, tower_layer, visual_sinks
from attnviz.models.vlm import load_vlm
from tests.support import vlmodels

PICTURE = Image.fromarray((np.random.RandomState(1).rand(40, 60, 3) * 255).astype("uint8"))


def _maps(rows: int = 3, cols: int = 4, tokens: int = 3, heads: int = 2) -> torch.Tensor:
    """(H, T, rows, cols): every token spreads 0.5 of its attention evenly over the picture."""
    return torch.full((heads, tokens, rows, cols), 0.5 / (rows * cols))


def test_a_patch_every_token_looks_at_is_a_sink_and_one_only_a_single_token_looks_at_is_not():
    m = _maps()
    m[:, :, 1, 2] += 1.0  # every token, every head: far above SINK_FACTOR × the even share
    m[:, 0, 0, 0] += 1.0  # the first token alone
    sinks = visual_sinks(m)
    expected = np.zeros((3, 4), bool)
    expected[1, 2] = True
    assert (sinks == expected).all()


def test_the_threshold_is_the_factor_times_the_even_share_of_each_tokens_own_picture_attention():
    even = 1 / 12
    share = torch.zeros(2, 3, 4)  # (T, rows, cols): each token's picture attention, summing to 1
    share[:, 0, 1] = 1.01 * SINK_FACTOR * even  # just over the threshold, for both tokens
    share[:, 2, 3] = 0.99 * SINK_FACTOR * even  # just under it
    rest = (1 - share.sum((-2, -1))) / 10
    share += (share == 0) * rest[:, None, None]
    m = (share * torch.tensor([0.5, 0.2])[:, None, None])[None]  # (1, T, …): each token gives the picture 0.5, 0.2
    sinks = visual_sinks(m)
    assert sinks[0, 1] and not sinks[2, 3] and int(sinks.sum()) == 1


def test_tokens_that_cannot_see_the_picture_do_not_count_and_one_seeing_token_is_too_few():
    m = _maps(tokens=3, heads=1)
    m[0, :, 2, 2] += 1.0
    m[:, 1] = 0  # a causal word before the picture
    assert visual_sinks(m)[2, 2]  # the two tokens that see it agree; the blind one is not asked
    m[:, 2] = 0
    assert visual_sinks(m) is None


def test_the_tower_layer_is_the_one_whose_output_the_language_model_reads():
    assert tower_layer(24, -2) == 22  # LLaVA-1.5: hidden_states[-2], the output of layer 22 (of 0 … 23)
    assert tower_layer(24, -1) == 23 and tower_layer(24, 5) == 4 and tower_layer(24, [-3, -2]) == 22
    with pytest.raises(ValueError, match="embeddings"):
        tower_layer(24, 0)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("tower")
    return {kind: vlmodels.save(base, kind)[0] for kind in ("llava", "llava_next", "qwen2_vl", "paligemma", "gemma3",
                                                            "idefics3")}


def _weights(vlm, pixel_values: torch.Tensor, layer: int) -> torch.Tensor:
    """``layer``'s attention (H, N, N) from its input and its weights (CLIP's and SigLIP's pre-norm)."""
    inner = vlm.model.model
    tower = inner.vision_tower if hasattr(inner, "vision_tower") else inner.vision_model  # Idefics3's
    with torch.no_grad():
        h = tower(pixel_values, output_hidden_states=True).hidden_states[layer]  # the layer's input (1, N, E)
        block = getattr(tower, "vision_model", tower).encoder.layers[layer]
        x = block.layer_norm1(h)
        att = block.self_attn
        H = att.num_heads
        q = att.q_proj(x).view(1, -1, H, att.head_dim).transpose(1, 2)  # (1, H, N, d)
        k = att.k_proj(x).view(1, -1, H, att.head_dim).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-1, -2) / att.head_dim ** 0.5, -1)  # (1, H, N, N)
    return w[0]


def test_a_clip_towers_map_is_cls_row_of_the_layer_the_language_model_reads(folders):
    vlm = load_vlm(str(folders["llava"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    pixels = r.pixel_inputs["pixel_values"][:1]
    row, kind, layer = tower_attention(vlm, pixels)
    tower = vlm.model.model.vision_tower
    layers = len(getattr(tower, "vision_model", tower).encoder.layers)
    assert kind == "CLIP" and layer == tower_layer(layers, vlm.model.config.vision_feature_layer)
    assert row.shape == tuple(r.maps[0].shape[-2:])  # one weight per patch the language model reads
    want = _weights(vlm, pixels, layer)[:, 0, 1:].mean(0).reshape(row.shape).numpy()  # CLS's row
    np.testing.assert_allclose(row, want, rtol=1e-5, atol=1e-6)
    assert abs(float(row.sum()) - 1.0) > 1e-4  # CLS gives itself a part too: not a renormalised map


def test_a_siglip_towers_map_is_the_mean_row_of_its_last_layer(folders):
    vlm = load_vlm(str(folders["paligemma"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    pixels = r.pixel_inputs["pixel_values"][:1]
    row, kind, layer = tower_attention(vlm, pixels)
    tower = vlm.model.model.vision_tower
    layers = len(getattr(tower, "vision_model", tower).encoder.layers)
    assert kind == "SigLIP" and layer == layers - 1 and row.shape == tuple(r.maps[0].shape[-2:])
    want = _weights(vlm, pixels, layer).mean((0, 1)).reshape(row.shape).numpy()  # every patch's row, averaged
    np.testing.assert_allclose(row, want, rtol=1e-5, atol=1e-6)
    assert abs(float(row.sum()) - 1.0) < 1e-5  # no CLS: the mean of rows that each sum to 1


def test_gemma_3s_tower_map_is_pooled_as_its_projector_pools_the_patches(folders):
    vlm = load_vlm(str(folders["gemma3"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    pixels = r.pixel_inputs["pixel_values"][:1]
    row, kind, layer = tower_attention(vlm, pixels)
    assert kind == "SigLIP" and row.shape == tuple(r.maps[0].shape[-2:]) == (2, 2)  # 4 × 4 patches, 2 × 2 tokens
    mean_row = _weights(vlm, pixels, layer).mean((0, 1)).reshape(4, 4)
    want = mean_row.reshape(2, 2, 2, 2).sum((1, 3)).numpy()  # each token's 2 × 2 patches together
    np.testing.assert_allclose(row, want, rtol=1e-5, atol=1e-6)


def test_llava_nexts_tower_map_is_cls_row_on_its_base_view(folders):
    vlm = load_vlm(str(folders["llava_next"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    pixels = r.pixel_inputs["pixel_values"]  # (1, views, 3, H, W): the base view first, then the tiles
    row, kind, layer = tower_attention(vlm, pixels)
    assert kind == "CLIP" and row.shape == tuple(r.maps[0].shape[-2:])  # the base view's grid
    want = _weights(vlm, pixels[0, :1], layer)[:, 0, 1:].mean(0).reshape(row.shape).numpy()
    np.testing.assert_allclose(row, want, rtol=1e-5, atol=1e-6)


def test_idefics3s_tower_map_is_the_mean_row_of_its_global_view_pixel_shuffled_as_its_tokens(folders):
    vlm = load_vlm(str(folders["idefics3"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    pixels = r.pixel_inputs["pixel_values"]  # (1, frames, 3, 32, 32): the tiles, then the whole picture
    row, kind, layer = tower_attention(vlm, pixels)
    assert kind == "SigLIP" and row.shape == tuple(r.maps[0].shape[-2:]) == (4, 4)  # 8 × 8 patches, 2 × 2 a token
    assert layer == len(vlm.model.model.vision_model.encoder.layers) - 1
    mean_row = _weights(vlm, pixels[0, -1:], layer).mean((0, 1)).reshape(8, 8)
    np.testing.assert_allclose(row, mean_row.reshape(4, 2, 4, 2).sum((1, 3)).numpy(), rtol=1e-5, atol=1e-6)
    first_tile = tower_attention(vlm, pixels[0, :1])[0]
    assert np.abs(first_tile - row).max() > 1e-5  # the whole picture's frame, not the first tile's (10 × the tolerance)


def test_a_tower_it_does_not_read_is_refused_with_why(folders):
    vlm = load_vlm(str(folders["qwen2_vl"]))
    r = vl_attention(vlm, PICTURE, "the cat", generate=0)
    with pytest.raises(ValueError, match="not a CLIP or SigLIP tower"):
        tower_attention(vlm, r.pixel_inputs["pixel_values"][:1])
