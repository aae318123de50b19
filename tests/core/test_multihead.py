import pytest
import torch
from torch import nn

from attnviz import MultiHeadAttention
from attnviz.core.masks import causal_mask, local_window_mask, padding_mask, to_key_padding_mask, to_torch_mha_mask

TOL = 1e-5
CASES = [(1, 1, 3, 3, 4), (2, 8, 5, 5, 64), (3, 4, 7, 7, 32), (2, 2, 6, 9, 16), (2, 4, 10, 3, 8)]


def pair(E, H, seed=0):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    return mha, MultiHeadAttention.from_torch(mha)


def x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check(a, b, what):
    """Equal within TOL wherever PyTorch is defined; where PyTorch gives NaN (a fully
    masked query row) ours must give exact zeros."""
    nan = torch.isnan(b)
    assert (a[nan] == 0).all(), f"{what}: fully masked rows must be zero"
    assert not torch.isnan(a).any(), f"{what}: NaN"
    d = (a - b).abs()[~nan].max().item()
    assert d <= TOL, f"{what}: max |diff| {d}"


@pytest.mark.parametrize("N,H,L,S,E", CASES)
@pytest.mark.parametrize("kind", ["none", "causal", "window", "causal+window"])
def test_parity_attn_mask(N, H, L, S, E, kind):
    mha, ours = pair(E, H)
    query = x(N, L, E, seed=1)
    kv = query if L == S else x(N, S, E, seed=2)  # self when L == S, else cross
    m = {"none": None, "causal": causal_mask(L, S), "window": local_window_mask(L, 2, S),
         "causal+window": causal_mask(L, S) & local_window_mask(L, 2, S)}[kind]
    ref_o, ref_w = mha(query, kv, kv, attn_mask=None if m is None else to_torch_mha_mask(m),
                       need_weights=True, average_attn_weights=False)
    o, w = ours(query, kv, kv, attn_mask=m)
    assert w.shape == (N, H, L, S) and o.shape == (N, L, E)
    check(o, ref_o, "output")
    check(w, ref_w, "weights")


@pytest.mark.parametrize("N,H,L,S,E", CASES)
def test_parity_padded_batch(N, H, L, S, E):
    mha, ours = pair(E, H, seed=3)
    lengths = [S] + [max(1, S - 1 - i) for i in range(N - 1)]
    query, kv = x(N, L, E, seed=4), x(N, S, E, seed=5)
    ref_o, ref_w = mha(query, kv, kv, key_padding_mask=to_key_padding_mask(lengths, S),
                       need_weights=True, average_attn_weights=False)
    o, w = ours(query, kv, kv, attn_mask=padding_mask(lengths, S))
    check(o, ref_o, "output")
    check(w, ref_w, "weights")
    # padding and causal together, self-attention
    sq = x(N, S, E, seed=6)
    ref_o, ref_w = mha(sq, sq, sq, key_padding_mask=to_key_padding_mask(lengths, S),
                       attn_mask=to_torch_mha_mask(causal_mask(S)), need_weights=True,
                       average_attn_weights=False)
    o, w = ours(sq, attn_mask=padding_mask(lengths, S) & causal_mask(S))
    check(o, ref_o, "output (padding & causal)")
    check(w, ref_w, "weights (padding & causal)")


def test_self_attention_defaults_and_unbatched():
    mha, ours = pair(16, 4)
    q = x(5, 16)
    o, w = ours(q)
    assert o.shape == (5, 16) and w.shape == (4, 5, 5)
    o3, w3 = ours(q.unsqueeze(0))
    assert torch.equal(o3[0], o) and torch.equal(w3[0], w)


def test_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="3 heads do not divide d_model=64.*1, 2, 4, 8, 16, 32, 64"):
        MultiHeadAttention(64, 3)


def test_intermediates_reconstruct_the_output():
    _, ours = pair(32, 4)
    s = ours.steps(x(2, 6, 32), attn_mask=causal_mask(6))
    assert s.q.shape == (2, 4, 6, 8) and s.attention.scores.shape == (2, 4, 6, 6)
    # joining the heads is a concat along features
    assert torch.equal(s.joined[:, :, 8:16], s.head_outputs[:, 1])
    assert torch.allclose(s.output, s.joined @ ours.out_proj.weight.T + ours.out_proj.bias, atol=1e-6)
    assert list(s.shapes())[0] == "Q" and s.shapes()["joined"] == (2, 6, 32)


def test_same_generator_same_parameters():
    a = MultiHeadAttention(16, 2, generator=torch.Generator().manual_seed(5))
    b = MultiHeadAttention(16, 2, generator=torch.Generator().manual_seed(5))
    c = MultiHeadAttention(16, 2, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a.in_proj_weight, b.in_proj_weight)
    assert not torch.equal(a.in_proj_weight, c.in_proj_weight)
