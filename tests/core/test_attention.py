import math

import pytest
import torch
import torch.nn.functional as F

from attnviz import scaled_dot_product_attention as sdpa
from attnviz.core.attention import attention_steps
from attnviz.core.masks import causal_mask, local_window_mask, padding_mask, to_additive

TOL = 1e-5


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def masks_for(N, L, S):
    yield "none", None
    yield "causal", causal_mask(L, S)
    yield "window", local_window_mask(L, 1, S)
    yield "padding", padding_mask([S] + [max(1, S - 2)] * (N - 1), S)
    yield "causal+window+padding", causal_mask(L, S) & local_window_mask(L, 2, S) & padding_mask(
        [S] + [max(1, S - 1)] * (N - 1), S)


@pytest.mark.parametrize("N,H,L,S,E", [(1, 1, 3, 3, 4), (2, 8, 5, 5, 64), (3, 4, 7, 11, 16), (2, 2, 9, 4, 8)])
def test_parity_with_torch_sdpa(N, H, L, S, E):
    q, k, v = rand(N, H, L, E, seed=1), rand(N, H, S, E, seed=2), rand(N, H, S, E, seed=3)
    for name, m in masks_for(N, L, S):
        out, w = sdpa(q, k, v, attn_mask=m)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        ok = torch.ones(N, H, L, 1, dtype=torch.bool) if m is None else m.expand(N, H, L, S).any(-1, keepdim=True)
        assert (out - ref).abs().where(ok, 0).max() <= TOL, name
        # weights against an explicit softmax with -inf
        scores = q @ k.transpose(-2, -1) / math.sqrt(E)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        ref_w = torch.softmax(scores, -1).nan_to_num(0.0)
        assert (w - ref_w).abs().max() <= TOL, name
        # a float (additive) mask gives the same as the bool one
        if m is not None:
            out_f, w_f = sdpa(q, k, v, attn_mask=to_additive(m))
            assert (out_f - out).abs().max() <= TOL and (w_f - w).abs().max() <= TOL


def test_is_causal_matches_torch_and_combines():
    q, k, v = rand(2, 3, 6, 8), rand(2, 3, 6, 8, seed=4), rand(2, 3, 6, 8, seed=5)
    out, _ = sdpa(q, k, v, is_causal=True)
    assert (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() <= TOL
    _, w = sdpa(q, k, v, attn_mask=local_window_mask(6, 1), is_causal=True)
    assert (w[..., ~(causal_mask(6) & local_window_mask(6, 1))] == 0).all()


def test_rows_sum_to_one_and_masked_entries_are_exactly_zero():
    q, k, v = rand(2, 4, 6, 8), rand(2, 4, 6, 8, seed=7), rand(2, 4, 6, 8, seed=8)
    m = causal_mask(6) & padding_mask([6, 4], 6)
    _, w = sdpa(q, k, v, attn_mask=m)
    full = m.expand_as(w)
    assert (w[~full] == 0).all()
    sums = w.sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-6)


def test_fully_masked_row_is_zero_weights_and_zero_output_without_nan():
    q = rand(1, 1, 3, 4).requires_grad_()
    k, v = rand(1, 1, 3, 4, seed=1).requires_grad_(), rand(1, 1, 3, 4, seed=2).requires_grad_()
    m = torch.tensor([[True, False, False], [False, False, False], [False, True, True]])
    out, w = sdpa(q, k, v, attn_mask=m)
    assert w[0, 0, 1].tolist() == [0.0, 0.0, 0.0]
    assert out[0, 0, 1].tolist() == [0.0] * 4
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_dropout_is_reproducible_with_a_generator_and_off_at_zero():
    q, k, v = rand(1, 2, 5, 4), rand(1, 2, 5, 4, seed=1), rand(1, 2, 5, 4, seed=2)
    a = sdpa(q, k, v, dropout_p=0.5, generator=torch.Generator().manual_seed(3))
    b = sdpa(q, k, v, dropout_p=0.5, generator=torch.Generator().manual_seed(3))
    c = sdpa(q, k, v, dropout_p=0.5, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])
    assert ((a[1] == 0) | (a[1] > 0)).all() and (a[1] == 0).any()
    nodrop = sdpa(q, k, v)
    assert torch.equal(nodrop[1], sdpa(q, k, v, dropout_p=0.0)[1])
    with pytest.raises(ValueError, match="dropout_p"):
        sdpa(q, k, v, dropout_p=1.0)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="same last dimension"):
        sdpa(rand(2, 4), rand(2, 5), rand(2, 5))
    with pytest.raises(ValueError, match="same length S"):
        sdpa(rand(2, 4), rand(3, 4), rand(2, 4))


def test_steps_are_consistent():
    q, k, v = rand(1, 2, 4, 8), rand(1, 2, 4, 8, seed=1), rand(1, 2, 4, 8, seed=2)
    s = attention_steps(q, k, v, causal_mask(4))
    assert torch.allclose(s.scaled, s.scores / math.sqrt(8))
    assert torch.isinf(s.masked[..., 0, 1]).all() and torch.equal(s.masked[..., 1, 0], s.scaled[..., 1, 0])
    assert torch.allclose(s.output, s.weights @ v)


def test_steps_hold_the_weights_and_make_the_scores_when_read():
    """Without a gradient a call keeps one (L, S) buffer, the weights; the scaled scores are
    made again from Q and K on reading, the same numbers as in the pass (the weights are
    their softmax), and moving the steps keeps that."""
    q, k, v = rand(2, 3, 5, 8), rand(2, 3, 7, 8, seed=1), rand(2, 3, 7, 8, seed=2)
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[:, 0] = True
    with torch.no_grad():
        s = attention_steps(q, k, v, mask)
    assert s._scaled is None and s._scores is None and s._masked is None and s.complete
    assert s.shape_of("scores") == (2, 3, 5, 7)
    assert torch.allclose(s.scores, q @ k.transpose(-2, -1), atol=1e-5)
    want = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    assert torch.allclose(s.masked, want, atol=1e-5) and torch.isinf(s.masked[..., ~mask]).all()
    assert torch.equal(torch.softmax(s.masked, -1), s.weights)  # the very numbers the weights came from
    moved = attention_steps(q, k, v, mask).map(lambda t: t.clone())
    assert torch.equal(moved.scaled, s.scaled) and moved.qk[0] is not q
    q.requires_grad_(True)
    g = attention_steps(q, k, v, mask)  # a gradient flows back through every step: each is kept
    assert g._scaled is not None and g._masked is not None
    g.scores.sum().backward()
    assert q.grad is not None
