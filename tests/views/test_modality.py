"""attnviz.views.modality: image patches, audio frames and graph nodes run through the same attention as
text, against PyTorch; without projections it is plain similarity."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnviz import inputs as I
from attnviz.analysis.verify import verify_result
from attnviz.core.masks import to_torch_mha_mask
from attnviz.models.random import RandomLayer
from attnviz.run.run import run


@pytest.mark.parametrize("kind", ["image", "audio", "graph"])
def test_attention_over_other_inputs_matches_pytorch(kind):
    if kind == "image":
        inp = I.image_input(I.sample_image("shapes"), 8, 8, 32, 1, "window2d", 1)
        assert torch.equal(inp.mask, I.patch_mask("window2d", *inp.meta["grid"], 1))
    elif kind == "audio":
        inp = I.audio_input(*I.sample_audio("two-tones"), 256, 128, 32, 1)
    else:
        inp = I.graph_input(*I.parse_edges(I.preset_edges("star"))[:2], 32, 1, "adjacency")
    r = run(inp, RandomLayer(32, 4, seed=1), keep_steps=True)
    mha = nn.MultiheadAttention(32, 4, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(r.model.in_proj_weight)
        mha.in_proj_bias.copy_(r.model.in_proj_bias)
        mha.out_proj.weight.copy_(r.model.out_proj.weight)
        mha.out_proj.bias.copy_(r.model.out_proj.bias)
        m = None if r.mask is None else to_torch_mha_mask(r.mask)
        out, w = mha(r.embeddings, r.embeddings, r.embeddings, attn_mask=m, average_attn_weights=False)
    torch.testing.assert_close(r.weights, w, rtol=0, atol=1e-5)
    torch.testing.assert_close(r.output, out, rtol=0, atol=1e-5)
    assert verify_result(r).passed


def test_without_projections_attention_is_plain_similarity():
    inp = I.graph_input(*I.parse_edges("0-1")[:2], 8, 0, "none")
    r = run(inp, RandomLayer(8, 1, projections=False), keep_steps=True)
    x = inp.x[0]  # (L, E)
    expected = torch.softmax(x @ x.T / 8**0.5, -1)
    torch.testing.assert_close(r.weights[0, 0], expected, rtol=0, atol=1e-6)


