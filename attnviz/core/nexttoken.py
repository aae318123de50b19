"""The most likely next tokens under a model's logits: the one rule every page and the API read (a causal
LM's next tokens in the explorer, the answers Patching offers, Watch it learn's prediction)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def top_tokens(logits: torch.Tensor, spell: Callable[[list[int]], list[str]], k: int = 10) -> list[tuple[str, float]]:
    """The ``k`` most likely tokens under ``logits`` (V,): (spelling, probability), likeliest first; the softmax in
    float64, so that probabilities near 1 keep their digits; ties as ``torch.topk`` breaks them."""
    p = torch.softmax(logits.detach().double(), -1)  # (V,)
    top = torch.topk(p, min(k, p.numel()))
    return list(zip(spell(top.indices.tolist()), top.values.tolist(), strict=True))
