"""What each head does, from its weights alone: pure functions, tested on matrices
whose answers are known.

Weights are (..., L, S) with rows summing to 1 (or 0 for a fully masked row). Only the
real tokens count: ``length`` rows and keys of a padded sequence.

- entropy of each row (nats): 0 when a row looks at one key, log n when it looks at all
  n evenly;
- mean attention distance: Σ_j a_ij |i − j|, averaged over rows;
- pattern scores, averaged over the rows where they are defined: previous token
  a[i, i−1], next token a[i, i+1], self a[i, i], first token (``[CLS]``) a[i, 0], and
  ``[SEP]`` Σ_{j ∈ SEP} a[i, j];
- attention rollout (Abnar & Zuidema 2020): Â = rownorm(½·mean_h A + ½·I),
  R = Â_L ⋯ Â_1, how much each token's final state draws on each input token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

COLUMNS = ("layer", "head", "entropy", "distance", "previous", "next", "self", "first", "sep")


def row_entropy(w: torch.Tensor) -> torch.Tensor:
    """(..., L, S) -> (..., L): −Σ_j a_ij log a_ij, with 0·log 0 = 0."""
    return -(w * torch.log(w.clamp_min(1e-30))).sum(-1)


def mean_distance(w: torch.Tensor) -> torch.Tensor:
    """(..., L, S) -> (..., L): the expected |i − j| of each row."""
    L, S = w.shape[-2:]
    i = torch.arange(L, dtype=w.dtype).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, dtype=w.dtype).unsqueeze(0)  # (1, S)
    return (w * (i - j).abs()).sum(-1)  # (..., L)


def diagonal_score(w: torch.Tensor, offset: int) -> torch.Tensor:
    """(..., L, S) -> (...): the mean of a[i, i + offset] over the rows where it exists."""
    d = torch.diagonal(w, offset=offset, dim1=-2, dim2=-1)  # (..., k)
    return d.mean(-1) if d.shape[-1] else torch.zeros(w.shape[:-2], dtype=w.dtype)


@dataclass
class HeadStats:
    layer: int
    head: int
    entropy: float
    distance: float
    previous: float
    next: float
    self: float
    first: float
    sep: float

    def row(self) -> dict:
        return {c: getattr(self, c) for c in COLUMNS}


def head_stats(layer_weights: torch.Tensor, n: int, length: int, tokens: list[str]) -> list[HeadStats]:
    """Every layer × head of sequence ``n``: (layers, N, H, L, S) -> one HeadStats each,
    over its first ``length`` (real) tokens."""
    w = layer_weights[:, n, :, :length, :length].to(torch.float64)  # (layers, H, n, n)
    seps = [j for j, t in enumerate(tokens[:length]) if t == "[SEP]"]
    ent = row_entropy(w).mean(-1)  # (layers, H)
    dist = mean_distance(w).mean(-1)
    prev, nxt, own = diagonal_score(w, -1), diagonal_score(w, 1), diagonal_score(w, 0)
    first = w[..., 0].mean(-1)
    sep = w[..., seps].sum(-1).mean(-1) if seps else torch.zeros_like(first)
    out = []
    for layer in range(w.shape[0]):
        for h in range(w.shape[1]):
            vals = [float(t[layer, h]) for t in (ent, dist, prev, nxt, own, first, sep)]
            out.append(HeadStats(layer, h, *vals))
    return out


def rollout(layer_weights: torch.Tensor) -> torch.Tensor:
    """(layers, H, L, L) -> (L, L): R = Â_L ⋯ Â_1 with Â = rownorm(½·mean_h A + ½·I)."""
    layers, _, L, S = layer_weights.shape
    if L != S:
        raise ValueError("Rollout needs self-attention (L = S).")
    eye = torch.eye(L, dtype=torch.float64)
    result = eye
    for a in layer_weights.to(torch.float64):
        hat = 0.5 * a.mean(0) + 0.5 * eye  # (L, L)
        hat = hat / hat.sum(-1, keepdim=True)
        result = hat @ result  # later layers multiply on the left
    return result
