"""Check a run against PyTorch's own attention, live, on the run's device.

``nn.MultiheadAttention`` gets the run's weights copied in and the same inputs and
mask; ``F.scaled_dot_product_attention`` gets the run's per-head Q, K, V. The max
absolute differences are compared with a threshold (1e-5 in float32).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from attnviz.core.devices import resolve_device
from attnviz.core.masks import to_torch_mha_mask
from attnviz.i18n import N_, _
from attnviz.run.config import AttentionConfig
from attnviz.run.run import compute

THRESHOLD = {torch.float32: 1e-5, torch.float64: 1e-12}


@dataclass
class Check:
    name: str
    max_abs_diff: float
    threshold: float

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.threshold  # NaN compares False: fails


@dataclass
class Verification:
    checks: list[Check]
    dtype: str
    device: str
    undefined_rows: int  # fully masked query rows (PyTorch gives NaN there; ours zeros)
    notes: list[str]
    threshold: float = 0.0
    head_diffs: list[float] = field(default_factory=list)  # max |Δ weights| per head
    row_diffs: list[float] = field(default_factory=list)  # max |Δ weights| per query position
    row_tokens: list[str] = field(default_factory=list)  # the query tokens (first sequence's)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def verify(config: AttentionConfig, *, float64: bool = False) -> Verification:
    """Compare attnviz with PyTorch for ``config`` (dropout switched off for the comparison)."""
    notes = []
    if config.dropout:
        notes.append(_("Dropout p={p} is random by design; it is switched off to compare.").format(p=config.dropout))
        config = config.with_(dropout=0.0)
    return verify_result(compute(config), float64=float64, notes=notes)


def verify_result(result, *, float64: bool = False, notes: list[str] | None = None) -> Verification:
    """Compare a computed run with PyTorch: any input (text, image patches, audio
    frames, graph nodes) that went through ``MultiHeadAttention`` without dropout."""
    notes = list(notes or [])
    dtype = torch.float64 if float64 else torch.float32
    device = resolve_device(result.device)
    result.require_complete()  # PyTorch's reference holds as much again
    ours = copy.deepcopy(result.model).to(device=device, dtype=dtype)  # the result's module is shared
    x = result.embeddings.to(device=device, dtype=dtype)  # (N, L, E)
    cross = result.is_cross
    mask = None if result.mask is None else result.mask.to(device)
    with torch.no_grad():
        x_kv = result.source_embeddings.to(device=device, dtype=dtype) if cross else x  # (N, S, E)
        steps = ours.steps(x, None if not cross else x_kv, None, mask)
        N, H, L, S = steps.weights.shape

        mha = nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True, device=device, dtype=dtype)
        mha.in_proj_weight.copy_(ours.in_proj_weight)
        mha.in_proj_bias.copy_(ours.in_proj_bias)
        mha.out_proj.weight.copy_(ours.out_proj.weight)
        mha.out_proj.bias.copy_(ours.out_proj.bias)
        mha.eval()
        torch_mask = None
        if mask is not None:
            torch_mask = to_torch_mha_mask(mask.expand(N, H, L, S).reshape(N * H, L, S))  # True = blocked
        ref_out, ref_w = mha(x, x_kv, x_kv, attn_mask=torch_mask, need_weights=True,
                             average_attn_weights=False)
        a = steps.attention
        ref_heads = F.scaled_dot_product_attention(steps.q, steps.k, steps.v, attn_mask=mask)

    defined = torch.isfinite(ref_w).all(-1)  # (N, H, L): rows PyTorch can define
    undefined = int((~defined).sum())
    if undefined:
        notes.append(_("{n} query rows (over all heads) have every key blocked: PyTorch returns NaN there, attnviz "
                       "returns zeros; those rows are left out of the comparison.").format(n=undefined))

    def diff(ours_t, ref_t, rows):
        d = (ours_t - ref_t).abs()
        d = d[rows] if rows is not None else d
        return float(d.max()) if d.numel() else 0.0

    out_rows = defined.all(1)  # (N, L): query positions defined in every head
    thr = THRESHOLD[dtype]
    checks = [
        Check(N_("weights vs nn.MultiheadAttention"), diff(a.weights, ref_w, defined), thr),
        Check(N_("output vs nn.MultiheadAttention"), diff(steps.output, ref_out, out_rows), thr),
        Check(N_("head outputs vs F.scaled_dot_product_attention"), diff(a.output, ref_heads, defined), thr),
    ]
    # Where the weights differ: rows PyTorch leaves undefined count as 0 difference.
    where = (a.weights - ref_w).abs().masked_fill(~defined.unsqueeze(-1), 0.0)  # (N, H, L, S)
    head_diffs = where.amax(dim=(0, 2, 3)).tolist()  # (H,)
    row_diffs = where.amax(dim=(0, 1, 3)).tolist()  # (L,)
    return Verification(checks, str(dtype).replace("torch.", ""), str(device), undefined, notes, thr,
                        head_diffs, row_diffs, result.tokens[0])
