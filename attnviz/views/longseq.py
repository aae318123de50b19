"""The Long sequences page: its settings (``Settings``), and its figures, one builder per part
(``attnviz.analysis.longseq`` computes the numbers). ``figure`` (the chosen part's) is what a link to
the page renders from the command line."""

from __future__ import annotations

from dataclasses import dataclass, replace

import plotly.graph_objects as go

from attnviz import jobs, limits
from attnviz import plots as F
from attnviz.analysis import longseq as LS
from attnviz.core.efficient import attention_memory
from attnviz.i18n import N_, _
from attnviz.jobs import Job
from attnviz.settings.spec import OWN, setting

CORNER = 96  # the sparse pattern is drawn for its first CORNER × CORNER entries
SQUARE = 520  # pixels: a tile or a pattern of up to 96 rows fits a half-width column


@dataclass(frozen=True)
class Settings:
    """The Long sequences page's own settings (the mask and its window are the sidebar's)."""

    length: int = setting(1024, lo=16, hi=limits.MAX_LONG_TOKENS, pages=OWN, label=N_("Length L (tokens)"),
                          help=N_("The text's first line, repeated to this many tokens."))
    block_q: int = setting(64, lo=1, hi=limits.MAX_BLOCK, pages=OWN, label=N_("Query block"),
                           help=N_("Rows of one tile: the queries computed together."))
    block_k: int = setting(64, lo=1, hi=limits.MAX_BLOCK, pages=OWN, label=N_("Key block"),
                           help=N_("Columns of one tile: the keys one step of the online softmax reads."))
    tile: int = setting(0, lo=0, hi=limits.MAX_LONG_TOKENS - 1, pages=OWN, label=N_("Step (key block)"),
                        help=N_("Which key block of the last query block the walkthrough shows."))
    pattern: str = setting("window", choices=LS.PATTERNS, pages=OWN, label=N_("Sparse pattern"),
                           help=N_("local window; dilated window (every 2nd key, twice as far); the first token "
                                   "global plus a window. The sidebar's window sets the width."))
    rank: int = setting(16, lo=1, hi=limits.MAX_LONG_TOKENS, pages=OWN, label=N_("Rank k"),
                        help=N_("The Linformer projection's rows, and the truncation's rank."))
    part: str = setting("cost", choices=LS.PARTS, pages=OWN, label=N_("Part"),
                        help=N_("Which part's figure a link renders from the command line."))


def causal(state) -> bool:
    """The page's paths are causal when the sidebar's mask is."""
    return state.mask in ("causal", "causal+window")


def long_input_of(state) -> LS.LongInput:
    return LS.long_input(state.config, state.long_sequences.length)


# The page's parts, computed in attnviz.analysis.longseq: read through this module.
flash_walk, long_input, sparse_patterns, low_rank, kernel_times = (
    LS.flash_walk, LS.long_input, LS.sparse_patterns, LS.low_rank, LS.kernel_times)
PATTERN_LABELS = LS.PATTERN_LABELS


def memory(state, L: int, H: int, D: int) -> dict[str, int]:
    """Bytes each path holds at ``L`` tokens (``attnviz.core.efficient.attention_memory``), with the state's tiles."""
    return attention_memory(L, L, H, D=D, block_q=state.long_sequences.block_q, block_k=state.long_sequences.block_k)


def naive_fits(L: int, H: int, D: int) -> bool:
    """Whether keeping the L × L weights of H heads fits this server's memory budget."""
    return attention_memory(L, L, H, D=D)["naive"] <= limits.memory_budget_bytes()


def longest_naive(L: int, H: int, D: int) -> int:
    """``L`` where its weights fit the budget, else the longest of the page's lengths whose weights do."""
    return L if naive_fits(L, H, D) else max(n for n in limits.LONG_LENGTHS if naive_fits(n, H, D))


def check_blocks(state) -> None:
    for name in ("block_q", "block_k"):
        if state.value(name) < 1:
            raise ValueError(f"{name} must be at least 1.")


COSTS = jobs.kind("long-cost")  # the cost sweeps, by heads, width, device, tiles and mask


def cost_job(heads: int, head_dim: int, device: str, block_q: int, block_k: int, causal: bool) -> Job:
    """The (one, shared) measurement of every path's time and memory at L = 128 … 8192: seconds
    of work, so it runs in the background, never in a page's own run."""
    return COSTS.start(("long-cost", heads, head_dim, device, block_q, block_k, causal),
                       lambda job: LS.cost_sweep(heads, head_dim, device, block_q, block_k, causal,
                                                 progress=job.report), N_("measuring"))


def cost_figures(sweep: LS.CostSweep, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    names = {"naive": _("naive (weights held)"), "tiled": _("tiled (online softmax)"), "sdpa": "F.sdpa"}
    time_fig = F.lines_figure(sweep.lengths, {names[p]: v for p, v in sweep.ms.items()},
                              _("measured time on {device}").format(device=sweep.device), style,
                              x_title="L", y_title="ms", log_y=True)
    mem = {names[p]: [None if b is None else b / 2**20 for b in v] for p, v in sweep.bytes.items()}
    mem_fig = F.lines_figure(sweep.lengths, mem, _("measured peak memory on {device}").format(device=sweep.device),
                             style, x_title="L", y_title="MB", log_y=True)
    return time_fig, mem_fig


def tile_figure(inp: LS.LongInput, walk: LS.FlashWalk, step: int, style: F.FigureStyle) -> go.Figure:
    """The live tile of ``step``: the walked query block's scaled scores against one key block."""
    s = walk.steps[min(step, len(walk.steps) - 1)]
    rows = inp.tokens[walk.first_row:walk.first_row + s.scores.shape[0]]
    start, stop = s.keys
    return F.matrix_figure(s.scores.cpu().numpy(), rows, inp.tokens[start:stop], _(
        "key block {b}: keys {a}–{z}, scaled scores").format(b=s.key_block, a=start, z=stop - 1),
        replace(style, height=style.height or SQUARE))


def step_numbers(step) -> dict[str, float]:
    """What the page says about one step: the rows' mean correction factor and running sum."""
    return {"correction": float(step.correction.mean()), "ell": float(step.ell.mean())}


def walk_figure(walk: LS.FlashWalk, style: F.FigureStyle) -> go.Figure:
    """Per key block: the smallest correction factor exp(m_old − m_new) of the block's rows
    (none at the first block: nothing came before it)."""
    steps = list(range(len(walk.steps)))
    factors = [None if i == 0 else float(s.correction.min()) for i, s in enumerate(walk.steps)]
    return F.lines_figure(steps, {_("smallest correction exp(m_old − m_new)"): factors},
                          _("correction per step"), style, x_title=_("key block"),
                          y_title=_("factor"), log_x=False)


def sparse_figures(result: list[LS.Sparse], pattern: str, inp: LS.LongInput,
                   style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    chosen = next(s for s in result if s.pattern == pattern)
    n = min(CORNER, inp.L)
    corner = chosen.mask[:n, :n].float().numpy()
    fig = F.matrix_figure(corner, inp.tokens[:n], inp.tokens[:n], _("{pattern}: {share} of the matrix computed<br>"
                          "(first {n} × {n} shown)").format(pattern=_(LS.PATTERN_LABELS[pattern]),
                                                            share=f"{chosen.fraction:.1%}", n=n),
                          replace(style, height=style.height or SQUARE), zero_one=True)
    moved = F.stacked_lines_figure(list(range(inp.L)),
                                   {_(LS.PATTERN_LABELS[s.pattern]): s.distance for s in result},
                                   _("how far each query's output moves from full attention"), style,
                                   x_title=_("query position"), y_title="‖o − o_full‖ / ‖o_full‖")
    return fig, moved


def low_rank_figures(lr: LS.LowRank, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    spectrum = F.lines_figure(list(range(1, len(lr.spectrum[0]) + 1)),
                              {_("head {h}").format(h=h): s for h, s in enumerate(lr.spectrum)},
                              _("singular values of each head's weights"), style, x_title=_("index"),
                              y_title="σ", log_y=True)
    floor = 1e-7  # a log axis cannot draw 0: an exact output (float64 rounding, ~1e-16) is drawn here

    def drawn(errors):
        return [max(e, floor) for e in errors]

    error = F.lines_figure(lr.ranks, {_("rank-k truncation of the weights"): drawn(lr.truncated),
                                      _("K, V as k segment means (exact at k = L)"): drawn(lr.linformer),
                                      _("K, V by an untrained random projection"): drawn(lr.random)},
                           _("output error against rank k (≤ 10⁻⁷ drawn at 10⁻⁷)"), style, x_title="k",
                           y_title="‖O − Ô‖ / ‖O‖", log_y=True)  # short: a projector's font outgrew the plot
    return spectrum, error


def kernels_figure(times: dict[str, float], style: F.FigureStyle, length: int) -> go.Figure:
    base = times["matmul"]
    labels = [f"{name} ({ms / base:.2f}×)" for name, ms in times.items()]
    return F.token_bars(labels, {"ms": list(times.values())}, _("the same attention three ways, L = {L}<br>(measured; "
                                                                 "ratio to matmul)").format(L=length), style,
                        y_title="ms")


def part_figure(part: str, state, style: F.FigureStyle) -> go.Figure:
    """The main figure of one part, for a link or the CLI (``--page long-sequences --part …``)."""
    check_blocks(state)
    if part == "cost":
        H, D = state.heads, state.d_model // state.heads
        own = state.long_sequences
        return cost_figures(LS.cost_sweep(H, D, state.device, own.block_q, own.block_k, causal(state)), style)[0]
    inp = long_input_of(state)
    if part == "tiles":
        own = state.long_sequences
        return tile_figure(inp, LS.flash_walk(inp, own.block_q, own.block_k, causal(state)), own.tile, style)
    if part == "sparse":
        return sparse_figures(LS.sparse_patterns(inp, state.window), state.long_sequences.pattern, inp, style)[0]
    if part == "lowrank":
        return low_rank_figures(LS.low_rank(inp, state.seed), style)[1]
    if part == "kernels":
        return kernels_figure(LS.kernel_times(inp), style, inp.L)
    raise ValueError(f"Unknown part {part!r}; choose one of {', '.join(LS.PARTS)}.")


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    return part_figure(state.long_sequences.part, state, style)
