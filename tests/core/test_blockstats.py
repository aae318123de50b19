"""Long-context numbers folded tile by tile (attnviz.core.blockstats) against the same numbers
from the dense weight matrix, on random q and k: causal and not, grouped-query heads, blocks
that a tile holds several of and blocks longer than a tile."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnviz.core import blockstats as B
from tests.support.longmodels import dense_numbers


def _dense(q, k, causal):
    """(1, H, L, L) float64 weights of q (already scaled) against k, each query head with its KV head."""
    H, L, _ = q.shape
    s = (q @ k.repeat_interleave(H // k.shape[0], 0).transpose(-1, -2)).double()  # (H, L, L)
    if causal:
        s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1)[None].numpy(), torch.logsumexp(s, -1).float()


CASES = [  # (H, KV, L, D, blocks, tile, causal)
    (4, 2, 333, 8, 16, 64, True),  # several blocks per tile, the last block shorter
    (4, 2, 333, 8, 16, 64, False),
    (2, 1, 100, 4, 7, 8, True),  # blocks (15 tokens) longer than a tile (8)
    (2, 2, 50, 4, 3, 8, False),
    (3, 3, 3, 4, 256, 512, True),  # fewer tokens than blocks, fewer than the 4 sink tokens
]


@pytest.mark.parametrize("H,KV,L,D,blocks,tile,causal", CASES)
def test_every_number_equals_the_dense_ones(H, KV, L, D, blocks, tile, causal):
    gen = torch.Generator().manual_seed(L)
    q, k = torch.randn(H, L, D, generator=gen), torch.randn(KV, L, D, generator=gen)
    a, lse = _dense(q, k, causal)
    got = B.layer_stats(q, k, lse, causal=causal, blocks=blocks, tile=tile)
    ref = {name: v[0] for name, v in dense_numbers(a, blocks, causal).items()}
    sums = got.block_sum.numpy()
    b, nb = B.blocks_of(L, blocks)
    sizes = np.diff(np.minimum(np.arange(0, L + b, b), L))
    mine = {"overview": got.block_max.numpy(), "overview_mean": sums / np.outer(sizes, sizes),
            "received": got.received.numpy(), "sink": got.sink.numpy(), "distance": got.distance.numpy(),
            "entropy": got.entropy.numpy()}
    for name, want in ref.items():
        assert mine[name].shape == want.shape, name
        assert np.abs(mine[name] - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), name
    # block means × areas give the attention received, block by block of keys
    per_key_block = np.add.reduceat(got.received.numpy(), np.arange(0, L, b), axis=-1)
    assert np.allclose(sums.sum(-2), per_key_block, atol=1e-6 * L)


def test_the_online_normaliser_is_the_log_sum_exp():
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(4, 300, 8, generator=gen), torch.randn(2, 300, 8, generator=gen)
    for causal in (True, False):
        _a, lse = _dense(q, k, causal)
        assert (B.row_lse(q, k, causal=causal, tile=64) - lse).abs().max() < 1e-5


def test_the_tile_size_does_not_change_the_numbers():
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(4, 257, 8, generator=gen), torch.randn(2, 257, 8, generator=gen)
    lse = B.row_lse(q, k, causal=True)
    one, two = (B.layer_stats(q, k, lse, causal=True, blocks=32, tile=t) for t in (16, 100))
    for name in ("block_max", "block_sum", "received", "sink", "distance", "entropy"):
        assert torch.allclose(getattr(one, name).double(), getattr(two, name).double(), atol=1e-6, rtol=1e-6), name


def test_blocks_are_equal_but_the_last():
    assert B.blocks_of(32768, 256) == (128, 256)
    assert B.blocks_of(1000, 256) == (4, 250)  # ⌈1000 / 256⌉ = 4 tokens a block
    assert B.blocks_of(10, 256) == (1, 10)
    assert B.segments(10, 3, 4) == [(0, 3), (3, 6), (6, 9), (9, 10)]  # a tile holds whole blocks
    assert B.segments(10, 6, 4) == [(0, 4), (4, 6), (6, 10)]  # a block longer than a tile: tiles within it
    with pytest.raises(ValueError, match="blocks must be a whole number of at least 1"):
        B.blocks_of(10, 0)


def test_a_window_is_the_dense_weights():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 90, 8, generator=gen), torch.randn(1, 90, 8, generator=gen)
    a, lse = _dense(q, k, True)
    w = B.window(q[1], k[0], lse[1], causal=True, q0=40, k0=30, size=64)
    assert w.shape == (50, 60)  # cut at the end of the sequence
    assert np.abs(w.numpy() - a[0, 1, 40:90, 30:90]).max() < 1e-6
