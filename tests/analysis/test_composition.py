"""Composition scores (attnviz.analysis.composition, through attnviz.composition_scores): against
TransformerLens's ``all_composition_scores`` on GPT-2, LLaMA (grouped-query) and GPT-NeoX folders
with every norm and bias perturbed (its weights folded and centred as ``from_pretrained`` processes
them), against the formula written out on Watch it learn's model, and the refusals."""

from __future__ import annotations

import pytest
import torch

import attnviz
from attnviz.models.tiny import AttentionOnly
from tests.support import circuits, hfmodels


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    folder = circuits.perturbed(tmp_path_factory.mktemp("comp"), request.param)[0]
    return folder, circuits.bridge(folder)


@pytest.mark.parametrize("mode", ["q", "k", "v"])
def test_composition_scores_as_transformer_lens_computes_them(pair, mode):
    folder, bridge = pair
    want = bridge.all_composition_scores(mode.upper()).scores.detach()
    got = attnviz.composition_scores(str(folder), mode)
    assert got.shape == want.shape == (2, 4, 2, 4)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    assert want[0, :, 1].min() > 1e-3 and not got[1].any() and not got[:, :, 0].any()  # later receivers only


def _norm(m):
    return torch.linalg.matrix_norm(m.double())


def test_the_tiny_models_scores_are_the_formula_on_its_weights_as_they_are():
    model = AttentionOnly(vocab=32, length=19, layers=3, heads=2, d_model=16, seed=3).eval()
    D = 8
    scores = {m: attnviz.composition_scores(model, m) for m in "qkv"}

    def head(layer, h):
        a = model.layers[layer]
        cols = slice(h * D, (h + 1) * D)
        w_q, w_k, w_v = (w.detach().T[:, cols] for w in (a.w_q, a.w_k, a.w_v))  # (E, D): x @ w
        w_o = a.out_proj.weight.detach().T[cols]  # (D, E)
        return w_q, w_k, w_v, w_o

    for s, r in ((0, 1), (0, 2), (1, 2)):
        for hs in range(2):
            for hr in range(2):
                _q, _k, v, o = head(s, hs)
                q, k, vr, orr = head(r, hr)
                ov = v @ o
                for mode, right in (("q", q @ k.T), ("k", k @ q.T), ("v", vr @ orr)):
                    want = _norm(ov @ right) / (_norm(ov) * _norm(right))
                    assert float(scores[mode][s, hs, r, hr]) == pytest.approx(float(want), abs=1e-5)
    for m in "qkv":
        assert not scores[m][1, :, 0].any() and not scores[m][2, :, :2].any()


def test_a_mode_that_is_not_q_k_or_v_is_refused_and_so_is_an_encoder(tmp_path):
    with pytest.raises(ValueError, match="mode must be 'q', 'k' or 'v'"):
        attnviz.composition_scores(AttentionOnly(vocab=8, length=4, layers=2, heads=2, d_model=8), "o")
    folder = hfmodels.save(tmp_path, "bert")[0]
    with pytest.raises(ValueError, match="is an encoder: it has no next token"):
        attnviz.composition_scores(str(folder), "q")
