"""Scaled dot-product attention that always hands back its weights.

    Attention(Q, K, V, M) = softmax(Q K^T / sqrt(d_k) + M) V

Shapes as in ``torch.nn.functional.scaled_dot_product_attention``: q (..., L, E),
k (..., S, E), v (..., S, Ev) -> output (..., L, Ev), weights (..., L, S).

Masks follow ``attnviz.masks``: bool True = may attend, float = added to scores,
integer 0/1 as in the seed tutorial (0 = blocked). A seed-style *float* 0/1 mask
must be passed as ``mask.bool()``: a float mask is additive, as in PyTorch.
Blocked scores become -inf, so their weights are exactly 0 after softmax. A query
whose keys are *all* blocked would give softmax(-inf, ..., -inf) = NaN; here that
row is defined as all-zero weights and a zero output, computed so that no NaN ever
appears, not even in gradients.
"""

from __future__ import annotations

import math

import torch

from attnviz.core.masks import causal_mask

NEG_INF = float("-inf")


class AttentionSteps:
    """Every intermediate of one attention call, in the order they happen.

    The call itself holds one (..., L, S) buffer, the weights, as ``nn.MultiheadAttention``
    does: the scaled scores are made again from Q and K when first read (the same kernel on
    the same inputs: the same numbers), ``scores`` (Q K^T) from them (scaled / scale) and
    ``masked`` (scaled + M) from them and the mask. Keeping all four cost up to 1.6x its
    time at L = 1024, in page faults and memory traffic, where most views read only the
    weights. A lean run (weights only) has neither scaled scores nor Q and K to make them.
    """

    __slots__ = ("_scores", "_scaled", "_masked", "weights", "dropped", "output", "scale", "fully_masked_rows",
                 "mask", "qk")

    def __init__(self, scores: torch.Tensor | None, scaled: torch.Tensor | None, masked: torch.Tensor | None,
                 weights: torch.Tensor, dropped: torch.Tensor, output: torch.Tensor, scale: float,
                 fully_masked_rows: torch.Tensor | None, mask: torch.Tensor | None = None,
                 qk: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self._scores = scores  # Q K^T                      (..., L, S), or None: made from scaled
        self._scaled = scaled  # Q K^T * scale               (..., L, S), or None: made from qk
        self._masked = masked  # scaled + M (-inf = blocked) (..., L, S), or None: made from scaled and mask
        self.weights = weights  # softmax(masked)            (..., L, S)
        self.dropped = dropped  # weights after dropout (== weights when p = 0)
        self.output = output  # dropped @ V                  (..., L, Ev)
        self.scale = scale
        self.fully_masked_rows = fully_masked_rows  # bool (..., L, 1); None when no row is fully masked
        self.mask = mask  # the mask that was applied (bool or additive float), for ``masked``
        self.qk = qk  # (q (..., L, D), k (..., S, D)): what ``scaled`` is made from

    @property
    def scaled(self) -> torch.Tensor | None:
        if self._scaled is None and self.qk is not None:
            with torch.no_grad():
                self._scaled = _scaled_scores(*self.qk, self.scale)  # (..., L, S)
        return self._scaled

    @property
    def scores(self) -> torch.Tensor | None:
        if self._scores is None and self.scaled is not None:
            self._scores = self.scaled / self.scale  # (..., L, S)
        return self._scores

    @property
    def masked(self) -> torch.Tensor | None:
        if self._masked is None and self.scaled is not None:
            self._masked = self.scaled if self.mask is None else _apply_mask(self.scaled, self.mask, False)[0]
        return self._masked

    @property
    def complete(self) -> bool:
        """Every intermediate there, or made on reading; False for a lean run."""
        return self._scaled is not None or self.qk is not None

    def map(self, fn) -> AttentionSteps:
        """The same steps with ``fn`` applied to every tensor held (moving them to the CPU,
        say). What is made on reading stays so, from the moved tensors; when ``fn`` moves Q
        to another device, the scaled scores are made first, where the weights were."""
        t = lambda x: None if x is None else fn(x)  # noqa: E731
        qk = None if self.qk is None else (fn(self.qk[0]), fn(self.qk[1]))
        if qk is not None and qk[0].device != self.qk[0].device:
            _ = self.scaled
        return AttentionSteps(t(self._scores), t(self._scaled), t(self._masked), t(self.weights), t(self.dropped),
                              t(self.output), self.scale, t(self.fully_masked_rows), t(self.mask), qk)

    def shape_of(self, name: str) -> tuple[int, ...] | None:
        """The shape of step ``name`` ("scores", "scaled", "masked", …) without making it."""
        if name in ("scores", "scaled", "masked"):
            return tuple(self.weights.shape) if self.complete else None
        value = getattr(self, name)
        return None if value is None else tuple(value.shape)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """q (..., L, D), k (..., S, D), v (..., S, Dv), or a ``ValueError`` naming the shapes."""
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"q, k and v need at least 2 dimensions (..., length, features); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension (d_k): q is {tuple(q.shape)}, "
            f"k is {tuple(k.shape)}."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length S: k is {tuple(k.shape)}, v is {tuple(v.shape)}."
        )


def _combine_masks(attn_mask, is_causal: bool, L: int, S: int, device) -> torch.Tensor | None:
    if attn_mask is not None and not attn_mask.dtype.is_floating_point and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask != 0  # integer 0/1 masks as in the seed: 0 = blocked
    if not is_causal:
        return attn_mask
    causal = causal_mask(L, S, device=device)  # (L, S)
    if attn_mask is None:
        return causal
    if attn_mask.dtype == torch.bool:
        return attn_mask & causal
    return attn_mask.masked_fill(~causal, NEG_INF)


def _softmax(x: torch.Tensor, inplace: bool) -> torch.Tensor:
    """Softmax over the last axis; in place when no gradient is needed, which saves
    allocating (and page-faulting) a second (..., L, S) buffer on long inputs."""
    if inplace and _SOFTMAX_OUT is not None and x.is_contiguous():
        return _SOFTMAX_OUT(x, -1, False, out=x)
    return torch.softmax(x, dim=-1)


try:  # looked up once: attribute access on torch.ops costs microseconds per call
    _SOFTMAX_OUT = torch.ops.aten._softmax.out
except (AttributeError, RuntimeError):  # a build without it: out-of-place softmax
    _SOFTMAX_OUT = None


def dropout_keep(shape, p: float, *, generator: torch.Generator | None, device) -> torch.Tensor:
    """Bernoulli(1 - p) keep-mask. Drawn on the CPU when a generator is given, so a
    seeded run drops the same entries on every device."""
    if generator is not None:
        return (torch.rand(shape, generator=generator, device=generator.device) >= p).to(device)
    return torch.rand(shape, device=device) >= p


def _prepare(q, k, v, attn_mask, dropout_p, is_causal, scale):
    """Validate, resolve the scale and fold ``is_causal`` into the mask."""
    check_qkv(q, k, v)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}.")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _combine_masks(attn_mask, is_causal, q.shape[-2], k.shape[-2], q.device), scale


def _apply_mask(scaled: torch.Tensor, mask: torch.Tensor | None, inplace: bool):
    """scaled + M, and the bool (..., L, 1) rows with no allowed key (None if none)."""
    if mask is None:
        return scaled, None
    if mask.dtype == torch.bool:
        allowed = mask
        masked = scaled.masked_fill_(~mask, NEG_INF) if inplace else scaled.masked_fill(~mask, NEG_INF)
    else:
        allowed = mask > NEG_INF
        masked = scaled.add_(mask) if inplace and mask.shape == scaled.shape else scaled + mask
    fully = ~allowed.any(dim=-1, keepdim=True)  # (..., L, 1), computed on the small mask
    return masked, (fully if fully.any() else None)


def _masked_softmax(masked: torch.Tensor, fully: torch.Tensor | None, inplace: bool) -> torch.Tensor:
    if fully is None:
        return _softmax(masked, inplace)  # (..., L, S)
    # A row of all -inf: softmax over zeros instead (finite, so no NaN in the forward
    # or backward pass), then zero the row.
    if inplace:
        return _softmax(masked.masked_fill_(fully, 0.0), True).masked_fill_(fully, 0.0)
    return _softmax(masked.masked_fill(fully, 0.0), False).masked_fill(fully, 0.0)


def _dropout(weights, dropout_p, generator):
    if dropout_p <= 0.0:
        return weights
    keep = dropout_keep(weights.shape, dropout_p, generator=generator, device=weights.device)
    return weights * keep / (1.0 - dropout_p)  # (..., L, S)


def attention_steps(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    generator: torch.Generator | None = None,
) -> AttentionSteps:
    """Run attention the way the formula reads and keep every intermediate (the scores and
    the masked scores are made from the scaled ones when read: ``AttentionSteps``)."""
    mask, scale = _prepare(q, k, v, attn_mask, dropout_p, is_causal, scale)
    scaled = _scaled_scores(q, k, scale)  # (..., L, S)
    if torch.is_grad_enabled() and scaled.requires_grad:  # a gradient flows back through every step: keep them
        masked, fully = _apply_mask(scaled, mask, inplace=False)  # (..., L, S)
        weights = _masked_softmax(masked, fully, inplace=False)  # (..., L, S)
        dropped = _dropout(weights, dropout_p, generator)  # (..., L, S)
        return AttentionSteps(None, scaled, masked, weights, dropped, _weighted_sum(dropped, v), scale, fully, mask)
    # No gradient: mask and softmax in place, so the weights are the one (L, S) buffer held;
    # the scaled scores are made again from q and k when read (AttentionSteps).
    masked, fully = _apply_mask(scaled, mask, inplace=True)
    weights = _masked_softmax(masked, fully, inplace=True)  # (..., L, S)
    dropped = _dropout(weights, dropout_p, generator)  # (..., L, S)
    return AttentionSteps(None, None, None, weights, dropped, _weighted_sum(dropped, v), scale, fully, mask, (q, k))


def _scaled_scores(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Q K^T * scale (..., L, S): the seed's ``baddbmm`` tip (the scale inside the GEMM) on
    3-D views when the batch dims agree; strided Q/K views go in without a copy."""
    batch, L, S = q.shape[:-2], q.shape[-2], k.shape[-2]
    if batch != k.shape[:-2]:  # broadcasting batch dims
        return (q * scale) @ k.transpose(-2, -1)  # (..., L, S)
    q3, k3 = q.reshape(-1, L, q.shape[-1]), k.reshape(-1, S, k.shape[-1])  # (B, L, E), (B, S, E)
    return torch.baddbmm(q3.new_empty(q3.shape[0], L, S), q3, k3.transpose(1, 2),
                         beta=0.0, alpha=scale).view(*batch, L, S)  # (..., L, S)


def _weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weights @ V (..., L, Ev), as one ``bmm`` on 3-D views when the batch dims agree."""
    L, S = weights.shape[-2:]
    if weights.shape[:-2] == v.shape[:-2]:
        output = torch.bmm(weights.reshape(-1, L, S), v.reshape(-1, S, v.shape[-1]))  # (B, L, Ev)
        return output.view(*weights.shape[:-2], L, v.shape[-1])  # (..., L, Ev)
    return weights @ v


def attention_fast(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    dropout_p: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output, weights)`` with no intermediates kept; inputs already validated.

    Same numbers as ``attention_steps``, computed the way ``nn.MultiheadAttention``
    does: the seed's ``baddbmm`` tip (scale inside the GEMM via ``alpha``) on 3-D
    views, mask and softmax in place when no gradient is needed.
    """
    scaled = _scaled_scores(q, k, scale)  # (..., L, S)
    inplace = not (torch.is_grad_enabled() and scaled.requires_grad)
    masked, fully = _apply_mask(scaled, mask, inplace)
    weights = _dropout(_masked_softmax(masked, fully, inplace), dropout_p, generator)  # (..., L, S)
    return _weighted_sum(weights, v), weights  # (..., L, Ev), (..., L, S)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale + mask) v, returning ``(output, weights)``.

    Same arguments as ``torch.nn.functional.scaled_dot_product_attention`` (plus a
    ``generator`` for reproducible dropout); ``is_causal`` may be combined with an
    ``attn_mask`` (both apply). The weights returned are the ones that multiplied
    ``v``, i.e. after dropout, as in the seed tutorial's ``attention``.
    """
    mask, scale = _prepare(q, k, v, attn_mask, dropout_p, is_causal, scale)
    return attention_fast(q, k, v, mask, scale, dropout_p, generator)
