"""attnviz.core.efficient: tiled (FlashAttention-style) attention, low-rank attention,
truncated-SVD helpers and the memory arithmetic."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from attnviz.core.attention import scaled_dot_product_attention
from attnviz.core.efficient import (
    TileStep,
    attention_memory,
    low_rank_attention,
    rank_k_output,
    rank_k_outputs,
    relative_error,
    singular_values,
    tiled_attention,
)
from attnviz.core.masks import causal_mask, local_window_mask, padding_mask

ATOL = 1e-5
BLOCKS = [(7, 5), (64, 64), (16, 8), (1, 3)]  # non-dividing, larger than L and S, even, tiny


def _qkv(N=2, H=3, L=37, S=23, D=16, Dv=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, H, L, D, generator=g)  # (N, H, L, D)
    k = torch.randn(N, H, S, D, generator=g)  # (N, H, S, D)
    v = torch.randn(N, H, S, Dv, generator=g)  # (N, H, S, Dv)
    return q, k, v


def _masks(L, S):
    g = torch.Generator().manual_seed(1)
    additive = torch.randn(1, 3, L, S, generator=g)  # (1, H, L, S)
    additive[..., 1::4] = float("-inf")  # some blocked keys, never a whole row
    return {
        "none": None,
        "causal": causal_mask(L, S),  # (L, S)
        "window": local_window_mask(L, 3, S),  # (L, S)
        "padding": padding_mask([S, S // 2], S),  # (N, 1, 1, S)
        "float": additive,
    }


# --- tiled_attention: parity -------------------------------------------------------------


@pytest.mark.parametrize("L,S", [(37, 37), (37, 23), (5, 41)])
@pytest.mark.parametrize("kind", ["none", "causal", "window", "padding", "float"])
@pytest.mark.parametrize("block_q,block_k", BLOCKS)
def test_tiled_matches_torch_sdpa(L, S, kind, block_q, block_k):
    q, k, v = _qkv(L=L, S=S)
    mask = _masks(L, S)[kind]
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, H, L, Dv)
    got = tiled_attention(q, k, v, mask, block_q=block_q, block_k=block_k)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("L,S", [(37, 37), (37, 23), (9, 30)])
@pytest.mark.parametrize("block_q,block_k", BLOCKS)
def test_is_causal_matches_torch_and_the_causal_mask(L, S, block_q, block_k):
    q, k, v = _qkv(L=L, S=S)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (N, H, L, Dv)
    got = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=True)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    via_mask = tiled_attention(q, k, v, causal_mask(L, S), block_q=block_q, block_k=block_k)
    torch.testing.assert_close(via_mask, want, atol=ATOL, rtol=0)


def test_is_causal_combines_with_a_mask():
    q, k, v = _qkv(L=20, S=20)
    window = local_window_mask(20, 4)  # (L, S)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=window & causal_mask(20))
    got = tiled_attention(q, k, v, window, block_q=6, block_k=7, is_causal=True)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_leading_dims_like_pytorch(lead):
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(*lead, n, 8, generator=g) for n in (11, 13, 13))  # (..., L|S, D)
    want = F.scaled_dot_product_attention(q, k, v)
    got = tiled_attention(q, k, v, block_q=4, block_k=5)
    assert got.shape == (*lead, 11, 8)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_batch_dims_broadcast_between_q_k_v_and_mask():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 10, 8, generator=g)  # (N, H, L, D)
    k, v = torch.randn(3, 12, 8, generator=g), torch.randn(1, 12, 6, generator=g)  # (H, S, D), (1, S, Dv)
    pad = padding_mask([12, 5], 12)  # (N, 1, 1, S)
    want, _ = scaled_dot_product_attention(q, k, v, pad)
    got = tiled_attention(q, k, v, pad, block_q=3, block_k=5)
    assert got.shape == (2, 3, 10, 6)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_a_fully_masked_row_gives_zeros_like_attnviz():
    q, k, v = _qkv(L=12, S=15)
    mask = torch.ones(12, 15, dtype=torch.bool)
    mask[3] = False  # query 3 may see nothing
    mask[7, :10] = False  # query 7 sees only the last block's keys
    want, _ = scaled_dot_product_attention(q, k, v, mask)
    for bq, bk in [(4, 5), (1, 1), (64, 64)]:
        got = tiled_attention(q, k, v, mask, block_q=bq, block_k=bk)
        assert not got.isnan().any()
        assert torch.equal(got[..., 3, :], torch.zeros_like(got[..., 3, :]))
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    additive = torch.zeros(12, 15).masked_fill(~mask, float("-inf"))  # the same mask, as a float one
    got = tiled_attention(q, k, v, additive, block_q=4, block_k=5)
    assert not got.isnan().any() and torch.equal(got[..., 3, :], torch.zeros_like(got[..., 3, :]))


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 40), S=st.integers(1, 40), D=st.integers(1, 16), bq=st.integers(1, 17),
       bk=st.integers(1, 17), masked=st.booleans(), seed=st.integers(0, 2**16))
def test_property_tiled_equals_sdpa(L, S, D, bq, bk, masked, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(2, L, D, generator=g), torch.randn(2, S, D, generator=g), torch.randn(2, S, 3, generator=g)
    mask = None
    if masked:
        mask = torch.rand(2, L, S, generator=g) < 0.5  # (N, L, S)
        keep = torch.randint(0, S, (2, L, 1), generator=g)  # one allowed key per row at least
        mask.scatter_(-1, keep, True)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = tiled_attention(q, k, v, mask, block_q=bq, block_k=bk)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_validation():
    q, k, v = _qkv(L=4, S=4)
    with pytest.raises(ValueError, match="block_q must be at least 1"):
        tiled_attention(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="block_k must be at least 1"):
        tiled_attention(q, k, v, block_k=0)
    with pytest.raises(ValueError, match=r"same last dimension.*\(2, 3, 4, 16\).*\(2, 3, 4, 5\)"):
        tiled_attention(q, k[..., :5], v)
    with pytest.raises(ValueError, match="same length S"):
        tiled_attention(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled_attention(q, k, v, torch.ones(3, 4, dtype=torch.bool))


# --- tiled_attention: the trace ----------------------------------------------------------


def test_trace_walks_the_first_query_block():
    q, k, v = _qkv(L=10, S=23, D=8)
    mask = local_window_mask(10, 12, 23)  # (L, S): blocks some keys of the first queries
    out, steps = tiled_attention(q, k, v, mask, block_q=4, block_k=5, trace=True)
    torch.testing.assert_close(out, tiled_attention(q, k, v, mask, block_q=4, block_k=5), atol=0, rtol=0)
    assert all(isinstance(s, TileStep) for s in steps)
    assert [s.key_block for s in steps] == [0, 1, 2, 3, 4]
    assert [s.keys for s in steps] == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]
    scaled = (q[0, 0, :4] @ k[0, 0].T / math.sqrt(8)).masked_fill(~mask[:4], float("-inf"))  # (bq, S)
    for s in steps:
        a, b = s.keys
        assert s.scores.shape == (4, b - a)
        torch.testing.assert_close(s.scores, scaled[:, a:b], atol=ATOL, rtol=0)
        assert (s.ell > 0).all()
        assert s.partial.shape == (4, 12)
    assert torch.equal(steps[0].correction, torch.zeros(4))  # m_old = -inf: nothing to rescale yet
    for prev, s in zip(steps, steps[1:], strict=False):
        assert torch.equal(s.m_old, prev.m_new)
        assert ((s.correction > 0) & (s.correction <= 1)).all()
        torch.testing.assert_close(s.correction, torch.exp(s.m_old - s.m_new))
    torch.testing.assert_close(steps[-1].m_new, scaled.amax(-1))
    torch.testing.assert_close(steps[-1].ell, torch.exp(scaled - scaled.amax(-1, keepdim=True)).sum(-1))
    torch.testing.assert_close(steps[-1].partial, out[0, 0, :4], atol=ATOL, rtol=0)
    # The partial output after step j is attention over the keys seen so far.
    seen = steps[1].keys[1]
    want = F.scaled_dot_product_attention(q[0, 0, :4], k[0, 0, :seen], v[0, 0, :seen], attn_mask=mask[:4, :seen])
    torch.testing.assert_close(steps[1].partial, want, atol=ATOL, rtol=0)


def test_no_trace_is_a_plain_tensor():
    q, k, v = _qkv(L=3, S=3)
    assert isinstance(tiled_attention(q, k, v), torch.Tensor)


# --- tiled_attention: memory -------------------------------------------------------------


class _LargestOutput(TorchDispatchMode):
    """Records the largest numel of any tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("how", ["is_causal", "mask"])
def test_no_L_by_S_tensor_is_created(how):
    L = S = 512
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(L, 16, generator=g) for _ in range(3))  # (L, D)
    mask = causal_mask(L) if how == "mask" else None  # the caller's (L, S) mask is sliced, not copied
    with _LargestOutput() as rec:
        tiled_attention(q, k, v, mask, block_q=64, block_k=64, is_causal=how == "is_causal")
    assert rec.largest <= 64 * 512 < L * S
    with _LargestOutput() as naive:
        scaled_dot_product_attention(q, k, v, mask, is_causal=how == "is_causal")
    assert naive.largest >= L * S  # the recorder does see an (L, S) tensor when one is made


# --- low_rank_attention ------------------------------------------------------------------


def test_low_rank_shape_and_determinism():
    q, k, v = _qkv(L=9, S=20)
    out = low_rank_attention(q, k, v, rank=6)
    assert out.shape == (2, 3, 9, 12) and not out.isnan().any()
    assert torch.equal(out, low_rank_attention(q, k, v, rank=6, seed=1))  # segment means: no seed
    rnd = low_rank_attention(q, k, v, rank=6, projection_kind="random")
    assert torch.equal(rnd, low_rank_attention(q, k, v, rank=6, seed=0, projection_kind="random"))
    assert not torch.allclose(rnd, low_rank_attention(q, k, v, rank=6, seed=1, projection_kind="random"))
    assert torch.allclose(low_rank_attention(q, k, v, rank=20), F.scaled_dot_product_attention(q, k, v), atol=1e-5)
    with pytest.raises(ValueError, match="Unknown projection"):
        low_rank_attention(q, k, v, rank=6, projection_kind="learned")
    assert low_rank_attention(q[0, 0], k[0, 0], v[0, 0], rank=20).shape == (9, 12)


def test_low_rank_rank_bounds():
    q, k, v = _qkv(L=4, S=8)
    with pytest.raises(ValueError, match="rank 9 is over the 8 keys"):
        low_rank_attention(q, k, v, rank=9)
    with pytest.raises(ValueError, match="rank must be at least 1"):
        low_rank_attention(q, k, v, rank=0)


def test_low_rank_key_padding_removes_padded_keys():
    q, k, v = _qkv(L=6, S=10)
    pad = padding_mask([10, 7], 10)  # (N, 1, 1, S): sequence 1 has 3 padded keys
    k_huge, v_huge = k.clone(), v.clone()
    k_huge[1, :, 7:], v_huge[1, :, 7:] = 1e4, -1e4
    clean = low_rank_attention(q, k, v, rank=4, key_padding=pad)
    huge = low_rank_attention(q, k_huge, v_huge, rank=4, key_padding=pad)
    torch.testing.assert_close(huge, clean, atol=ATOL, rtol=0)
    unpadded = low_rank_attention(q, k_huge, v_huge, rank=4)
    assert not torch.allclose(unpadded[1], clean[1], atol=1.0)  # without it the pads take over
    with pytest.raises(ValueError, match="per-query mask"):
        low_rank_attention(q, k, v, rank=4, key_padding=causal_mask(6, 10))
    with pytest.raises(ValueError, match="bool"):
        low_rank_attention(q, k, v, rank=4, key_padding=pad.float())


# --- truncated SVD -----------------------------------------------------------------------


def _weights(L=6, S=9, seed=5):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(2, 3, L, S, generator=g), dim=-1), torch.randn(2, 3, S, 4, generator=g)


def test_full_rank_output_is_the_plain_output():
    w, v = _weights()
    torch.testing.assert_close(rank_k_output(w, v, 6), w @ v, atol=ATOL, rtol=0)
    assert torch.equal(rank_k_output(w, v, 0), torch.zeros(2, 3, 6, 4))
    with pytest.raises(ValueError, match="from 0 to 6"):
        rank_k_output(w, v, 7)


def test_a_sweep_over_ranks_is_each_rank_alone_from_one_svd(monkeypatch):
    w, v = _weights()
    alone = [rank_k_output(w, v, k) for k in (0, 1, 3, 6)]
    svds = []
    real = torch.linalg.svd
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **kw: svds.append(1) or real(*a, **kw))
    swept = rank_k_outputs(w, v, (0, 1, 3, 6))
    assert len(svds) == 1
    for a, b in zip(alone, swept, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="from 0 to 6"):
        rank_k_outputs(w, v, (1, 7))


def test_singular_values_match_torch():
    w, _ = _weights()
    sv = singular_values(w)
    assert sv.shape == (2, 3, 6)
    torch.testing.assert_close(sv, torch.linalg.svdvals(w))


def test_relative_error():
    w, v = _weights()
    o = w @ v  # (N, H, L, Dv)
    assert torch.equal(relative_error(o, o), torch.zeros(2, 3))
    assert torch.equal(relative_error(torch.zeros(3, 4), torch.ones(3, 4)), torch.tensor(0.0))
    torch.testing.assert_close(relative_error(o, 0.5 * o), torch.full((2, 3), 0.5))
    errors = torch.stack([relative_error(o, rank_k_output(w, v, k)) for k in range(7)])  # (k, N, H)
    assert errors.dtype == torch.float32
    assert (errors[1:] <= errors[:-1] + 1e-6).all()  # more singular values never hurt
    assert (errors[0] == 1).all() and (errors[-1] < 1e-5).all()


# --- attention_memory --------------------------------------------------------------------


def test_attention_memory_by_hand():
    got = attention_memory(L=128, S=256, H=2, N=3, D=16, block_q=32, block_k=64, dtype_bytes=4)
    naive = 2 * 3 * 2 * 128 * 256 * 4  # 1,572,864
    tiled = 3 * 2 * 32 * 64 * 4 * 2 + 3 * 2 * 128 * (16 + 2) * 4  # 98,304 + 55,296
    assert got == {"naive": naive, "tiled": tiled, "sdpa": tiled}
    assert got["tiled"] == 153_600
    assert attention_memory(10, 10, 1, D=1)["tiled"] == 2 * 10 * 10 * 4 + 10 * 3 * 4  # blocks clipped to L, S


def test_tiled_is_far_smaller_at_4096():
    got = attention_memory(4096, 4096, 8)
    assert got["tiled"] < got["naive"] / 8
    with pytest.raises(ValueError, match="L must be at least 1"):
        attention_memory(0, 4, 1)
