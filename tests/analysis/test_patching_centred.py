"""Direct logit attribution without a wrong token, in TransformerLens's centred convention
(``center_unembed``): its own four cases, written out on attnviz's folders (every bias and norm
perturbed) and run by its bridge in compatibility mode:

- ``test_logit_attrs_works_for_all_input_shapes``, without incorrect tokens: ``cache.logit_attrs``
  of ``accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1)`` onto one token;
- ``test_decomposition_reconstructs_logit[component|layer|head]`` with one token:
  ``direct_logit_attribution(model, prompt, answer_tokens=…, unit=…)``, whose parts sum to
  logit[answer] − b_U[answer], TransformerLens's logit and b_U both centred.

attnviz's parts sum to the centred logit with the biases as one more part, so TransformerLens's sum
is attnviz's less ``biases``; the raw logit (``raw_logit``) differs from it here by the mean logit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from tests.support import hfmodels
from tests.support.reference import assert_within as close

PROMPT, ANSWER = "the cat sat on the mat because it", "was"


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def run(request, tmp_path_factory):
    """(kind, attnviz's attribution, TransformerLens's bridge, its cache, the ids, its logits at the last
    position, the answer's id)."""
    from transformer_lens.model_bridge import TransformerBridge

    folder, _model, tok = hfmodels.perturbed(tmp_path_factory.mktemp("dla"), request.param)
    bridge = TransformerBridge.boot_transformers(str(folder))
    bridge.enable_compatibility_mode()
    ids = torch.tensor([tok(PROMPT)["input_ids"]])
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(ids)
    a = tok.convert_tokens_to_ids(ANSWER)
    got = attnviz.logit_attribution(str(folder), PROMPT, answer=ANSWER)
    return request.param, got, bridge, cache, ids, logits[0, -1].double(), a


def _cumulative(kind, got) -> np.ndarray:
    """attnviz's parts added up point by point: the embeddings, then each layer's attention (its middle,
    where it has one) and its MLP (its end)."""
    out, now = [got.embeddings], got.embeddings
    for layer in range(len(got.mlps)):
        now += got.heads[layer].sum() + got.attention_biases[layer]
        if kind != "neox":
            out.append(now)
        now += got.mlps[layer]
        out.append(now)
    return np.array(out)


def test_the_centred_logit_and_biases_are_transformer_lens_own(run):
    _kind, got, bridge, _cache, _ids, logits, a = run
    close(got.logit_difference, logits[a])  # the bridge's logits are centred
    close(got.biases, bridge.b_U[a].double())  # the norm's bias folded into b_U, centred
    assert abs(got.raw_logit - got.logit_difference) > 1e-3  # the uncentred convention would fail these cases
    assert got.total == pytest.approx(got.logit_difference, abs=1e-4)


def test_logit_attrs_works_for_all_input_shapes_without_incorrect_tokens(run):
    kind, got, _bridge, cache, _ids, _logits, a = run
    with torch.no_grad():
        accumulated = cache.accumulated_resid(layer=-1, incl_mid=kind != "neox", pos_slice=-1)  # (points, 1, E)
        want = cache.logit_attrs(accumulated, pos_slice=-1, tokens=torch.tensor([a]))[:, 0]  # (points,)
    close(_cumulative(kind, got), want.double())


@pytest.mark.parametrize("unit", ["component", "layer", "head"])
def test_decomposition_reconstructs_logit(run, unit):
    from transformer_lens.tools.analysis import direct_logit_attribution

    kind, got, bridge, cache, ids, logits, a = run
    with torch.no_grad():
        if unit == "layer" and kind == "neox":  # its own call asks for resid_mid, which NeoX has not: without middles
            stack = cache.accumulated_resid(layer=-1, incl_mid=False, pos_slice=-1)
            res = cache.logit_attrs(stack, pos_slice=-1, tokens=a).double().reshape(-1)
            labels = None
        else:
            out = direct_logit_attribution(bridge, ids, answer_tokens=a, unit=unit)
            res, labels = out.attribution.double().reshape(-1), out.labels
    total = res[-1] if unit == "layer" else res.sum()
    close(total, logits[a] - bridge.b_U[a].double())  # TransformerLens's own assertion
    close(total, got.total - got.biases)
    if unit == "layer":
        close(res, _cumulative(kind, got))
    elif unit == "head":
        assert labels[-1] == "remainder"
        close(res[:-1], got.heads.reshape(-1))
        close(res[-1], got.total - got.biases - got.heads.sum())
    else:
        parts = dict(zip(labels, res.tolist(), strict=True))
        close(parts["embed"] + parts.get("pos_embed", 0.0), got.embeddings)
        close([parts[f"{i}_attn_out"] for i in range(len(got.mlps))], got.heads.sum(1) + got.attention_biases)
        close([parts[f"{i}_mlp_out"] for i in range(len(got.mlps))], got.mlps)
