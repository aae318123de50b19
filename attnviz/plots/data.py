"""What the heatmaps show, as plain numbers and labels (``HeatmapData``), so tests can
check them; drawing is elsewhere. Long texts are max-pooled to stay light in a browser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attnviz.i18n import _
from attnviz.plots.style import DEFAULT_MAX_CELLS, axis_labels, escape_label
from attnviz.run.result import AttentionResult


@dataclass
class HeatmapData:
    z: np.ndarray  # (rows, cols) float32
    x: list[str]  # column labels (escaped, unique)
    y: list[str]  # row labels (escaped, unique)
    title: str
    value_name: str = ""  # "" = "weight", in the current language
    zmin: float | None = 0.0
    zmax: float | None = 1.0
    pooled: int = 1  # block size when max-pooled (1 = full detail)
    notes: list[str] = field(default_factory=list)


def pool_block(rows: int, cols: int, max_cells: int) -> int:
    """The square block size that brings both sides to at most ``max_cells`` (1 = none)."""
    return max(1, math.ceil(max(rows, cols) / max_cells))


def pooling_note(rows: int, cols: int, block: int) -> str:
    return _("Overview: {rows}×{cols} weights are max-pooled in {block}×{block} blocks so the page stays fast; "
             "each cell shows its block's largest weight, so peaks survive.").format(rows=rows, cols=cols, block=block)


def max_pool(z: np.ndarray, max_cells: int) -> tuple[np.ndarray, int]:
    """Max-pool a (rows, cols) matrix with square blocks so that neither side
    exceeds ``max_cells``; peaks survive (a mean would wash them out).

    Returns the pooled matrix and the block size (1 when nothing was pooled).
    """
    rows, cols = z.shape
    block = pool_block(rows, cols, max_cells)
    if block == 1:
        return z, 1
    R, C = math.ceil(rows / block), math.ceil(cols / block)
    padded = np.full((R * block, C * block), -np.inf, dtype=np.float32)
    padded[:rows, :cols] = z
    pooled = padded.reshape(R, block, C, block).max(axis=(1, 3))  # (R, C)
    return pooled, block


def _block_labels(n: int, block: int) -> list[str]:
    return [f"{i}–{min(i + block, n) - 1}" for i in range(0, n, block)]


def _cells(z, max_cells: int | None) -> tuple[np.ndarray, int]:
    """A (rows, cols) matrix as float32, max-pooled to ``max_cells`` when given: (z, block)."""
    z = np.asarray(z, dtype=np.float32)
    return max_pool(z, max_cells) if max_cells is not None else (z, 1)


def matrix_data(z, rows: list[str], cols: list[str], title: str, max_cells: int | None,
                 **kw) -> HeatmapData:
    z, block = _cells(z, max_cells)
    if block > 1:
        x, y = _block_labels(len(cols), block), _block_labels(len(rows), block)
        return HeatmapData(z, x, y, title, pooled=block, notes=[pooling_note(len(rows), len(cols), block)], **kw)
    return HeatmapData(z, axis_labels(cols), axis_labels(rows), title, **kw)


def head_data(result: AttentionResult, n: int = 0, h: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    """Weights of head ``h`` of sequence ``n``: (L, S)."""
    w = result.weights[n, h].numpy()  # (L, S)
    return matrix_data(w, result.tokens[n], result.source_tokens[n], _("head {h}").format(h=h), max_cells)


def grid_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = DEFAULT_MAX_CELLS) -> list[HeatmapData]:
    """One ``HeatmapData`` per head, pooled when the text is long. Every head has the same
    rows and columns: their labels are made once and shared."""
    first = head_data(result, n, 0, max_cells=max_cells)
    out = [first]
    for h in range(1, result.weights.shape[1]):
        z, _block = _cells(result.weights[n, h].numpy(), max_cells)  # (L, S), pooled as the first
        out.append(replace(first, z=z, title=_("head {h}").format(h=h), notes=list(first.notes)))
    return out


def mean_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    w = result.weights[n].mean(dim=0).numpy()  # (H, L, S) -> (L, S)
    return matrix_data(w, result.tokens[n], result.source_tokens[n], _("mean over heads"),
                        max_cells)


def mask_data(result: AttentionResult, n: int = 0, *,
              max_cells: int | None = None) -> HeatmapData:
    """1 where a query may attend, 0 where blocked: (L, S)."""
    m = result.mask_matrix(n).to(torch.float32).numpy()  # (L, S)
    title = _("mask: {kind}").format(kind=result.mask_name)
    return matrix_data(m, result.tokens[n], result.source_tokens[n], title, max_cells,
                        value_name=_("may attend"))


def output_data(result: AttentionResult, n: int = 0) -> HeatmapData:
    """The output vectors: tokens × d_model."""
    o = result.output[n].numpy()  # (L, E)
    lim = float(np.abs(o).max()) or 1.0
    return HeatmapData(o, [str(i) for i in range(o.shape[1])], axis_labels(result.tokens[n]),
                       _("output vectors"), value_name=_("value"), zmin=-lim, zmax=lim)


def query_data(result: AttentionResult, n: int = 0, q: int = 0) -> tuple[np.ndarray, list[str], str]:
    """Weights of query ``q`` over every key, per head: (H, S), key labels, query label."""
    w = result.weights[n, :, q, :].numpy()  # (H, S)
    return w, axis_labels(result.source_tokens[n]), escape_label(result.tokens[n][q])


REGION = 64  # rows and columns of the hoverable close-up


def region_data(result: AttentionResult, n: int, h: int | None, q0: int, k0: int, size: int = REGION) -> HeatmapData:
    """A size × size close-up of head ``h`` (None: the mean over heads) from query q0, key k0,
    labelled "position: token"."""
    L, S = result.weights.shape[-2:]
    q0, k0 = max(0, min(q0, L - 1)), max(0, min(k0, S - 1))
    q1, k1 = min(L, q0 + size), min(S, k0 + size)
    w = result.weights[n, :, q0:q1, k0:k1]  # (H, size, size)
    z = (w.mean(dim=0) if h is None else w[h]).numpy()
    rows = [f"{i}: {t}" for i, t in enumerate(result.tokens[n][q0:q1], q0)]
    cols = [f"{j}: {t}" for j, t in enumerate(result.source_tokens[n][k0:k1], k0)]
    what = _("mean over heads") if h is None else _("head {h}").format(h=h)
    title = _("{what}, queries {q0}–{q1} × keys {k0}–{k1}").format(what=what, q0=q0, q1=q1 - 1, k0=k0, k1=k1 - 1)
    return HeatmapData(z, axis_labels(cols), axis_labels(rows), title)
