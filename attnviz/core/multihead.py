"""Multi-head attention as an ``nn.Module`` whose every step can be looked at.

    Q = X_q W_Q^T + b_Q,  K = X_kv W_K^T + b_K,  V = X_kv W_V^T + b_V     (N, L|S, E)
    split:  (N, L, E) -> (N, H, L, D)   with D = E / H
    head_h = softmax(Q_h K_h^T / sqrt(D) + M) V_h                           (N, H, L, D)
    join:   (N, H, L, D) -> (N, L, E)
    out = join W_O^T + b_O                                                  (N, L, E)

Parameters are laid out exactly as in ``torch.nn.MultiheadAttention`` (one packed
``in_proj_weight`` of shape (3E, E), then ``out_proj``), so ``from_torch`` copies a
PyTorch module's weights and both give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from attnviz.core.attention import AttentionSteps, attention_fast, attention_steps
from attnviz.limits import head_choices, heads_divide


@dataclass
class MultiHeadSteps:
    """Everything one forward pass computed. Shapes in PyTorch's letters."""

    q: torch.Tensor  # projected queries, per head   (N, H, L, D)
    k: torch.Tensor  # projected keys, per head      (N, H, S, D)
    v: torch.Tensor  # projected values, per head    (N, H, S, D)
    attention: AttentionSteps  # scores .. weights .. per-head outputs (N, H, L, *)
    joined: torch.Tensor  # heads concatenated, before W_O (N, L, E)
    output: torch.Tensor  # after W_O                     (N, L, E)

    @property
    def weights(self) -> torch.Tensor:
        """The weights that multiplied V (after dropout): (N, H, L, S)."""
        return self.attention.dropped

    @property
    def head_outputs(self) -> torch.Tensor:
        return self.attention.output  # (N, H, L, D)

    @property
    def complete(self) -> bool:
        """False for a lean run (``MultiHeadAttention.lean_steps``): no scores kept."""
        return self.attention.complete

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Name -> shape of every intermediate kept, in computation order (debug_shape)."""
        a = self.attention
        steps = {"scores QKᵀ": a.shape_of("scores"), "scaled": a.shape_of("scaled"), "masked": a.shape_of("masked")}
        named = {
            "Q": self.q, "K": self.k, "V": self.v, **steps,
            "weights": a.weights, "head outputs": a.output,
            "joined": self.joined, "output": self.output,
        }  # fmt: skip
        return {name: t if isinstance(t, tuple) else tuple(t.shape) for name, t in named.items() if t is not None}


class MultiHeadAttention(nn.Module):
    """Multi-head attention returning per-head weights ``(N, H, L, S)``.

    ``forward(query, key=None, value=None, attn_mask=None)``: self-attention when
    ``key``/``value`` are omitted, cross-attention when they come from another
    sequence (of another length S). Inputs are batch-first ``(N, L, E)``; a 2-D
    ``(L, E)`` input is treated as a batch of one and returned 2-D/3-D likewise.
    """

    @staticmethod
    def check_heads(d_model: int, num_heads: int) -> None:
        """``ValueError`` unless ``num_heads`` heads split ``d_model`` features evenly (the one
        place this is checked: every door that builds a layer comes here)."""
        if int(d_model) != d_model or d_model < 1:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}.")
        if int(num_heads) != num_heads or num_heads < 1:
            raise ValueError(f"The number of heads must be a positive integer, got {num_heads!r}.")
        if not heads_divide(d_model, num_heads):
            divisors = head_choices(d_model, d_model)
            raise ValueError(
                f"{num_heads} heads do not divide d_model={d_model} evenly "
                f"(each head gets d_model / heads features). Choose one of: "
                f"{', '.join(map(str, divisors))}."
            )

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        bias: bool = True,
        generator: torch.Generator | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.check_heads(d_model, num_heads)
        self.d_model, self.num_heads = int(d_model), int(num_heads)
        self.head_dim = self.d_model // self.num_heads
        factory = {"device": device, "dtype": dtype}
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model, **factory))  # (3E, E)
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d_model, **factory)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Xavier-uniform weights (as PyTorch's module) and small uniform biases.

        Drawn from ``generator`` on the CPU, then copied: the same seed gives the
        same parameters on every device. Biases are non-zero so that they are visible.
        """
        E = self.d_model
        for t, bound in (
            (self.in_proj_weight, math.sqrt(6.0 / (E + E))),  # xavier per (E, E) block
            (self.out_proj.weight, math.sqrt(6.0 / (E + E))),
            (self.in_proj_bias, 1.0 / math.sqrt(E)),
            (self.out_proj.bias, 1.0 / math.sqrt(E)),
        ):
            if t is not None:
                cpu = torch.rand(t.shape, generator=generator, dtype=torch.float32) * 2 - 1
                t.copy_(cpu * bound)

    # -- the Q/K/V projections, as views of the packed weight -------------------------
    @property
    def w_q(self) -> torch.Tensor:
        return self.in_proj_weight[: self.d_model]  # (E, E)

    @property
    def w_k(self) -> torch.Tensor:
        return self.in_proj_weight[self.d_model : 2 * self.d_model]

    @property
    def w_v(self) -> torch.Tensor:
        return self.in_proj_weight[2 * self.d_model :]

    def _bias(self, i: int) -> torch.Tensor | None:
        b = self.in_proj_bias
        return None if b is None else b[i * self.d_model : (i + 1) * self.d_model]

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of ``mha``'s weights in this module; both give the same numbers.

        Only the packed layout (kdim == vdim == embed_dim) without bias_k/bias_v or
        add_zero_attn exists in this module.
        """
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("from_torch supports nn.MultiheadAttention with kdim = vdim = embed_dim, "
                             "no add_bias_kv and no add_zero_attn.")
        p = mha.in_proj_weight
        out = cls(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None,
                  device=p.device, dtype=p.dtype)
        with torch.no_grad():
            out.in_proj_weight.copy_(mha.in_proj_weight)
            out.out_proj.weight.copy_(mha.out_proj.weight)
            if out.in_proj_bias is not None:
                out.in_proj_bias.copy_(mha.in_proj_bias)
                out.out_proj.bias.copy_(mha.out_proj.bias)
        return out

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        N, T, _ = x.shape
        return x.view(N, T, self.num_heads, self.head_dim).transpose(1, 2)  # (N, H, T, D)

    def _inputs(self, query, key, value, attn_mask):
        """Validate and normalise: batch-first 3-D tensors and a 4-D-ready mask."""
        unbatched = query.dim() == 2
        if unbatched:
            query = query.unsqueeze(0)  # (1, L, E)
            key = None if key is None else key.unsqueeze(0)
            value = None if value is None else value.unsqueeze(0)
        if query.dim() != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"query must be (N, L, {self.d_model}) or (L, {self.d_model}); "
                             f"got {tuple(query.shape)}.")
        if key is None and value is None:  # self-attention: nothing more to check
            return query, query, query, self._mask4(attn_mask), unbatched
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model or t.shape[0] != query.shape[0]:
                raise ValueError(f"{name} must be (N={query.shape[0]}, S, {self.d_model}); "
                                 f"got {tuple(t.shape)}.")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length: {tuple(key.shape)} vs "
                             f"{tuple(value.shape)}.")
        return query, key, value, self._mask4(attn_mask), unbatched

    @staticmethod
    def _mask4(attn_mask):
        if attn_mask is None:
            return None
        if attn_mask.dim() == 3:  # (N, L, S): add the head axis
            attn_mask = attn_mask.unsqueeze(1)  # (N, 1, L, S)
        if not attn_mask.dtype.is_floating_point and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask != 0  # integer 0/1 masks as in the seed
        return attn_mask

    def _project(self, query, key, value):
        """Q, K, V split into heads: each (N, H, L|S, D), contiguous per head."""
        H, D = self.num_heads, self.head_dim
        if not (query is key and key is value):  # cross-attention: three matmuls
            return (self._split(F.linear(query, self.w_q, self._bias(0))),  # (N, H, L, D)
                    self._split(F.linear(key, self.w_k, self._bias(1))),  # (N, H, S, D)
                    self._split(F.linear(value, self.w_v, self._bias(2))))  # (N, H, S, D)
        # Self-attention: one packed matmul for Q, K and V (bias fused into the GEMM).
        N, L, _ = query.shape
        qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)  # (N, L, 3E)
        heads = qkv.view(N, L, 3, H, D).permute(2, 0, 3, 1, 4)  # (3, N, H, L, D), a strided view
        if N > 1:
            # (N, H) cannot be flattened into one batch axis without a copy.
            return heads.contiguous().unbind(0)  # 3 x (N, H, L, D)
        # One sequence: V goes into the weighted sum's bmm as a strided view (row stride 3E), no
        # copy; Q and K are copied, since QKᵀ's baddbmm over strided per-head views took ~15 %
        # longer at L = 512 (torch.profiler: 1.96 against 1.67 ms a call) than the copy costs.
        q, k, v = heads.unbind(0)  # 3 x (N, H, L, D)
        return q.contiguous(), k.contiguous(), v

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's Q, K and V of ``x`` (N, L, E), split into heads: 3 × (N, H, L, D).
        For a page that runs its own attention on them (the long-sequence paths)."""
        x, _k, _v, _m, _unbatched = self._inputs(x, None, None, None)
        return self._project(x, x, x)

    def _join_project(self, heads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        N, H, L, D = heads.shape
        joined = heads.transpose(1, 2).reshape(N, L, H * D)  # (N, L, E)
        return joined, F.linear(joined, self.out_proj.weight, self.out_proj.bias)  # (N, L, E)

    def steps(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        *,
        dropout_p: float = 0.0,
        generator: torch.Generator | None = None,
        lean: bool = False,
    ) -> MultiHeadSteps:
        """The forward pass with every intermediate kept (see ``MultiHeadSteps``).

        ``attn_mask``: bool (True = may attend) or float (added), broadcastable to
        (N, H, L, S): (L, S), (N, 1, 1, S) from ``padding_mask``, (N, 1, L, S) ...
        ``lean``: keep only Q, K, V, the weights and the outputs, one (N, H, L, S) buffer
        instead of five, for long inputs; the numbers are the same.
        """
        if lean and not 0.0 <= dropout_p < 1.0:
            raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}.")
        query, key, value, attn_mask, unbatched = self._inputs(query, key, value, attn_mask)
        q, k, v = self._project(query, key, value)  # (N, H, L|S, D)
        if lean:
            scale = 1.0 / math.sqrt(self.head_dim)
            heads, weights = attention_fast(q, k, v, attn_mask, scale, dropout_p, generator)  # (N,H,L,D), (N,H,L,S)
            att = AttentionSteps(None, None, None, weights, weights, heads, scale, None)
        else:
            att = attention_steps(q, k, v, attn_mask, dropout_p, generator=generator)
        joined, out = self._join_project(att.output)  # (N, L, E) each
        if unbatched:
            out, joined = out.squeeze(0), joined.squeeze(0)
        return MultiHeadSteps(q, k, v, att, joined, out)

    def lean_steps(self, *args, **kwargs) -> MultiHeadSteps:
        """``steps(..., lean=True)``: the weights and outputs only, for long inputs."""
        return self.steps(*args, lean=True, **kwargs)

    @torch.no_grad()
    def identity_(self) -> MultiHeadAttention:
        """Q = K = V = X and no output mixing: every projection the identity, no bias.
        Attention is then plain (scaled) dot-product similarity of the inputs."""
        E = self.d_model
        eye = torch.eye(E, dtype=self.in_proj_weight.dtype, device=self.in_proj_weight.device)
        self.in_proj_weight.copy_(torch.cat([eye, eye, eye]))
        self.out_proj.weight.copy_(eye)
        for b in (self.in_proj_bias, self.out_proj.bias):
            if b is not None:
                b.zero_()
        return self

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        *,
        dropout_p: float = 0.0,
        generator: torch.Generator | None = None,
        head_mask: torch.Tensor | None = None,
        edit_heads=None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(output (N, L, E), weights (N, H, L, S))``; weights are after dropout.

        Same numbers as ``steps`` without keeping the intermediates (the fast path).
        ``head_mask`` (H,): each head's output is multiplied by it before the heads are
        joined (0 knocks a head out). ``edit_heads(heads)``: the heads' outputs (N, H, L, D),
        before they are joined and W_O applied, as the caller wants them (activation patching
        reads and replaces them there).
        """
        if not 0.0 <= dropout_p < 1.0:
            raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}.")
        query, key, value, attn_mask, unbatched = self._inputs(query, key, value, attn_mask)
        q, k, v = self._project(query, key, value)  # (N, H, L|S, D)
        heads, weights = attention_fast(q, k, v, attn_mask, 1.0 / math.sqrt(self.head_dim),
                                        dropout_p, generator)  # (N, H, L, D), (N, H, L, S)
        if head_mask is not None:
            heads = heads * head_mask.view(1, -1, 1, 1)  # (N, H, L, D)
        if edit_heads is not None:
            heads = edit_heads(heads)  # (N, H, L, D)
        _, out = self._join_project(heads)  # (N, L, E)
        return (out.squeeze(0), weights.squeeze(0)) if unbatched else (out, weights)
