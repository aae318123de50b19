"""Check a run against PyTorch's own attention, live, on the run's device.

``nn.MultiheadAttention`` gets the run's weights copied in and the same inputs and
mask; ``F.scaled_dot_product_attention`` gets the run's per-head Q, K, V. Each number is
compared as ``torch.testing.assert_close`` compares, with its defaults for the dtype: it passes
where |ours − reference| ≤ atol + rtol · |reference| (float32: atol 1e-5, rtol 1.3e-6; float64:
1e-7 and 1e-7). An absolute threshold alone failed outputs whose values are not small (an
image's pixels: 1.2e-5 off on values near 100 is float32's own rounding).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from attnviz.core.devices import resolve_device
from attnviz.core.masks import to_torch_mha_mask
from attnviz.core.multihead import MultiHeadSteps
from attnviz.i18n import N_, _
from attnviz.run.config import AttentionConfig
from attnviz.run.run import shared_result

# torch.testing.assert_close's defaults (its _DTYPE_PRECISIONS): (rtol, atol).
TOLERANCE = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}


@dataclass
class Check:
    name: str
    max_abs_diff: float
    worst: float  # the largest |difference| / (atol + rtol · |reference|): at most 1 passes
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def passed(self) -> bool:
        return self.worst <= 1.0  # NaN compares False: fails

    @property
    def tolerance(self) -> str:
        """The rule, in one line: "atol 1e-05 + rtol 1.3e-06 · |value|"."""
        return f"atol {self.atol:.0e} + rtol {self.rtol:.1e} · |value|"


@dataclass
class Verification:
    checks: list[Check]
    dtype: str
    device: str
    undefined_rows: int  # fully masked query rows (PyTorch gives NaN there; ours zeros)
    notes: list[str]
    threshold: float = 1.0  # on the scale of head_diffs and row_diffs: at most 1 passes
    head_diffs: list[float] = field(default_factory=list)  # max |Δ weights| / allowed, per head
    row_diffs: list[float] = field(default_factory=list)  # max |Δ weights| / allowed, per query position
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
    return verify_result(shared_result(config), float64=float64, notes=notes)


def _on(steps: MultiHeadSteps, device: torch.device) -> MultiHeadSteps:
    """``steps`` with every tensor on ``device`` (a result keeps its steps on the CPU)."""
    move = lambda t: t.to(device)  # noqa: E731
    return MultiHeadSteps(move(steps.q), move(steps.k), move(steps.v), steps.attention.map(move), move(steps.joined),
                          move(steps.output))


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
        if dtype == result.steps.q.dtype:  # the run's own steps: attnviz's side is not run again
            steps = _on(result.steps, device)
        else:  # the same module in another precision: a run of its own
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

    rtol, atol = TOLERANCE[dtype]

    def ratio(ours_t, ref_t):
        """|ours − ref| / (atol + rtol·|ref|), elementwise: where it is at most 1, assert_close passes."""
        return (ours_t - ref_t).abs() / (atol + rtol * ref_t.abs())

    def check(name, ours_t, ref_t, rows):
        d, r = (ours_t - ref_t).abs(), ratio(ours_t, ref_t)
        d, r = (d[rows], r[rows]) if rows is not None else (d, r)
        return Check(name, float(d.max()) if d.numel() else 0.0, float(r.max()) if r.numel() else 0.0, rtol, atol)

    out_rows = defined.all(1)  # (N, L): query positions defined in every head
    checks = [
        check(N_("weights vs nn.MultiheadAttention"), a.weights, ref_w, defined),
        check(N_("output vs nn.MultiheadAttention"), steps.output, ref_out, out_rows),
        check(N_("head outputs vs F.scaled_dot_product_attention"), a.output, ref_heads, defined),
    ]
    # Where the weights differ, on the tolerance's scale: rows PyTorch leaves undefined count as 0.
    where = ratio(a.weights, ref_w).masked_fill(~defined.unsqueeze(-1), 0.0)  # (N, H, L, S)
    head_diffs = where.amax(dim=(0, 2, 3)).tolist()  # (H,)
    row_diffs = where.amax(dim=(0, 1, 3)).tolist()  # (L,)
    return Verification(checks, str(dtype).replace("torch.", ""), str(device), undefined, notes, 1.0,
                        head_diffs, row_diffs, result.tokens[0])
