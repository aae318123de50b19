"""Why scale by √d_k: what dot products and softmax do as the head width grows.

For random q, k with unit-variance components, q·k has variance d_k, so raw scores
spread like √d_k and softmax saturates (one weight → 1, entropy → 0). Dividing by
√d_k keeps the spread at 1 whatever d_k is. Additive attention (vᵀ tanh(W_q q + W_k k))
is shown for comparison: tanh bounds its scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

DEFAULT_DKS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass
class Sweep:
    d_k: list[int]
    std_raw: list[float] = field(default_factory=list)  # spread of q·k
    std_scaled: list[float] = field(default_factory=list)  # spread of q·k/√d_k
    entropy_raw: list[float] = field(default_factory=list)  # mean row entropy of softmax(q·k), nats
    entropy_scaled: list[float] = field(default_factory=list)
    max_raw: list[float] = field(default_factory=list)  # mean largest weight per row
    max_scaled: list[float] = field(default_factory=list)
    entropy_additive: list[float] = field(default_factory=list)
    max_additive: list[float] = field(default_factory=list)
    uniform_entropy: float = 0.0  # log S: the most spread a row can be


def _entropy(w: torch.Tensor) -> torch.Tensor:
    return -(w * torch.log(w.clamp_min(1e-30))).sum(-1)  # (..., L)


def sweep(d_ks=DEFAULT_DKS, length: int = 16, seed: int = 0, additive: bool = False, trials: int = 8) -> Sweep:
    """Statistics over ``trials`` random (length × d_k) Q and K per d_k (seeded, CPU)."""
    if length < 2:
        raise ValueError("Use at least 2 tokens.")
    g = torch.Generator().manual_seed(seed)
    out = Sweep(list(d_ks), uniform_entropy=math.log(length))
    for d in d_ks:
        q = torch.randn(trials, length, d, generator=g)  # (T, L, d)
        k = torch.randn(trials, length, d, generator=g)  # (T, S, d)
        raw = q @ k.transpose(-2, -1)  # (T, L, S)
        scaled = raw / math.sqrt(d)
        w_raw, w_scaled = raw.softmax(-1), scaled.softmax(-1)
        out.std_raw.append(float(raw.std()))
        out.std_scaled.append(float(scaled.std()))
        out.entropy_raw.append(float(_entropy(w_raw).mean()))
        out.entropy_scaled.append(float(_entropy(w_scaled).mean()))
        out.max_raw.append(float(w_raw.amax(-1).mean()))
        out.max_scaled.append(float(w_scaled.amax(-1).mean()))
        if additive:
            hidden = 32
            wq = torch.randn(d, hidden, generator=g) / math.sqrt(d)  # (d, h)
            wk = torch.randn(d, hidden, generator=g) / math.sqrt(d)
            v = torch.randn(hidden, generator=g)  # (h,)
            feats = torch.tanh((q @ wq).unsqueeze(2) + (k @ wk).unsqueeze(1))  # (T, L, S, h)
            w_add = (feats @ v).softmax(-1)  # (T, L, S)
            out.entropy_additive.append(float(_entropy(w_add).mean()))
            out.max_additive.append(float(w_add.amax(-1).mean()))
    return out
