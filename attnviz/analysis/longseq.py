"""Long sequences: what the L × L matrix costs, and three ways around it, on the user's text.

Every function here is pure (numbers in, numbers out) and measured in the process that
calls it: the cost sweep (naive, tiled, SDPA against L), the flash walkthrough (the online
softmax of the first query block, tile by tile), sparse patterns (how far each query's
output moves from full attention), low rank (each head's spectrum, and the output error of
a rank-k truncation and of a Linformer projection), and the ``matmul`` / ``baddbmm`` /
SDPA timings. The page (``attnviz.views.longseq``) draws them.

Memory: ``attnviz.analysis.tensorbytes.peak_tensor_bytes`` (on CUDA the allocator's peak; elsewhere the
peak of live tensor bytes the call created, on meta copies of the inputs where ``counts_on_shapes`` says so).
"""

from __future__ import annotations

import copy
import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from attnviz import limits
from attnviz.analysis.tensorbytes import counts_on_shapes, peak_tensor_bytes
from attnviz.core import efficient as E
from attnviz.core.devices import resolve_device
from attnviz.core.masks import dilated_window_mask, global_tokens_mask, local_window_mask
from attnviz.i18n import N_
from attnviz.inputs.embeddings import embed_padded
from attnviz.inputs.text import lines_of, tokenize_lines
from attnviz.run.config import AttentionConfig
from attnviz.run.run import random_layer

PATTERNS = ("window", "dilated", "global+window")
PATTERN_LABELS = {"window": N_("local window"), "dilated": N_("dilated window"),
                  "global+window": N_("global tokens + window")}
PARTS = ("cost", "tiles", "sparse", "lowrank", "kernels")


@dataclass
class LongInput:
    """The text repeated to ``L`` tokens, projected by the sidebar's random layer."""

    tokens: list[str]
    q: torch.Tensor  # (1, H, L, D)
    k: torch.Tensor  # (1, H, L, D)
    v: torch.Tensor  # (1, H, L, D)
    device: str
    repeats: float  # how many times the first line was repeated

    @property
    def L(self) -> int:
        return int(self.q.shape[-2])

    @property
    def heads(self) -> int:
        return int(self.q.shape[1])


def repeat_to(tokens: list[str], length: int) -> list[str]:
    """``tokens`` repeated cyclically to exactly ``length`` tokens."""
    return [tokens[i % len(tokens)] for i in range(length)]


def check_length(length: int) -> None:
    if not 1 <= length <= limits.MAX_LONG_TOKENS:
        raise ValueError(f"The length must be between 1 and {limits.MAX_LONG_TOKENS:,} tokens, got {length:,}.")


def long_input(config: AttentionConfig, length: int) -> LongInput:
    """The first line of ``config.text`` repeated to ``length`` tokens, embedded and projected
    to per-head Q, K and V on ``config.device`` (only L·E numbers: no L × L matrix)."""
    check_length(length)
    seq = tokenize_lines(lines_of(config.text)[:1], config.tokenize_mode)[0]
    tokens = repeat_to(seq, length)
    x = embed_padded([tokens], length, config.d_model, config.positional)  # (1, L, E)
    module = random_layer(config).module
    dev = resolve_device(config.device)
    if dev.type != "cpu":  # the drawn layer is shared (attnviz.models.random.LAYERS): moved, it is a copy
        module = copy.deepcopy(module).to(dev)
    with torch.no_grad():
        q, k, v = module.project(x.to(dev))  # 3 × (1, H, L, D)
    return LongInput(tokens, q, k, v, str(dev), length / len(seq))


# --- measuring ------------------------------------------------------------------------------

ONE_RUN_FROM = 4096  # from this length a path's one timed run is seconds of work: no repeats, no warm-up


def tile_numbers(heads: int, L: int, block_k: int) -> int:
    """The numbers each operator of the tiled path makes: a tile's scores, (H, L, block_k)."""
    return heads * L * min(block_k, L)


def timed(fn: Callable[[], object], device: str, repeats: int = 3, warm: bool = False) -> float:
    """The median milliseconds of ``fn``, after one warm-up call (none where ``warm``: it has just run)."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
    if not warm:
        fn()
        sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def naive(q, k, v, causal: bool = False) -> torch.Tensor:
    """softmax(QKᵀ/√d)·V with the whole (L, S) score and weight matrices held."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (N, H, L, S)
    if causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.softmax(scores, -1) @ v  # (N, H, L, D)


def baddbmm_path(q, k, v) -> torch.Tensor:
    """The tutorials' trick: the scale folded into the GEMM as ``alpha`` (``torch.baddbmm``)."""
    N, H, L, D = q.shape
    q3, k3, v3 = q.reshape(N * H, L, D), k.reshape(N * H, -1, D), v.reshape(N * H, -1, v.shape[-1])
    scores = torch.baddbmm(q3.new_empty(N * H, L, k3.shape[1]), q3, k3.transpose(1, 2), beta=0.0,
                           alpha=1 / math.sqrt(D))  # (N·H, L, S)
    return torch.bmm(torch.softmax(scores, -1), v3).view(N, H, L, -1)  # (N, H, L, D)


# --- part 1: the cost of the L × L matrix -----------------------------------------------


@dataclass
class CostSweep:
    lengths: list[int]
    ms: dict[str, list[float | None]]  # path -> time per length (None: not run)
    bytes: dict[str, list[int | None]]  # path -> peak bytes per length (None: not run)
    skipped: list[str] = field(default_factory=list)  # what was not run, and why
    device: str = "cpu"


def cost_sweep(heads: int, head_dim: int, device: str, block_q: int, block_k: int, causal: bool,
               lengths: tuple[int, ...] = limits.LONG_LENGTHS, seed: int = 0, progress=None) -> CostSweep:
    """Each path's measured time and peak memory at each length, on seeded random Q, K, V.
    The naive path is not run where its weights alone would exceed the memory budget.
    ``progress(fraction)``: called after each length, the fraction of the L² work done."""
    dev = str(resolve_device(device))
    budget = limits.memory_budget_bytes()
    out = CostSweep(list(lengths), {p: [] for p in ("naive", "tiled", "sdpa")},
                    {p: [] for p in ("naive", "tiled", "sdpa")}, device=dev)
    gen = torch.Generator().manual_seed(seed)
    paths = {
        "naive": lambda q, k, v: naive(q, k, v, causal),
        "tiled": lambda q, k, v: E.tiled_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=causal),
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
    }
    for L in lengths:
        q, k, v = (torch.randn(1, heads, L, head_dim, generator=gen).to(dev) for _ in range(3))  # (1, H, L, D)
        naive_bytes = E.attention_memory(L, L, heads, D=head_dim)["naive"]
        # each operator's numbers: the naive path's (H, L, L), the tiled path's (H, L, block_k); SDPA on the CPU
        # always (on meta it takes a kernel that holds the weights)
        on_shapes = {"naive": counts_on_shapes(heads * L * L),
                     "tiled": counts_on_shapes(tile_numbers(heads, L, block_k)), "sdpa": False}
        for name, path in paths.items():
            if name == "naive" and naive_bytes > budget:
                out.ms[name].append(None)
                out.bytes[name].append(None)
                out.skipped.append(f"naive at L={L}: {naive_bytes / 2**20:,.0f} MB of scores and weights, over "
                                   f"the budget of {budget / 2**20:,.0f} MB")
                continue
            with torch.no_grad():
                # a count on the CPU is the timing's warm-up; on shapes, none at a length that is seconds of work
                out.bytes[name].append(peak_tensor_bytes(path, q, k, v, shapes_only=on_shapes[name]))
                long = L >= ONE_RUN_FROM
                out.ms[name].append(timed(functools.partial(path, q, k, v), dev, repeats=1 if long else 3,
                                          warm=long or not on_shapes[name]))
        if progress is not None:
            progress(sum(n * n for n in lengths if n <= L) / sum(n * n for n in lengths))
    return out


# --- part 2: flash attention, tile by tile ---------------------------------------------


@dataclass
class FlashWalk:
    steps: list  # efficient.TileStep: the walked (last) query block of head 0, one per key block
    first_row: int  # the walked block's first query position
    block_q: int
    block_k: int
    max_diff: float  # |tiled − SDPA| over the whole output
    block_diff: float  # |last step's partial output − naive rows| of the walked block
    peak_bytes: int  # what the tiled pass over every head held
    naive_bytes: int  # what every head's scores and weights would have held


def flash_walk(inp: LongInput, block_q: int, block_k: int, causal: bool) -> FlashWalk:
    """Every head's output on the tiled path, against SDPA's, and the online softmax of
    head 0's last query block (under a causal mask, the one that sees every key block) step
    by step. Nothing of size L × L is made, at any length."""
    L = inp.L
    with torch.no_grad():
        out = E.tiled_attention(inp.q, inp.k, inp.v, block_q=block_q, block_k=block_k, is_causal=causal)
        ref = F.scaled_dot_product_attention(inp.q, inp.k, inp.v, is_causal=causal)  # (1, H, L, D)
        on_shapes = counts_on_shapes(tile_numbers(inp.q.shape[1], L, block_k))  # q: (1, H, L, D)
        peak = peak_tensor_bytes(lambda q, k, v: E.tiled_attention(q, k, v, block_q=block_q, block_k=block_k,
                                                                   is_causal=causal),
                                 inp.q, inp.k, inp.v, shapes_only=on_shapes)
    q, k, v = inp.q[:, :1], inp.k[:, :1], inp.v[:, :1]  # head 0: (1, 1, L, D)
    r0 = (L - 1) // block_q * block_q  # the last query block: rows r0 … L−1
    rows = torch.arange(r0, L, device=q.device)[:, None]  # (rows, 1) their positions
    visible = torch.arange(L, device=q.device)[None, :] <= rows if causal else None  # (rows, S), small
    with torch.no_grad():
        _o, trace = E.tiled_attention(q[..., r0:, :], k, v, visible, block_q=block_q, block_k=block_k, trace=True)
        scores = (q[..., r0:, :] @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (1, 1, rows, S)
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        rows_naive = torch.softmax(scores, -1) @ v  # (1, 1, rows, D)
    # The last step's partial output is the walked block's output: compare it with the naive rows.
    block_diff = float((trace[-1].partial.to(q.device) - rows_naive[0, 0]).abs().max())
    return FlashWalk(trace, r0, block_q, block_k, float((out - ref).abs().max()), block_diff, peak,
                     E.attention_memory(L, L, inp.heads, D=q.shape[-1])["naive"])


# --- part 3: sparse patterns ------------------------------------------------------------


def pattern_mask(pattern: str, L: int, window: int, dilation: int = 2, globals_: int = 1) -> torch.Tensor:
    """The pattern as a bool (L, L) mask (True = computed), composed from the core's masks."""
    if pattern == "window":
        return local_window_mask(L, window)
    if pattern == "dilated":
        return dilated_window_mask(L, window, dilation)
    if pattern == "global+window":
        return local_window_mask(L, window) | global_tokens_mask(L, globals_)
    raise ValueError(f"Unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}.")


@dataclass
class Sparse:
    pattern: str
    fraction: float  # of the L × L entries computed
    distance: list[float]  # per query: ‖o_sparse − o_full‖ / ‖o_full‖, mean over heads
    mask: torch.Tensor  # (L, L) bool, the pattern


def sparse_patterns(inp: LongInput, window: int) -> list[Sparse]:
    """Each pattern's share of the matrix, and how far each query's output moves from full attention."""
    L = inp.L
    if L > limits.MAX_SPARSE_TOKENS:
        raise ValueError(f"Sparse patterns are compared with full attention up to {limits.MAX_SPARSE_TOKENS:,} "
                         f"tokens; this is {L:,}.")
    out = []
    with torch.no_grad():
        full = F.scaled_dot_product_attention(inp.q, inp.k, inp.v)  # (1, H, L, D)
        norm = full.norm(dim=-1).clamp_min(1e-12)  # (1, H, L)
        for p in PATTERNS:
            m = pattern_mask(p, L, window).to(inp.q.device)
            o = F.scaled_dot_product_attention(inp.q, inp.k, inp.v, attn_mask=m)  # (1, H, L, D)
            dist = ((o - full).norm(dim=-1) / norm).mean(1)[0]  # (L,)
            out.append(Sparse(p, float(m.float().mean()), dist.cpu().tolist(), m.cpu()))
    return out


# --- part 4: low rank -------------------------------------------------------------------


@dataclass
class LowRank:
    ranks: list[int]
    spectrum: list[list[float]]  # per head: singular values of its weights, largest first
    truncated: list[float]  # per rank: ‖O − O_k‖ / ‖O‖ (mean over heads), O_k from the rank-k weights
    linformer: list[float]  # per rank: the same for K and V projected to k segment means (exact at k = L)
    random: list[float]  # per rank: the same for an untrained random projection (E ~ N(0, 1)/√k)
    kept_bytes: dict[str, list[int]]  # per rank: what each keeps (weights L×L vs L×k + k×D)


def rank_grid(L: int) -> list[int]:
    ranks, r = [], 1
    while r < L:
        ranks.append(r)
        r *= 2
    return [*ranks, L]


def low_rank(inp: LongInput, seed: int = 0) -> LowRank:
    L = inp.L
    if L > limits.MAX_LOW_RANK_TOKENS:
        raise ValueError(f"The spectrum needs an SVD of every head's {L} × {L} weights; up to "
                         f"{limits.MAX_LOW_RANK_TOKENS} tokens are shown here.")
    ranks = rank_grid(L)
    with torch.no_grad():
        q, k, v = (t.cpu().double() for t in (inp.q, inp.k, inp.v))  # SVD in float64, on the CPU
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)  # (1, H, L, L)
        o = w @ v  # (1, H, L, D)
        spectrum = E.singular_values(w)[0]  # (H, L)
        trunc = [float(E.relative_error(o, o_k).mean()) for o_k in E.rank_k_outputs(w, v, ranks)]  # one SVD
        lin, rnd = ([float(E.relative_error(o, E.low_rank_attention(q, k, v, r, seed=seed,
                                                                    projection_kind=kind)).mean())
                     for r in ranks] for kind in ("segments", "random"))
    D, H = q.shape[-1], q.shape[1]
    kept = {"weights": [H * L * L * 4] * len(ranks), "linformer": [H * (L * r + r * D) * 4 for r in ranks]}
    return LowRank(ranks, spectrum.tolist(), trunc, lin, rnd, kept)


# --- part 5: matmul, baddbmm, SDPA --------------------------------------------------------


def kernel_times(inp: LongInput) -> dict[str, float]:
    """Milliseconds of each way to compute the same attention, in one run; on CUDA also
    SDPA's backends where this GPU has them."""
    q, k, v = inp.q, inp.k, inp.v
    if E.attention_memory(inp.L, inp.L, inp.heads)["naive"] > limits.memory_budget_bytes():
        raise ValueError(f"matmul and baddbmm hold the whole {inp.L} × {inp.L} weights per head: over the memory "
                         f"budget at this length. Choose a shorter length to compare them.")
    paths = {"matmul": lambda: naive(q, k, v), "baddbmm": lambda: baddbmm_path(q, k, v),
             "SDPA": lambda: F.scaled_dot_product_attention(q, k, v)}
    if inp.device.startswith("cuda"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for name, backend in (("SDPA math", SDPBackend.MATH), ("SDPA memory-efficient", SDPBackend.EFFICIENT_ATTENTION),
                              ("SDPA flash", SDPBackend.FLASH_ATTENTION)):
            def run(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v)

            try:
                with torch.no_grad():
                    run()
            except RuntimeError:  # this GPU or dtype lacks that kernel
                continue
            paths[name] = run
    with torch.no_grad():
        return {name: timed(fn, inp.device, repeats=5) for name, fn in paths.items()}
