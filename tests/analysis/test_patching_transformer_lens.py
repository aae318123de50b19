"""Patching and direct logit attribution against TransformerLens's own: ``patching.
get_act_patch_attn_head_out_all_pos`` and ``get_act_patch_resid_pre``, and ``ActivationCache.
stack_head_results(pos_slice=-1, apply_ln=True)`` projected onto ``tokens_to_residual_directions``,
run by its bridge on the same folders (its compatibility mode processes the weights as
``HookedTransformer.from_pretrained`` does: the norms folded in, value biases folded into b_O).
Every norm's weight and bias is perturbed first, so that folding them is tested too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from tests.support import hfmodels

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"
ANSWER, WRONG = "it", "was"


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    """(a folder with perturbed norms, TransformerLens's bridge over it in compatibility mode, its tokenizer)."""
    from transformer_lens.model_bridge import TransformerBridge

    folder, model, tok = hfmodels.save(tmp_path_factory.mktemp("tl"), request.param)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "norm" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder)
    bridge = TransformerBridge.boot_transformers(str(folder))
    bridge.enable_compatibility_mode()
    return folder, bridge, tok


def _ids(tok, text):
    return torch.tensor([tok(text)["input_ids"]])


def _metric(tok, wrong):
    a = tok.convert_tokens_to_ids(ANSWER)
    if wrong is None:
        return lambda logits: torch.log_softmax(logits[0, -1].double(), -1)[a]
    w = tok.convert_tokens_to_ids(wrong)
    return lambda logits: logits[0, -1, a] - logits[0, -1, w]


@pytest.mark.parametrize("wrong", [WRONG, None])
def test_heads_and_the_residual_stream_as_transformer_lens_patches_them(pair, wrong):
    from transformer_lens import patching

    folder, bridge, tok = pair
    _logits, cache = bridge.run_with_cache(_ids(tok, CLEAN))
    corrupted = _ids(tok, CORRUPTED)
    want_heads = patching.get_act_patch_attn_head_out_all_pos(bridge, corrupted, cache, _metric(tok, wrong))
    want_resid = patching.get_act_patch_resid_pre(bridge, corrupted, cache, _metric(tok, wrong))
    heads = attnviz.patch_heads(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=wrong)
    resid = attnviz.patch_residual(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=wrong)
    np.testing.assert_allclose(heads.heads, want_heads.detach().double().numpy(), atol=1e-5)
    np.testing.assert_allclose(resid.residual, want_resid.detach().double().numpy(), atol=1e-5)
    assert np.ptp(heads.heads) > 1e-4


def test_logit_attribution_as_transformer_lens_reads_it(pair):
    folder, bridge, tok = pair
    logits, cache = bridge.run_with_cache(_ids(tok, CLEAN))
    a, w = tok.convert_tokens_to_ids(ANSWER), tok.convert_tokens_to_ids(WRONG)
    stack = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)  # (layers·H, 1, E)
    direction = bridge.tokens_to_residual_directions(torch.tensor(a)) - bridge.tokens_to_residual_directions(
        torch.tensor(w))
    want = (stack @ direction).squeeze(-1).detach().double().numpy()  # (layers·H, 1)
    got = attnviz.logit_attribution(str(folder), CLEAN, answer=ANSWER, wrong=WRONG)
    np.testing.assert_allclose(got.heads.reshape(-1), want.reshape(-1), atol=1e-5)
    assert np.abs(want).max() > 1e-3
    assert got.logit_difference == pytest.approx(float((logits[0, -1, a] - logits[0, -1, w]).detach()), abs=1e-5)
    assert got.total == pytest.approx(got.logit_difference, abs=1e-4)
