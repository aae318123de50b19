"""The logit lens against TransformerLens 4.3's own, run by its bridge in compatibility mode on the
same folders, every bias and norm perturbed (so that folding and centring are tested too):

- per-layer: ``ActivationCache.accumulated_resid(apply_ln=True, incl_mid=True)`` (the final norm
  recomputed on each stream) then the unembedding, ``@ W_U + b_U``;
- final-scale: ``accumulated_resid(incl_mid=True)`` through ``apply_ln_to_stack(layer=-1)`` (the
  final stream's cached scale) then the unembedding.

TransformerLens centres the unembedding (``center_unembed``), so its logits are attnviz's less their
mean over the vocabulary; the softmax, the top tokens, the KL and the answer's centred logit are the
same. GPT-NeoX runs its attention and MLP side by side: TransformerLens has no ``resid_mid`` there,
and attnviz no middle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.lens import point_logits
from attnviz.analysis.subjects import registry_subject
from tests.support import hfmodels
from tests.support.reference import assert_within as close

TEXT, ANSWER = "the cat sat on the mat because it", "was"


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    """(kind, folder, TransformerLens's bridge over it in compatibility mode, its tokenizer)."""
    from transformer_lens.model_bridge import TransformerBridge

    folder, _model, tok = hfmodels.perturbed(tmp_path_factory.mktemp("lens-tl"), request.param)
    bridge = TransformerBridge.boot_transformers(str(folder))
    bridge.enable_compatibility_mode()
    return request.param, folder, bridge, tok


def _transformer_lens(pair, apply_ln: bool):
    """TransformerLens's points (labels, (points, L, V) logits) on TEXT."""
    kind, _folder, bridge, tok = pair
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    with torch.no_grad():
        _logits, cache = bridge.run_with_cache(ids)
        stack, labels = cache.accumulated_resid(incl_mid=kind != "neox", apply_ln=apply_ln, return_labels=True)
        if not apply_ln:
            stack = cache.apply_ln_to_stack(stack, layer=-1)  # the final stream's cached scale
        logits = stack[:, 0] @ bridge.W_U + bridge.b_U  # (points, L, V)
    return labels, logits.double().numpy()


def _attnviz(pair, mode: str):
    _kind, folder, _bridge, tok = pair
    subject = registry_subject(str(folder), "lens")
    trace = subject.stack.run(torch.tensor([tok(TEXT)["input_ids"]]))
    names, logits = zip(*point_logits(subject.stack, trace, mode=mode), strict=True)
    logits = torch.stack(logits).double().numpy()  # (points, L, V)
    return list(names), logits - logits.mean(-1, keepdims=True)  # centred, as TransformerLens's


@pytest.mark.parametrize("mode", ["per-layer", "final-scale"])
def test_every_points_logits_are_transformer_lens_accumulated_resid_through_the_unembedding(pair, mode):
    labels, want = _transformer_lens(pair, apply_ln=mode == "per-layer")
    names, got = _attnviz(pair, mode)
    assert len(names) == len(labels) and names[0] == "embeddings" and labels[-1] == "final_post"
    assert [n.endswith("middle") for n in names] == [lb.endswith("_mid") for lb in labels]
    close(got, want)
    assert np.ptp(want[:, :, 0]) > 1e-2  # the points differ: a wrong one would show


def test_the_numbers_are_transformer_lens_logits_read(pair):
    _kind, folder, bridge, tok = pair
    _labels, logits = _transformer_lens(pair, apply_ln=True)  # (points, L, V)
    r = attnviz.logit_lens(str(folder), TEXT, mode="per-layer", answer=ANSWER, k=3)
    a = tok.convert_tokens_to_ids(ANSWER)
    logq = torch.log_softmax(torch.tensor(logits), -1)  # (points, L, V)
    q, own = logq.exp(), logq[-1]
    close(r.answer_logit, logits[..., a])  # TransformerLens's logits are centred: the convention is the same
    close(r.answer_prob, q[..., a])
    close(r.entropy, -(q * logq).sum(-1))
    close(r.kl, (own.exp() * (own - logq)).sum(-1))
    np.testing.assert_array_equal(r.answer_rank, (logits > logits[..., a:a + 1]).sum(-1))
    np.testing.assert_array_equal(r.top_ids, logq.topk(3, -1).indices.numpy())
    close(r.top_probs, logq.topk(3, -1).values.exp())
