"""Named views of a run: the one place that turns (result, view state) into a
figure or a file, so the app and ``python -m attnviz render`` draw the same thing.
"""

from __future__ import annotations

import csv
import io
import json
import re

import plotly.graph_objects as go

from . import figures as F
from .params import ViewState
from .pipeline import AttentionResult

FIGURE_VIEWS = ("grid", "head", "query", "mean", "mask", "output")
PRESENTER_FONT = 24
VIEW_TITLES = {
    "grid": "All heads",
    "head": "One head",
    "query": "Query focus",
    "mean": "Mean over heads",
    "mask": "Mask",
    "output": "Output vectors",
    "table": "Weights table",
}


def style_for(state: ViewState, *, theme: str = "light", width=None, height=None) -> F.FigureStyle:
    """Presenter mode: fonts and ticks large enough for the back of a room."""
    return F.FigureStyle(colors=state.colors, theme=theme, width=width, height=height,
                         font_size=PRESENTER_FONT if state.present else 12)


def clamp_selection(result: AttentionResult, state: ViewState) -> tuple[ViewState, list[str]]:
    """Keep seq/head/query inside this result, saying what was changed."""
    N, H, L, _ = result.weights.shape
    notes, changes = [], {}
    if state.seq >= N:
        notes.append(f"Sentence {state.seq + 1} does not exist (the text has {N}); showing sentence 1.")
        changes["seq"] = 0
    if state.head >= H:
        notes.append(f"Head {state.head} does not exist ({H} heads); showing head 0.")
        changes["head"] = 0
    if state.query >= L:
        notes.append(f"Query position {state.query} is past the last token ({L - 1}); showing position 0.")
        changes["query"] = 0
    return state.with_(**changes), notes


def view_figure(result: AttentionResult, state: ViewState, view: str | None = None, *,
                style: F.FigureStyle | None = None, max_cells: int | None = F.DEFAULT_MAX_CELLS) -> go.Figure:
    """The figure of ``view`` (default: ``state.view``) for the selected sentence/head/query."""
    view = view or state.view
    style = style or style_for(state)
    n, h, q = state.seq, state.head, state.query
    if view == "grid":
        return F.grid_figure(F.grid_data(result, n, max_cells=max_cells), style)
    if view in ("head", "table"):
        return F.heatmap_figure(F.head_data(result, n, h), style)
    if view == "mean":
        return F.heatmap_figure(F.mean_data(result, n), style)
    if view == "mask":
        return F.mask_figure(result, n, style)
    if view == "output":
        return F.output_figure(result, n, style)
    if view == "query":
        return F.query_figure(result, n, q, style)
    raise ValueError(f"Unknown view {view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")


def view_key(state: ViewState, view: str | None = None) -> tuple:
    """The plain values that ``view_figure`` reads for ``view``: a cache key for its figure.

    Only the selection a view shows is included, so changing the head leaves the
    cached grid, mean and mask figures valid.
    """
    view = view or state.view
    selection = {"head": (state.head,), "table": (state.head,), "query": (state.query,)}.get(view, ())
    return (state.config(), view, state.seq, *selection, style_for(state))


def pooled_note(result: AttentionResult, max_cells: int = F.DEFAULT_MAX_CELLS) -> str | None:
    """What the grid overview says when it max-pools a long text (None when it doesn't)."""
    L, S = result.weights.shape[-2:]
    block = F.pool_block(L, S, max_cells)
    return F.pooling_note(L, S, block) if block > 1 else None


def file_stem(state: ViewState, view: str) -> str:
    """A meaningful, filesystem-safe download name: attnviz-grid-causal-4h-64d-seed0."""
    extra = {"head": f"-head{state.head}", "query": f"-query{state.query}"}.get(view, "")
    stem = f"attnviz-{view}{extra}-{state.mask}-{state.heads}h-{state.d_model}d-seed{state.seed}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem)


def weights_csv(result: AttentionResult) -> str:
    """Every weight in long form: sequence, head, query/key positions and tokens, weight."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["sequence", "head", "query_pos", "query", "key_pos", "key", "weight"])
    weights = result.weights  # (N, H, L, S)
    N, H, L, S = weights.shape
    for n in range(N):
        qt, kt = result.tokens[n], result.source_tokens[n]
        rows = weights[n].tolist()  # (H, L, S) as nested lists: fast to iterate
        for h in range(H):
            for i in range(L):
                row = rows[h][i]
                for j in range(S):
                    w.writerow([n, h, i, qt[i], j, kt[j], repr(row[j])])
    return buf.getvalue()


def run_json(result: AttentionResult) -> str:
    """The whole run as JSON; byte-identical for the same config (sorted keys, no times)."""
    return json.dumps(result.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
