"""Score attribution (attnviz.analysis.scoreattr, through attnviz.score_attribution): the terms sum
to the score and the score is TransformerLens's ``hook_attn_scores`` on GPT-2, LLaMA (rotary,
grouped-query) and GPT-NeoX (rotary on a quarter of each head) folders with every norm and bias
perturbed; on Watch it learn's model, the score is q·k/√D of its own steps; the refusals. And the
receiver's attention with one path patched (``pathpatch.edge_attention``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.patching import runs
from attnviz.analysis.pathpatch import edge_attention
from attnviz.analysis.subjects import TinySubject
from attnviz.models.tiny import AttentionOnly
from tests.support import circuits, hfmodels

TEXT = "the cat sat on the mat"
CELLS = [(0, 1, 5, 2), (1, 3, 5, 5), (1, 0, 4, 0), (1, 2, 3, 1)]


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    folder, _model, tok = circuits.perturbed(tmp_path_factory.mktemp("scores"), request.param)
    bridge = circuits.bridge(folder)
    _logits, cache = bridge.run_with_cache(torch.tensor([tok(TEXT)["input_ids"]]))
    return request.param, folder, cache


@pytest.mark.parametrize("layer, head, query, key", CELLS)
def test_the_terms_sum_to_the_score_which_is_transformer_lens_s(pair, layer, head, query, key):
    kind, folder, cache = pair
    a = attnviz.score_attribution(str(folder), TEXT, layer=layer, head=head, query=query, key=key)
    want = float(cache[f"blocks.{layer}.attn.hook_attn_scores"][0, head, query, key])
    assert a.score == pytest.approx(want, abs=1e-4)
    assert a.total == pytest.approx(a.score, abs=1e-4)
    assert a.terms.shape == (len(a.query_parts), len(a.key_parts))
    assert a.query_parts[0] == "token embedding" and ("position embedding" in a.query_parts) == (kind == "gpt2")
    assert [p for p in a.query_parts if p.startswith(f"L{layer - 1}H")] == [f"L{layer - 1}H{h}" for h in range(4)
                                                                             if layer > 0]
    assert (f"L{layer - 1} MLP" in a.query_parts) == (layer > 0)
    assert ("norm bias" in a.query_parts) == (kind != "llama")  # LLaMA's RMSNorm and projections have no bias
    assert (a.key_parts[-1] == "key bias") == (kind != "llama") and a.query_parts[-1] != "key bias"
    assert np.count_nonzero(np.abs(a.terms.numpy()) > 1e-3) > (1 if kind != "llama" or layer else 0)


def test_the_tiny_models_score_is_q_dot_k_over_root_d_of_its_own_steps():
    model = AttentionOnly(vocab=32, length=19, layers=2, heads=2, d_model=32, seed=3).eval()
    text = "BOS 5 9 12 7 5 9"
    a = attnviz.score_attribution(model, text, layer=1, head=1, query=6, key=2)
    ids = torch.tensor([TinySubject(model, "t").ids(text)])
    with torch.no_grad():
        x = model.inputs(ids)
        x = x + model.layers[0](x, attn_mask=model.mask[:7, :7])[0]
        steps = model.layers[1].steps(x, attn_mask=model.mask[:7, :7])
    want = float(steps.q[0, 1, 6] @ steps.k[0, 1, 2]) / 16 ** 0.5
    assert a.score == pytest.approx(want, abs=1e-5) and a.total == pytest.approx(want, abs=1e-5)
    assert a.query_parts == ["token embedding", "position embedding", "L0H0", "L0H1"]  # no norm, no bias, no MLP
    assert a.weight == pytest.approx(float(steps.weights[0, 1, 6, 2]), abs=1e-6)
    top = a.top(3)
    assert abs(top[0][2]) >= abs(top[1][2]) >= abs(top[2][2]) > 0
    nk = len(a.key_parts)
    flat = a.terms.flatten()
    assert float(flat.abs().max()) == pytest.approx(abs(top[0][2]))
    i = int(flat.abs().argmax())
    assert (top[0][0], top[0][1]) == (a.query_parts[i // nk], a.key_parts[i % nk])
    def said(part, position):
        return {"token embedding": f"token embedding of “{a.tokens[position]}”",
                "position embedding": f"position embedding of position {position}",
                "L0H0": f"L0 H0's output at “{a.tokens[position]}”",
                "L0H1": f"L0 H1's output at “{a.tokens[position]}”"}[part]

    assert a.words(2) == [f"{said(q, 6)} · {said(k, 2)}: {v:+.2f}" for q, k, v in top[:2]]
    assert a.to_dict()["top_terms"] == a.words(5)


@pytest.mark.parametrize("cell, words", [
    (dict(query=2, key=4), "The key 4 is after the query 2: a causal model's query never sees a later key"),
    (dict(query=9, key=0), "The query 9 does not exist: .* has 6 positions in this prompt"),
    (dict(layer=5), "The layer 5 does not exist"),
    (dict(head=-1), "The head -1 does not exist"),
])
def test_a_cell_that_has_no_score_is_refused_in_one_line(tmp_path, cell, words):
    folder = hfmodels.save(tmp_path, "gpt2")[0]
    args = dict(layer=1, head=0, query=5, key=1) | cell
    with pytest.raises(ValueError, match=words) as e:
        attnviz.score_attribution(str(folder), TEXT, **args)
    assert "\n" not in str(e.value)


def test_an_encoder_is_refused(tmp_path):
    folder = hfmodels.save(tmp_path, "bert")[0]
    with pytest.raises(ValueError, match="is an encoder"):
        attnviz.score_attribution(str(folder), TEXT, layer=0, head=0, query=1, key=0)


def test_the_receivers_attention_with_a_path_patched(pair):
    kind, folder, cache = pair
    from attnviz.learn.trained import subject_of

    subject = subject_of(str(folder))
    ran = runs(subject, TEXT, "the mat sat on the cat", answer="it")
    base, k = edge_attention(subject, ran, (0, 1), (1, 2), "k")
    np.testing.assert_allclose(base, ran.corrupted.weights[1][0, 2].double().numpy(), atol=1e-5)  # the model's own
    assert np.abs(k - base).max() > 1e-3 and np.allclose(k.sum(-1), 1)
    _b, v = edge_attention(subject, ran, (0, 1), (1, 2), "v")
    np.testing.assert_array_equal(v, base)  # a value's path does not move attention
    with pytest.raises(ValueError, match="The receiver L0 H2 is not after the sender L1 H1: a head reads only"):
        edge_attention(subject, ran, (1, 1), (0, 2), "q")
    with pytest.raises(ValueError, match="The receiver L1 H3 is not after the sender L1 H0"):
        edge_attention(subject, ran, (1, 0), (1, 3), "q")
