"""Property tests over shapes, masks and windows."""

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz import scaled_dot_product_attention as sdpa
from attnviz.core.masks import build_mask

KINDS = ["none", "causal", "padding", "window", "causal+window"]


@st.composite
def problems(draw):
    N = draw(st.integers(1, 3))
    H = draw(st.integers(1, 4))
    L = draw(st.integers(1, 12))
    S = draw(st.integers(1, 12))
    E = draw(st.integers(1, 16))
    kind = draw(st.sampled_from(KINDS))
    window = draw(st.integers(0, 14))
    lengths = draw(st.lists(st.integers(0, S), min_size=N, max_size=N))
    seed = draw(st.integers(0, 2**16))
    return N, H, L, S, E, kind, window, lengths, seed


@settings(max_examples=150, deadline=None)
@given(problems())
def test_weights_are_a_distribution_over_allowed_keys(p):
    N, H, L, S, E, kind, window, lengths, seed = p
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, H, L, E, generator=g)
    k, v = torch.randn(N, H, S, E, generator=g), torch.randn(N, H, S, E, generator=g)
    mask = build_mask(kind, L, S, window=window, lengths=lengths)
    out, w = sdpa(q, k, v, attn_mask=mask)
    assert w.shape == (N, H, L, S) and out.shape == (N, H, L, E)
    assert torch.isfinite(w).all() and torch.isfinite(out).all()
    allowed = torch.ones(N, H, L, S, dtype=torch.bool) if mask is None else mask.expand(N, H, L, S)
    assert (w[~allowed] == 0).all()  # masked entries exactly zero
    has_key = allowed.any(-1)
    sums = w.sum(-1)
    assert torch.allclose(sums[has_key], torch.ones_like(sums[has_key]), atol=1e-5)
    assert (sums[~has_key] == 0).all() and (out[~has_key] == 0).all()  # fully masked rows
    # where defined, equal to PyTorch's own function
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert ((out - ref).abs()[has_key] <= 1e-5).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20), st.integers(0, 25))
def test_window_mask_band(L, S, window):
    m = build_mask("window", L, S, window=window)
    i = torch.arange(L).unsqueeze(1)
    j = torch.arange(S).unsqueeze(0)
    assert torch.equal(m, (i - j).abs() <= window)
