"""Composition scores (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"):
how much of what one head writes a later head reads, from the weights alone.

    score(sender, receiver) = ‖W_OV^sender · W^receiver‖_F / (‖W_OV^sender‖_F ‖W^receiver‖_F)

with W_OV = W_V W_O (E × E) and W^receiver its W_Q W_Kᵀ (mode "q": the sender writes what the
receiver's queries read), W_K W_Qᵀ ("k": what its keys read) or W_V W_O ("v": what its values
read); 0 where the receiver's layer is not later than the sender's. As TransformerLens's
``all_composition_scores`` computes it, on the weights its ``from_pretrained`` gives
(``weight_processing.py``): each attention's norm weight folded into W_Q, W_K and W_V, and, for a
LayerNorm, those centred over the stream's dimension (what LayerNorm's centring removes) and W_O
centred over its output (the writing weights centred); a grouped-query model's W_K and W_V repeated
for each query head of their group. RMSNorm folds its weight only; a model without norms (Watch it
learn's) uses its weights as they are.

The norms are taken from D × D matrices, never E × E: ‖A B‖²_F = Σ (AᵀA) ∘ (B Bᵀ) and
‖A_l B_l A_r B_r‖²_F = Σ (A_lᵀA_l · M · B_r B_rᵀ) ∘ M with M = B_l A_r, in float64.
"""

from __future__ import annotations

import torch

from attnviz.models.reading import Reading, reading, w_o_heads

MODES = ("q", "k", "v")


def _folded(r: Reading, c: str) -> torch.Tensor:
    """(H, E, D) W_c with the norm's weight folded in and, for LayerNorm, centred over E; KV heads repeated."""
    w = r.w[c].double()
    if r.norm.weight is not None:
        w = w * r.norm.weight.double()[None, :, None]
    if r.norm.kind == "layer":
        w = w - w.mean(1, keepdim=True)
    return w.repeat_interleave(r.heads // w.shape[0], dim=0)  # (H, E, D)


def _gram(a: torch.Tensor) -> torch.Tensor:
    return a.transpose(-2, -1) @ a  # (..., D, D)


def composition_scores_of(stack, mode: str) -> torch.Tensor:
    """(layers, H, layers, H) float32: see the module doc."""
    mode = str(mode).lower()
    if mode not in MODES:
        raise ValueError(f"mode must be 'q', 'k' or 'v' (what the later head reads through); got {mode!r}.")
    n = stack.layers
    readings = [reading(stack, layer) for layer in range(n)]
    layer_norm = readings[0].norm.kind == "layer"
    w_o = torch.stack([w_o_heads(stack, layer).double() for layer in range(n)])  # (n, H, D, E)
    if layer_norm:
        w_o = w_o - w_o.mean(-1, keepdim=True)
    w_v = torch.stack([_folded(r, "v") for r in readings])  # (n, H, E, D)
    H = w_v.shape[1]
    # Each product as A (E × D) · B (D × E): the sender's OV, and the receiver's reading matrix.
    a_l, b_l = w_v.flatten(0, 1), w_o.flatten(0, 1)  # (nH, E, D), (nH, D, E)
    if mode == "v":
        a_r, b_r = a_l, b_l
    else:
        w_q = torch.stack([_folded(r, "q") for r in readings]).flatten(0, 1)  # (nH, E, D)
        w_k = torch.stack([_folded(r, "k") for r in readings]).flatten(0, 1)
        a_r, b_r = (w_q, w_k.transpose(-2, -1)) if mode == "q" else (w_k, w_q.transpose(-2, -1))
    g_al, g_br = _gram(a_l), _gram(b_l.transpose(-2, -1))  # (nH, D, D): AᵀA, B Bᵀ
    g_ar, g_brr = _gram(a_r), _gram(b_r.transpose(-2, -1))
    left = (g_al * g_br).sum((-2, -1)).clamp_min(0).sqrt()  # (nH,) ‖W_OV‖
    right = (g_ar * g_brr).sum((-2, -1)).clamp_min(0).sqrt()  # (nH,) ‖W^receiver‖
    out = torch.zeros(n * H, n * H, dtype=torch.float64)
    for s in range(n * H):  # a sender at a time: (nH, D, D) at once, never (nH, nH, D, D)
        m = b_l[s] @ a_r  # (nH, D, D)
        p = g_al[s] @ m @ g_brr  # (nH, D, D)
        out[s] = (p * m).sum((-2, -1)).clamp_min(0).sqrt()
    out = out / left[:, None] / right[None, :]
    out = out.view(n, H, n, H)
    later = torch.arange(n)[:, None, None, None] < torch.arange(n)[None, None, :, None]  # receiver's layer later
    return torch.where(later, out, torch.zeros_like(out)).float()
