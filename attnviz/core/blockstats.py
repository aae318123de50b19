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

May import: ``torch``, ``attnviz.core``, ``attnviz.limits`` and ``attnviz.i18n`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SINK_TOKENS = 4  # StreamingLLM's attention sinks: the first tokens
TILE = 512  # rows and columns of one tile of scores


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


def _fold(x: torch.Tensor, start: int, b: int, op: str) -> torch.Tensor:
    """x (..., n) over positions start…start+n, reduced per block of ``b`` positions: (..., blocks
    it touches). The cut is at a block's start unless the whole of x lies in one block."""
    n = x.shape[-1]
    if start % b or n <= b:  # within one block
        return x.amax(-1, keepdim=True) if op == "max" else x.sum(-1, keepdim=True)
    full = (n // b) * b
    parts = [x[..., :full].unflatten(-1, (full // b, b))]  # (..., n // b, b)
    red = [p.amax(-1) if op == "max" else p.sum(-1) for p in parts]
    if full < n:
        rest = x[..., full:]
        red.append(rest.amax(-1, keepdim=True) if op == "max" else rest.sum(-1, keepdim=True))
    return torch.cat(red, -1) if len(red) > 1 else red[0]


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
    """(r, c) True where key j > query i: what a causal mask blocks in this tile."""
    return torch.arange(c0, c1)[None, :] > torch.arange(r0, r1)[:, None]


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
    rows = torch.zeros(H, L, D + 1, dtype=torch.float64)  # Σ_j a_ij and Σ_j a_ij·k_j per query
    dist = torch.zeros(H, L, dtype=torch.float64)  # Σ_j a_ij |i − j|
    sink = torch.zeros(H, L, dtype=torch.float64)
    n_sink = min(SINK_TOKENS, L)
    for g in range(KV):
        hs = slice(g * G, (g + 1) * G)
        for r0, r1 in cuts:
            r = r1 - r0
            qt = q[hs, r0:r1].reshape(G * r, D)  # (G·r, D) the group's heads in one product
            shift = lse[hs, r0:r1].reshape(G * r, 1)  # (G·r, 1)
            rb0, ind = r0 // b, _indicator(r0, r1, b, q.dtype)  # (nbr, r)
            for c0, c1 in cuts:
                if causal and c0 > r1 - 1:
                    break
                c = c1 - c0
                kt = k[g, c0:c1]  # (c, D)
                a = (qt @ kt.T).sub_(shift).exp_().view(G, r, c)  # (G, r, c) the weights of this tile
                if causal and c1 - 1 > r0:
                    a.masked_fill_(_above(r0, r1, c0, c1), 0.0)
                cb0 = c0 // b
                peaks = _fold(_fold(a, c0, b, "max").transpose(1, 2), r0, b, "max").transpose(1, 2)  # (G, nbr, nbc)
                top = block_max[hs, rb0:rb0 + peaks.shape[1], cb0:cb0 + peaks.shape[2]]
                torch.maximum(top, peaks, out=top)
                per_block = ind @ a  # (G, nbr, c): column sums per block of rows
                received[hs, c0:c1] += per_block.sum(1)
                sums = _fold(per_block, c0, b, "sum")  # (G, nbr, nbc)
                block_sum[hs, rb0:rb0 + sums.shape[1], cb0:cb0 + sums.shape[2]] += sums
                # j counted from the tile's first key, so that i − j stays small in float32
                w = torch.cat((torch.ones(c, 1), torch.arange(c, dtype=q.dtype)[:, None], kt), 1)  # (c, D + 2)
                t = (a.view(G * r, c) @ w).view(G, r, D + 2)  # Σ a, Σ a·(j − c0), Σ a·k_j over this tile's keys
                rows[hs, r0:r1, 0] += t[..., 0]
                rows[hs, r0:r1, 1:] += t[..., 2:]
                i = torch.arange(r0 - c0, r1 - c0, dtype=q.dtype)  # i − c0
                if causal or c1 - 1 <= r0:  # every key at or before its query: |i − j| = i − j
                    dist[hs, r0:r1] += i * t[..., 0] - t[..., 1]
                elif c0 >= r1 - 1:  # every key at or after it
                    dist[hs, r0:r1] += t[..., 1] - i * t[..., 0]
                else:  # both sides of the diagonal: |i − j| as it is
                    dist[hs, r0:r1] += (a * (i[:, None] - torch.arange(c, dtype=q.dtype)).abs()).sum(-1)
                if c0 < n_sink:
                    sink[hs, r0:r1] += a[..., :n_sink - c0].sum(-1)
    pos = torch.arange(L, dtype=torch.float64)
    total, pulled = rows[..., 0], rows[..., 1:]
    entropy_rows = lse.double() * total - (q.double() * pulled).sum(-1)  # (H, L)
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
