"""kvpress 0.5.5's presses, written out from its source (``presses/scorer_press.py``,
``streaming_llm_press.py``, ``observed_attention_press.py``, ``snapkv_press.py``, ``knorm_press.py``,
``utils.compute_n_kept``) on the tensors its forward hook sees: the layer's ``attentions``
(batch, H, n, n) from eager attention and the cache's ``keys`` (batch, KV, n, D). kvpress pins
transformers < 5.3, so it cannot be installed beside this project: this is the reference the tests
compare with."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def compute_n_kept(k_len: int, compression_ratio: float) -> int:
    if compression_ratio >= 1.0:
        return 0
    return max(1, int(k_len * (1 - compression_ratio)))


def streaming_llm(keys, attentions, compression_ratio, n_sink=4):
    k_len = keys.shape[2]
    assert k_len > n_sink
    n_pruned = k_len - int(k_len * (1 - compression_ratio))
    scores = torch.ones_like(keys[..., 0])
    scores[:, :, n_sink:n_sink + n_pruned] = 0
    return scores


def observed_attention(keys, attentions, compression_ratio):
    scores = attentions.sum(2)
    bsz, num_key_value_heads, n_tokens, _ = keys.shape
    n_tokens_in_sum = torch.arange(n_tokens, 0, -1).to(attentions.device, attentions.dtype)
    scores = scores / n_tokens_in_sum
    return scores.view(bsz, num_key_value_heads, -1, n_tokens).mean(2)


def snapkv(keys, attentions, compression_ratio, window_size=64, kernel_size=5):
    bsz, num_key_value_heads, k_len, _ = keys.shape
    num_key_value_groups = attentions.shape[1] // num_key_value_heads
    assert attentions.shape[2] > window_size
    attn_weights = attentions[..., -window_size:, :-window_size]
    scores = attn_weights.mean(dim=-2)
    scores = F.avg_pool1d(scores, kernel_size=kernel_size, padding=kernel_size // 2, stride=1)
    scores = scores.view(bsz, num_key_value_heads, num_key_value_groups, k_len - window_size)
    scores = scores.mean(2)
    return F.pad(scores, (0, window_size), value=scores.max().item() + 1)


def knorm(keys, attentions, compression_ratio):
    score_dtype = torch.promote_types(keys.dtype, torch.float32)
    return -torch.linalg.vector_norm(keys, dim=-1, dtype=score_dtype)


PRESSES = {"streaming": streaming_llm, "observed": observed_attention, "snapkv": snapkv, "knorm": knorm}


def kept(policy: str, keys, attentions, compression_ratio: float) -> list[list[list[int]]]:
    """ScorerPress.compress's kept positions, per batch row and KV head, sorted (kvpress keeps them in
    topk's order; the set is what matters)."""
    if compression_ratio == 0:
        return [[list(range(keys.shape[2]))] * keys.shape[1]] * keys.shape[0]
    scores = PRESSES[policy](keys, attentions, compression_ratio)
    n_kept = compute_n_kept(keys.shape[2], compression_ratio)
    indices = scores.topk(n_kept, dim=-1).indices
    return indices.sort(-1).values.tolist()
