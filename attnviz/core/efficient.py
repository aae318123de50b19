"""Attention without the (L, S) matrix, and how much of that matrix a head really uses.

This module holds:

- ``tiled_attention``: FlashAttention's forward pass in plain PyTorch (blocks of
  queries against blocks of keys with an online softmax), optionally with a trace of
  every step of the first query block (``TileStep``) for the teaching pages;
- ``low_rank_attention``: Linformer-style attention over keys and values projected
  from S to ``rank`` rows (segment means, exact at rank = S, or a seeded random matrix);
- truncated-SVD helpers: ``singular_values``, ``rank_k_output`` (``rank_k_outputs`` for many k from
  one SVD), ``relative_error``;
- ``attention_memory``: the bytes each path holds at its peak, by arithmetic alone.

Shapes use PyTorch's letters: N batch, H heads, L queries, S keys, D head width
(Dv for values). Masks follow ``attnviz.core.masks``: bool True = may attend, float
= added to the scores. A query with every key blocked gets a zero output, never NaN.

May import: ``torch``, ``attnviz.core``, ``attnviz.limits`` and ``attnviz.i18n`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnviz.core.attention import check_qkv

NEG_INF = float("-inf")


@dataclass
class TileStep:
    """One key block of the online softmax, for the first query block only.

    Tensors are for the first element of every batch dimension (``t[0, 0, ...]``), so a
    trace stays small whatever N and H are: ``q`` rows are ``block_q`` (fewer when L is
    shorter), key columns are ``stop - start``.
    """

    key_block: int  # index of the key block, 0, 1, ...
    keys: tuple[int, int]  # (start, stop): the keys this step reads
    scores: torch.Tensor  # q k^T / sqrt(D) after masking (-inf = blocked)  (block_q, block_k)
    m_old: torch.Tensor  # running max before the step (-inf at the first)  (block_q,)
    m_new: torch.Tensor  # running max after the step                      (block_q,)
    correction: torch.Tensor  # exp(m_old - m_new): how much the old sums shrink (block_q,)
    ell: torch.Tensor  # running sum of exp(score - m_new) after the step     (block_q,)
    partial: torch.Tensor  # O / ell after the step: the output over keys seen so far (block_q, Dv)


def _check_block(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value:
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}.")
    return int(value)


def _check_mask(mask: torch.Tensor | None, L: int, S: int) -> torch.Tensor | None:
    """Integer 0/1 masks become bool (0 = blocked); the last two dims must be 1 or L, 1 or S."""
    if mask is None:
        return None
    if not mask.dtype.is_floating_point and mask.dtype != torch.bool:
        mask = mask != 0
    if mask.dim() < 2:  # a 0-D or (S,) mask reads as (1, S)
        mask = mask.reshape((1,) * (2 - mask.dim()) + tuple(mask.shape))  # (1, S or 1)
    if mask.shape[-2] not in (1, L) or mask.shape[-1] not in (1, S):
        raise ValueError(f"attn_mask {tuple(mask.shape)} does not broadcast to (..., {L}, {S}).")
    return mask  # (..., L or 1, S or 1)


def _tile(mask: torch.Tensor, q0: int, q1: int, k0: int, k1: int) -> torch.Tensor:
    """The mask for queries q0:q1 and keys k0:k1, a view: a broadcast mask stays small."""
    rows = mask if mask.shape[-2] == 1 else mask[..., q0:q1, :]  # (..., bq or 1, S or 1)
    return rows if rows.shape[-1] == 1 else rows[..., k0:k1]  # (..., bq or 1, bk or 1)


def _first(t: torch.Tensor) -> torch.Tensor:
    """The first element of every batch dimension: (..., a, b) -> (a, b)."""
    while t.dim() > 2:
        t = t[0]
    return t.detach().clone()


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
    trace: bool = False,
    *,
    is_causal: bool = False,
):
    """softmax(q k^T / sqrt(D) + mask) v, one (block_q, block_k) tile at a time.

    q (..., L, D), k (..., S, D), v (..., S, Dv) -> output (..., L, Dv); batch
    dimensions broadcast as in PyTorch (the mask's too). For each block of queries the
    key blocks are read in order with FlashAttention's online softmax: a running max
    m, a running sum ell (ℓ) and an accumulator O. When a block raises the max from m_old
    to m_new, ell and O are first multiplied by exp(m_old - m_new) (<= 1), so every
    exponent is <= 0 and nothing overflows; the output is O / ell at the end. The full
    (L, S) scores or weights never exist: a step holds one key block for every query block,
    (..., L, block_k) numbers.

    ``attn_mask`` (bool: True = may attend; float: added; broadcastable to
    (..., L, S)) is sliced per tile, so a small broadcast mask is never expanded.
    ``is_causal=True`` builds each tile's causal mask from the positions (key j <=
    query i, aligned top-left as in PyTorch) without an (L, S) tensor; it combines
    with ``attn_mask`` (both apply). A query with every key blocked keeps m = -inf;
    its exponents are taken against 0 instead, so it gets ell = 0 and a zero output,
    never NaN (as ``attnviz.core.attention`` defines it).

    With ``trace=True`` it returns ``(output, steps)``: one ``TileStep`` per key block
    of the *first* query block only, for the first element of every batch dimension
    (see ``TileStep``). At the first step m_old = -inf and the correction is 0 (there
    is nothing yet to rescale); after it the correction is in (0, 1].
    """
    check_qkv(q, k, v)
    block_q, block_k = _check_block("block_q", block_q), _check_block("block_k", block_k)
    L, S, D, Dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    mask = _check_mask(attn_mask, L, S)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                   () if mask is None else mask.shape[:-2])
    scale = 1.0 / math.sqrt(D) if D else 1.0
    acc_dtype = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    steps: list[TileStep] = []
    if L == 0:
        out = q.new_zeros((*batch, 0, Dv))  # (..., 0, Dv)
        return (out, steps) if trace else out
    # Every query block reads the same key block at once (as a GPU's thread blocks do): the
    # queries are padded to nQ whole blocks and viewed as (..., nQ, bq, D), so one step holds
    # (..., nQ, bq, bk) = L·block_k numbers, and the loop runs once per key block only.
    nQ = -(-L // block_q)
    pad = nQ * block_q - L
    qb = F.pad(q.to(acc_dtype) * scale, (0, 0, 0, pad)).unflatten(-2, (nQ, block_q))  # (..., nQ, bq, D)
    fill = True if mask is not None and mask.dtype == torch.bool else 0.0
    rows = torch.arange(nQ * block_q, device=q.device).view(nQ, block_q, 1)  # (nQ, bq, 1) query positions
    m = torch.full((*batch, nQ, block_q, 1), NEG_INF, dtype=acc_dtype, device=q.device)  # (..., nQ, bq, 1)
    ell = torch.zeros((*batch, nQ, block_q, 1), dtype=acc_dtype, device=q.device)  # (..., nQ, bq, 1)
    acc = torch.zeros((*batch, nQ, block_q, Dv), dtype=acc_dtype, device=q.device)  # (..., nQ, bq, Dv)
    for j, k0 in enumerate(range(0, S, block_k)):
        k1 = min(k0 + block_k, S)
        kb = k[..., k0:k1, :].to(acc_dtype).unsqueeze(-3)  # (..., 1, bk, D)
        vb = v[..., k0:k1, :].to(acc_dtype).unsqueeze(-3)  # (..., 1, bk, Dv)
        s = qb @ kb.transpose(-2, -1)  # (..., nQ, bq, bk)
        if mask is not None:
            tile = mask[..., k0:k1] if mask.shape[-1] != 1 else mask  # (..., L or 1, bk or 1)
            if tile.shape[-2] != 1:  # per-query rows: padded (this tile only) and blocked like the queries
                tile = F.pad(tile, (0, 0, 0, pad), value=fill).unflatten(-2, (nQ, block_q))  # (..., nQ, bq, bk)
            else:
                tile = tile.unsqueeze(-3)  # (..., 1, 1, bk or 1)
            s = s.masked_fill(~tile, NEG_INF) if tile.dtype == torch.bool else s + tile.to(acc_dtype)
        if is_causal:
            keys = torch.arange(k0, k1, device=q.device).view(1, 1, -1)  # (1, 1, bk)
            s = s.masked_fill(keys > rows, NEG_INF)  # (..., nQ, bq, bk)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., nQ, bq, 1)
        shift = m_new.masked_fill(m_new == NEG_INF, 0.0)  # a row blocked so far: exponents against 0
        p = torch.exp(s - shift)  # (..., nQ, bq, bk), blocked -> 0
        correction = torch.exp(m - shift)  # (..., nQ, bq, 1), 0 while nothing was seen
        ell = ell * correction + p.sum(dim=-1, keepdim=True)  # (..., nQ, bq, 1)
        acc = acc * correction + p @ vb  # (..., nQ, bq, Dv)
        if trace:
            first = min(block_q, L)  # the first query block's real rows
            partial = acc[..., 0, :first, :] / ell[..., 0, :first, :].masked_fill(ell[..., 0, :first, :] == 0, 1.0)
            steps.append(TileStep(j, (k0, k1), _first(s[..., 0, :first, :]), _first(m[..., 0, :first, :])[:, 0],
                                  _first(m_new[..., 0, :first, :])[:, 0], _first(correction[..., 0, :first, :])[:, 0],
                                  _first(ell[..., 0, :first, :])[:, 0], _first(partial)))
        m = m_new
    out = acc / ell.masked_fill(ell == 0, 1.0)  # (..., nQ, bq, Dv); ell = 0 only where acc = 0
    out = out.flatten(-3, -2)[..., :L, :].to(q.dtype)  # (..., L, Dv)
    return (out, steps) if trace else out


PROJECTIONS = ("segments", "random")  # low_rank_attention's E: the default first


def low_rank_projection(rank: int, S: int, kind: str = "segments", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The (rank, S) matrix E that ``low_rank_attention`` projects keys and values with, and
    a (rank,) bias added to the projected scores.

    - ``"segments"``: the keys are cut into ``rank`` contiguous segments of S/rank keys
      (the first S mod rank one longer); row r of E is the mean over segment r, and the bias
      is log(its size), so a segment counts as many times as it has keys. Exact at
      rank = S (E = I, bias 0); each mean is a key's size whatever S/rank is.
    - ``"random"``: E ~ N(0, 1)/√rank, drawn by a CPU generator seeded with ``seed``, bias 0:
      an *untrained* random projection. Each projected row sums about S/rank keys, so its
      scale grows with S/rank and the output can be off by more than its own size; it is
      not exact at rank = S either. Linformer learns E and F; this only shows the shape
      of the computation.
    """
    if kind == "segments":
        sizes = [S // rank + (1 if r < S % rank else 0) for r in range(rank)]
        E = torch.zeros(rank, S)
        start = 0
        for r, n in enumerate(sizes):
            E[r, start:start + n] = 1.0 / n
            start += n
        return E, torch.log(torch.tensor(sizes, dtype=torch.float64)).float()  # (rank, S), (rank,)
    if kind == "random":
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        return torch.randn(rank, S, generator=gen) / math.sqrt(rank), torch.zeros(rank)  # (rank, S), (rank,)
    raise ValueError(f"Unknown projection {kind!r}; choose one of {', '.join(PROJECTIONS)}.")


def low_rank_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rank: int,
    seed: int = 0,
    key_padding: torch.Tensor | None = None,
    projection_kind: str = "segments",
) -> torch.Tensor:
    """Linformer-style attention: keys and values projected from S rows to ``rank``.

    E (rank, S) is made by ``low_rank_projection`` (segment means by default, or a seeded random
    matrix), on the CPU and then moved to q's device and dtype, so it is the same
    everywhere. Then K' = E K (..., rank, D), V' = E V (..., rank, Dv) and the output is
    softmax(q K'^T / sqrt(D) + bias) V' (..., L, Dv). The cost grows with L·rank instead
    of L·S. Segment means are exact at rank = S; a random E is not.

    A mask cannot be applied after the projection: each projected row mixes keys. So
    instead of an ``attn_mask`` this takes ``key_padding``, bool, True = a real
    key, shaped (..., 1, S) like ``attnviz.core.masks.padding_mask`` or (S,), which
    broadcasts over k's batch dims; padded keys are zeroed in K and V *before* the
    projection, so their values cannot reach the output (but the projected rows still
    count them as zeros). A per-query mask (..., L, S) with L > 1 is refused.
    """
    check_qkv(q, k, v)
    S = k.shape[-2]
    if isinstance(rank, bool) or int(rank) != rank:
        raise ValueError(f"rank must be a whole number, got {rank!r}.")
    if rank < 1:
        raise ValueError(f"rank must be at least 1, got {rank}.")
    if rank > S:
        raise ValueError(f"rank {rank} is over the {S} keys: the projection can only shrink the keys.")
    if key_padding is not None:
        if key_padding.dtype != torch.bool:
            raise ValueError(f"key_padding must be a bool mask (True = real key), got {key_padding.dtype}.")
        if key_padding.shape[-1] != S or (key_padding.dim() >= 2 and key_padding.shape[-2] != 1):
            raise ValueError(f"key_padding {tuple(key_padding.shape)} must be a key mask (..., 1, {S}) or ({S},); "
                             "a per-query mask cannot be applied after the projection.")
        keep = key_padding.squeeze(-2) if key_padding.dim() >= 2 else key_padding  # (..., S)
        keep = keep.unsqueeze(-1)  # (..., S, 1)
        k, v = k.masked_fill(~keep, 0.0), v.masked_fill(~keep, 0.0)  # (..., S, D), (..., S, Dv)
    E, bias = low_rank_projection(int(rank), S, projection_kind, seed)
    E, bias = E.to(device=q.device, dtype=q.dtype), bias.to(device=q.device, dtype=q.dtype)  # (rank, S), (rank,)
    kp = E @ k  # (..., rank, D)
    vp = E @ v  # (..., rank, Dv)
    scores = (q @ kp.transpose(-2, -1)) / math.sqrt(q.shape[-1]) + bias  # (..., L, rank)
    return torch.softmax(scores, dim=-1) @ vp  # (..., L, Dv)


def _check_matrix(name: str, t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2:
        raise ValueError(f"{name} needs at least 2 dimensions (..., L, S); got {tuple(t.shape)}.")
    return t if t.dtype.is_floating_point or t.dtype.is_complex else t.float()


def singular_values(weights: torch.Tensor) -> torch.Tensor:
    """The singular values of each (L, S) weight matrix, largest first: (..., min(L, S))."""
    return torch.linalg.svdvals(_check_matrix("weights", weights))  # (..., min(L, S))


def rank_k_output(weights: torch.Tensor, v: torch.Tensor, k: int) -> torch.Tensor:
    """A_k V, where A_k is the best rank-k approximation of each weight matrix.

    weights (..., L, S), v (..., S, Dv) -> (..., L, Dv). By Eckart–Young, A_k keeps the
    k largest singular values of a truncated SVD; k = min(L, S) gives weights @ v back
    and k = 0 gives zeros.
    """
    return rank_k_outputs(weights, v, [k])[0]


def rank_k_outputs(weights: torch.Tensor, v: torch.Tensor, ks) -> list[torch.Tensor]:
    """``rank_k_output`` at each k of ``ks``, from one SVD: a sweep over ranks pays for the
    decomposition (O(L·S·min(L, S)) per head) once, not once per rank."""
    weights = _check_matrix("weights", weights)
    r = min(weights.shape[-2], weights.shape[-1])
    for k in ks:
        if isinstance(k, bool) or int(k) != k or not 0 <= k <= r:
            raise ValueError(f"k must be a whole number from 0 to {r} (the rank of a {tuple(weights.shape[-2:])} "
                             f"matrix at most), got {k!r}.")
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError(f"weights and v must share S: weights is {tuple(weights.shape)}, v is {tuple(v.shape)}.")
    U, sv, Vh = torch.linalg.svd(weights, full_matrices=False)  # (..., L, r), (..., r), (..., r, S)
    out = []
    for k in map(int, ks):
        left = U[..., :, :k] * sv[..., None, :k]  # (..., L, k)
        right = Vh[..., :k, :] @ v.to(weights.dtype)  # (..., k, Dv)
        out.append(left @ right)  # (..., L, Dv)
    return out


def relative_error(o: torch.Tensor, o_hat: torch.Tensor) -> torch.Tensor:
    """||O - Ô||_F / ||O||_F for each (L, Dv) matrix: float, shape (...); 0 where ||O|| = 0."""
    o, o_hat = _check_matrix("o", o), _check_matrix("o_hat", o_hat)
    if o.shape != o_hat.shape:
        raise ValueError(f"o and o_hat must have the same shape: {tuple(o.shape)} and {tuple(o_hat.shape)}.")
    num = torch.linalg.matrix_norm(o - o_hat)  # (...)
    den = torch.linalg.matrix_norm(o)  # (...)
    return torch.where(den > 0, num / den.masked_fill(den == 0, 1.0), torch.zeros_like(num))


def attention_memory(
    L: int,
    S: int,
    H: int,
    N: int = 1,
    D: int = 64,
    block_q: int = 64,
    block_k: int = 64,
    dtype_bytes: int = 4,
) -> dict[str, int]:
    """Bytes each path holds at its peak for the L×S intermediates (pure arithmetic).

    - ``naive``: the scores and the weights, 2·N·H·L·S·bytes;
    - ``tiled`` (``tiled_attention``): two tiles (scores and their exponentials) of
      N·H·block_q·block_k each, plus the accumulators O, m and ell, N·H·L·(D + 2);
      a block longer than L (or S) counts as L (or S), as the code allocates;
    - ``sdpa``: an *estimate* for ``torch.nn.functional.scaled_dot_product_attention``:
      taken to be the tiled figure, which is what its flash and memory-efficient
      kernels hold; its math fallback holds what ``naive`` does.
    """
    for name, value in (("L", L), ("S", S), ("H", H), ("N", N), ("D", D), ("block_q", block_q),
                        ("block_k", block_k), ("dtype_bytes", dtype_bytes)):
        _check_block(name, value)
    naive = 2 * N * H * L * S * dtype_bytes
    tiles = 2 * N * H * min(block_q, L) * min(block_k, S) * dtype_bytes
    tiled = tiles + N * H * L * (D + 2) * dtype_bytes
    return {"naive": naive, "tiled": tiled, "sdpa": tiled}
