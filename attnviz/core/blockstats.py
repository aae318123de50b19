"""What a long context's attention looks like, without its (L, S) matrix: every number that
``attnviz.analysis.longcontext`` reports for one layer, folded tile by tile from q, k and each
query's log-sum-exp.

Each query's normaliser lse_i = log Σ_j exp(s_ij) (s = q·k · scale, masked) comes first: from
the forward pass itself (the CPU flash kernel that SDPA runs returns it) or from ``row_lse``, an
online pass over the tiles as flash attention makes it. Then one pass over the tiles of a layer
forms each weight a_ij = exp(s_ij − lse_i) once and folds it at once into

- block maxima and block sums over a grid of ``block`` × ``block`` cells (the last block of each
  side shorter where L is not a multiple of it),
- the column sums (the attention each key receives),
- and, per query, three sums taken as one product with [1, j, k_j]: Σ_j a_ij (the row's total, 1
  when every tile is in), Σ_j a_ij·j (the distance, since |i − j| = i − j under a causal mask)
  and Σ_j a_ij·k_j (the entropy: −Σ a log a = lse_i·Σ a − scale·q_i·Σ_j a_ij k_j).

The query heads that share a key/value head are one product (grouped-query attention), and a
causal mask's tiles above the diagonal are never formed. A step holds one tile,
(heads per group) × rows × columns numbers, never L × S.

``attnviz.core.efficient.tiled_attention`` walks the same tiles for the output (an online softmax whose
accumulators hold Σ a·v); this module needs the weights themselves, normalised, so it takes the
normaliser first and then forms each weight once. ``row_lse`` is that online max and sum alone.

May import: ``torch``, ``attnviz.core``, ``attnviz.limits`` and ``attnviz.i18n`` only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

SINK_TOKENS = 4  # StreamingLLM's attention sinks: the first tokens
TILE = 512  # rows and columns of one tile of scores
LOG2E = 1 / math.log(2)
BLOCKED = -1e30  # a masked log-weight: 2^x is 0 and, unlike −inf, 0·x is 0


@dataclass
class LayerStats:
    """One layer's numbers, for H query heads over L queries and S keys (L = S here)."""

    block_max: torch.Tensor  # (H, B, B) the largest weight in each block of queries × keys
    block_sum: torch.Tensor  # (H, B, B) float64, the weights' sum in each block (masked cells: 0)
    received: torch.Tensor  # (H, S) float64, Σ_i a_ij
    sink: torch.Tensor  # (H,) mean over queries of Σ_{j < 4} a_ij
    distance: torch.Tensor  # (H,) mean over queries of Σ_j a_ij |i − j|
    entropy: torch.Tensor  # (H,) mean over queries seeing ≥ 2 keys of H(a_i) / log(keys seen)


def _check_block(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}.")
    return int(value)


def blocks_of(n: int, blocks: int) -> tuple[int, int]:
    """(block size b, blocks per side) for ``n`` tokens in at most ``blocks`` blocks: b = ⌈n / blocks⌉,
    so every block but the last holds b tokens; there are ⌈n / b⌉ of them (``blocks`` itself
    whenever n is a multiple of it, and whenever n ≥ blocks·(blocks − 1))."""
    _check_block("blocks", blocks)
    b = -(-n // min(blocks, n))
    return b, -(-n // b)


def segments(n: int, b: int, tile: int) -> list[tuple[int, int]]:
    """Cuts of 0…n into tiles of at most max(tile, b) that never split a block across two tiles
    unless the block is longer than ``tile`` (then its tiles lie within it)."""
    if b <= tile:
        step = (tile // b) * b
        return [(s, min(s + step, n)) for s in range(0, n, step)]
    return [(s, min(s + tile, e)) for e0 in range(0, n, b) for e in [min(e0 + b, n)] for s in range(e0, e, tile)]


def _fold(x: torch.Tensor, start: int, b: int, op: str, dim: int = -1) -> torch.Tensor:
    """x over positions start…start+n along ``dim``, reduced per block of ``b`` positions (the
    blocks it touches, along the same dim). The cut is at a block's start unless the whole of x
    lies in one block."""
    dim = dim % x.dim()
    n = x.shape[dim]

    def red(t, d, keep):
        return t.amax(d, keepdim=keep) if op == "max" else t.sum(d, keepdim=keep)

    if start % b or n <= b:  # within one block
        return red(x, dim, True)
    full = (n // b) * b
    parts = [red(x.narrow(dim, 0, full).unflatten(dim, (full // b, b)), dim + 1, False)]  # (..., n // b, ...)
    if full < n:
        parts.append(red(x.narrow(dim, full, n - full), dim, True))
    return torch.cat(parts, dim) if len(parts) > 1 else parts[0]


def _indicator(r0: int, r1: int, b: int, dtype) -> torch.Tensor:
    """(blocks touched, r1 − r0): row i's block is 1, as a matrix that sums rows per block."""
    ids = torch.arange(r0, r1) // b - r0 // b
    return torch.nn.functional.one_hot(ids).T.to(dtype)  # (nb, r)


def row_lse(q: torch.Tensor, k: torch.Tensor, *, causal: bool, tile: int = TILE) -> torch.Tensor:
    """log Σ_j exp(q_i·k_j) per query (q already scaled), by flash attention's online max and sum:
    q (H, L, D), k (KV, S, D) with H a multiple of KV -> (H, L) float32."""
    H, L, D = q.shape
    G = H // k.shape[0]
    out = torch.empty(H, L)
    for g in range(k.shape[0]):
        for r0 in range(0, L, tile):
            r1 = min(r0 + tile, L)
            qt = q[g * G:(g + 1) * G, r0:r1].reshape(G * (r1 - r0), D)  # (G·r, D)
            m = torch.full((G * (r1 - r0), 1), -math.inf)
            ell = torch.zeros(G * (r1 - r0), 1)
            for c0 in range(0, r1 if causal else k.shape[1], tile):
                c1 = min(c0 + tile, k.shape[1])
                s = qt @ k[g, c0:c1].T  # (G·r, c)
                if causal and c1 > r0:
                    s = s.view(G, r1 - r0, -1).masked_fill(_above(r0, r1, c0, c1), -math.inf).view(G * (r1 - r0), -1)
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))  # (G·r, 1)
                ell = ell * torch.exp(m - m_new) + torch.exp(s - m_new).sum(-1, keepdim=True)
                m = m_new
            out[g * G:(g + 1) * G, r0:r1] = (m + ell.log()).view(G, r1 - r0)
    return out


def _above(r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
    """(r, c) True where key j > query i: what a causal mask blocks in this tile (made once per shape)."""
    return _above_at(c0 - r0, r1 - r0, c1 - c0)


@functools.lru_cache(maxsize=16)
def _above_at(offset: int, r: int, c: int) -> torch.Tensor:
    return torch.arange(offset, offset + c)[None, :] > torch.arange(r)[:, None]


def layer_stats(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, *, causal: bool, blocks: int,
                tile: int = TILE) -> LayerStats:
    """Every number of one layer (see the module doc). q (H, L, D) already multiplied by the
    model's scale (rotary applied), k (KV, L, D), lse (H, L) from the same scores."""
    H, L, D = q.shape
    KV = k.shape[0]
    if H % KV:
        raise ValueError(f"{H} query heads cannot share {KV} key/value heads evenly.")
    G = H // KV
    b, nb = blocks_of(L, blocks)
    cuts = segments(L, b, _check_block("tile", tile))
    block_max = torch.zeros(H, nb, nb)
    block_sum = torch.zeros(H, nb, nb, dtype=torch.float64)
    received = torch.zeros(H, L, dtype=torch.float64)
    rows = torch.zeros(H, L, 2, dtype=torch.float64)  # Σ_j a_ij and Σ_j a_ij·log2(a_ij) per query
    dist = torch.zeros(H, L, dtype=torch.float64)  # Σ_j a_ij |i − j|
    sink = torch.zeros(H, L, dtype=torch.float64)
    n_sink = min(SINK_TOKENS, L)
    # x = (s − lse)·log2(e) as one product, so that a = 2^x: q·log2(e) with −lse·log2(e) beside it, k with 1
    # beside it, both padded with zeros to a multiple of 8 columns (the matrix kernels' favourite widths)
    width = -(-(D + 1) // 8) * 8
    qa = torch.zeros(H, L, width, dtype=q.dtype)
    qa[..., :D], qa[..., D] = q * LOG2E, -lse.to(q.dtype) * LOG2E  # (H, L, width)
    ka = torch.zeros(KV, L, width, dtype=k.dtype)
    ka[..., :D], ka[..., D] = k, 1.0  # (KV, L, width)
    offsets = torch.arange(max(e - s for s, e in cuts), dtype=q.dtype)  # j − c0 within a tile
    for g in range(KV):
        hs = slice(g * G, (g + 1) * G)
        for r0, r1 in cuts:
            r = r1 - r0
            qt = qa[hs, r0:r1].reshape(G * r, width)  # (G·r, width) the group's heads in one product
            rb0 = r0 // b
            i = torch.arange(r0, r1, dtype=q.dtype)
            for c0, c1 in cuts:
                if causal and c0 > r1 - 1:
                    break
                c = c1 - c0
                x = (qt @ ka[g, c0:c1].T).view(G, r, c)  # (G, r, c) log2 of this tile's weights
                if causal and c1 - 1 > r0:  # finite, so that 2^x = 0 and a·x = 0 there (0·(−inf) is NaN)
                    x.masked_fill_(_above(r0, r1, c0, c1), BLOCKED)
                # block maxima from the log-weights: the columns of each block first, then its rows, then 2^
                peaks = _fold(_fold(x, c0, b, "max"), r0, b, "max", dim=1).exp2_()  # (G, nbr, nbc)
                cb0 = c0 // b
                top = block_max[hs, rb0:rb0 + peaks.shape[1], cb0:cb0 + peaks.shape[2]]
                torch.maximum(top, peaks, out=top)
                a = torch.exp2(x)  # (G, r, c) the weights
                per_block = _fold(a, r0, b, "sum", dim=1)  # (G, nbr, c): column sums per block of rows
                received[hs, c0:c1] += per_block.sum(1)
                sums = _fold(per_block, c0, b, "sum")  # (G, nbr, nbc)
                block_sum[hs, rb0:rb0 + sums.shape[1], cb0:cb0 + sums.shape[2]] += sums
                # Σ a and Σ a·(j − c0) over this tile's keys, as matrix–vector products (j counted from the
                # tile's first key, so that i − j stays small in float32)
                total = a.sum(-1)  # (G, r)
                toward = torch.mv(a.view(G * r, c), offsets[:c]).view(G, r)  # (G, r)
                rows[hs, r0:r1, 0] += total
                rows[hs, r0:r1, 1] += torch.linalg.vecdot(a, x)  # Σ a·log2(a)
                ic = i - c0
                if causal or c1 - 1 <= r0:  # every key at or before its query: |i − j| = i − j
                    dist[hs, r0:r1] += ic * total - toward
                elif c0 >= r1 - 1:  # every key at or after it
                    dist[hs, r0:r1] += toward - ic * total
                else:  # both sides of the diagonal: |i − j| as it is
                    dist[hs, r0:r1] += (a * (ic[:, None] - torch.arange(c, dtype=q.dtype)).abs()).sum(-1)
                if c0 < n_sink:
                    sink[hs, r0:r1] += a[..., :n_sink - c0].sum(-1)
    pos = torch.arange(L, dtype=torch.float64)
    entropy_rows = -rows[..., 1] * math.log(2)  # (H, L) −Σ a ln a
    seen = pos + 1 if causal else torch.full((L,), float(L), dtype=torch.float64)  # keys each query may see
    counted = seen >= 2
    entropy = ((entropy_rows[:, counted] / seen[counted].log()).mean(-1) if bool(counted.any())
               else torch.full((H,), float("nan"), dtype=torch.float64))
    return LayerStats(block_max, block_sum, received, sink.mean(-1), dist.mean(-1), entropy)


def window(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, *, causal: bool, q0: int, k0: int,
           size: int) -> torch.Tensor:
    """The exact weights of queries q0…q0+size over keys k0…k0+size, for one head: q (L, D) already
    scaled, k (S, D), lse (L,) -> (rows, columns) (shorter at the ends)."""
    qs, ks = q[q0:q0 + size], k[k0:k0 + size]
    a = torch.exp(qs @ ks.T - lse[q0:q0 + size, None])  # (rows, cols)
    if causal:
        a = a.masked_fill(_above(q0, q0 + qs.shape[0], k0, k0 + ks.shape[0]), 0.0)
    return a
