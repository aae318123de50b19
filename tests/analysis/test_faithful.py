"""The exact effect of single edges (attnviz.analysis.faithful, through ``attnviz.path_patch(edges=)``):
against TransformerLens-style direct path patching with the prompts' roles swapped (``path_patch`` with
a component, itself checked against TransformerLens 4.3 in test_pathpatch), against the faithfulness of
every edge but one, and the rank agreement against a rank correlation written out."""

from __future__ import annotations

import math

import numpy as np
import pytest

import attnviz
from attnviz.analysis.faithful import rank_agreement
from attnviz.models.tiny import AttentionOnly
from tests.support import circuits

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"
ANSWER, WRONG = "it", "was"


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def folder(request, tmp_path_factory):
    folder, _model, _tok = circuits.perturbed(tmp_path_factory.mktemp("faithful"), request.param)
    return str(folder)


def test_a_head_to_head_edge_is_path_patching_with_the_roles_swapped(folder):
    e = attnviz.edge_attribution(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    names = [f"a0.h{h}->a1.h{g}<{c}>" for c in "qkv" for h in (0, 1) for g in (0, 3)]
    effects = attnviz.path_patch(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, edges=names)
    assert list(effects) == names
    for c in "qkv":
        # the clean run with the corrupted sender's write into the receiver's one input
        swapped = attnviz.path_patch(folder, CORRUPTED, CLEAN, answer=ANSWER, wrong=WRONG, component=c).numpy()
        for h in (0, 1):
            for g in (0, 3):
                want = swapped[0, h, 1, g] - effects.clean
                got = effects[f"a0.h{h}->a1.h{g}<{c}>"]
                assert got == pytest.approx(want, abs=1e-4 * max(1.0, abs(want)))
    assert max(abs(v) for v in effects.values()) > 1e-4  # edges that matter: a patch in the wrong place would show
    assert effects.clean == pytest.approx(e.clean) and effects.corrupted == pytest.approx(e.corrupted)


def test_any_edge_is_the_faithfulness_of_every_other_edge(folder):
    e = attnviz.edge_attribution(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    names = [n for n, _s in e.top(4)] + ["input->m0", "m1->logits"]
    effects = attnviz.path_patch(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, edges=names)
    for name in names:
        rest = attnviz.circuit_faithfulness(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG,
                                            edges=[n for n in e if n != name])
        assert effects[name] == pytest.approx(rest.metric - rest.clean, abs=1e-5 * max(1.0, abs(rest.clean)))
    # EAP's first-order estimate of the top edge has the exact effect's sign here (small prompts, small changes)
    top = names[0]
    assert math.copysign(1, e[top]) == math.copysign(1, effects[top])


def test_rank_agreement_is_spearmans_rho():
    class Scores(dict):  # the attribution's one use here: a score by name
        pass

    a = Scores({"x": 3.0, "y": -1.0, "z": 2.0, "w": 2.0})
    b = {"x": 0.5, "y": 0.1, "z": 0.2, "w": 0.4}
    # ranks with ties averaged: a -> x 3, y 0, z 1.5, w 1.5; b -> x 3, y 0, z 1, w 2
    ra, rb = np.array([3, 0, 1.5, 1.5]), np.array([3, 0, 1, 2])
    want = float(((ra - ra.mean()) * (rb - rb.mean())).sum() / math.sqrt(((ra - ra.mean()) ** 2).sum()
                                                                          * ((rb - rb.mean()) ** 2).sum()))
    assert rank_agreement(a, b) == pytest.approx(want)
    assert rank_agreement(a, {k: -v for k, v in b.items()}) == pytest.approx(-want)
    assert math.isnan(rank_agreement(a, {"x": 1.0})) and math.isnan(rank_agreement(a, {"x": 1.0, "y": 1.0}))


def test_the_refusals():
    model = AttentionOnly(vocab=20, length=16, layers=2, heads=2, d_model=16, seed=0).eval()
    clean, corrupted = [1, 5, 9, 12, 5], [1, 6, 9, 12, 5]
    with pytest.raises(ValueError, match="either component"):
        attnviz.path_patch(model, clean, corrupted, answer=9)
    with pytest.raises(ValueError, match="either component"):
        attnviz.path_patch(model, clean, corrupted, answer=9, component="q", edges=["a0.h0->a1.h1<q>"])
    with pytest.raises(ValueError, match="“a1.h0->a0.h1<q>” is not an edge of"):
        attnviz.path_patch(model, clean, corrupted, answer=9, edges=["a0.h0->a1.h1<q>", "a1.h0->a0.h1<q>"])
    one = attnviz.path_patch(model, clean, corrupted, answer=9, edges="a0.h0->a1.h1<k>")  # one name alone
    assert list(one) == ["a0.h0->a1.h1<k>"]


def test_what_the_dropped_edges_carry_is_the_dense_sum_whichever_side_is_summed():
    """``carried`` sums a row's dropped edges one by one (an edge's effect), or every sender less its kept edges
    (a curve's top edges), or densely (half and half): each row, in one batch of all three, equals the dense
    Σ_f dropped · (corrupted − now) written out."""
    import torch

    from attnviz.analysis.faithful import carried

    g = torch.Generator().manual_seed(0)
    B, L, F, R, E = 5, 3, 40, 6, 4
    acts = [torch.randn(B, L, k, E, generator=g) for k in (1, 7, 12, 9, 15)]  # 44 senders: the first F are read
    corrupted = torch.randn(L, F, E, generator=g)
    dropped = torch.zeros(B, F, R)
    dropped[0, 3, 2] = dropped[0, 39, 5] = 1  # two edges dropped
    dropped[1] = 1
    dropped[1, 0, 0] = dropped[1, 20, 4] = 0  # two edges kept
    dropped[2] = (torch.rand(F, R, generator=g) < 0.5).float()  # half and half
    dropped[3] = 1  # every edge dropped
    now = torch.cat(acts, 2)[:, :, :F]
    want = torch.einsum("bfr,blfe->rble", dropped, corrupted[None] - now)  # row 4: nothing dropped
    got = carried(dropped, corrupted, acts)
    assert got.shape == (R, B, L, E) and float(want.abs().max()) > 1
    assert torch.allclose(got, want, atol=1e-5)
    assert float(got[:, 4].abs().max()) == 0.0
