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
from .i18n import N_, _
from .params import ViewState
from .pipeline import AttentionResult

FIGURE_VIEWS = ("grid", "head", "query", "mean", "mask", "output", "model", "analysis")
PRESENTER_FONT = 24
VIEW_TITLES = {  # marked for translation; translated where shown
    "grid": N_("All heads"),
    "head": N_("One head"),
    "query": N_("Query focus"),
    "mean": N_("Mean over heads"),
    "mask": N_("Mask"),
    "output": N_("Output vectors"),
    "table": N_("Weights table"),
    "model": N_("Model view"),
    "analysis": N_("Head analysis"),
}


def style_for(state: ViewState, *, theme: str = "light", width=None, height=None) -> F.FigureStyle:
    """Presenter mode: fonts and ticks large enough for the back of a room."""
    return F.FigureStyle(colors=state.colors, theme=theme, width=width, height=height,
                         font_size=PRESENTER_FONT if state.present else 12, lang=state.lang)


def selection_problems(result: AttentionResult, state: ViewState) -> dict[str, str]:
    """Which of seq/head/query do not exist in this result, and why (empty when all do)."""
    N, H, L, _S = result.weights.shape
    problems = {}
    if state.seq >= N:
        problems["seq"] = _("Sentence {n} does not exist (the text has {count})").format(n=state.seq + 1, count=N)
    if state.head >= H:
        problems["head"] = _("Head {h} does not exist ({count} heads)").format(h=state.head, count=H)
    if state.query >= L:
        problems["query"] = _("Query position {q} is past the last token ({last})").format(q=state.query, last=L - 1)
    return problems


def clamp_selection(result: AttentionResult, state: ViewState) -> tuple[ViewState, list[str]]:
    """Keep seq/head/query inside this result, saying what was changed (the app's way);
    query -1 becomes the last real token of the sentence."""
    problems = selection_problems(result, state)
    shown = {"seq": _("showing sentence 1"), "head": _("showing head 0"), "query": _("showing the last token")}
    notes = [f"{text}; {shown[k]}." for k, text in problems.items()]
    fixed = state.with_(**{k: (-1 if k == "query" else 0) for k in problems})
    return resolve_query(result, fixed), notes


def resolve_query(result: AttentionResult, state: ViewState) -> ViewState:
    """``query = -1`` (the default) is the last real token: under a causal mask it sees
    every key, where token 0 sees only itself."""
    if state.query >= 0:
        return state
    seq = min(state.seq, len(result.lengths) - 1)
    return state.with_(query=result.lengths[seq] - 1)


def view_figure(result: AttentionResult, state: ViewState, view: str | None = None, *,
                style: F.FigureStyle | None = None, max_cells: int | None = F.DEFAULT_MAX_CELLS) -> go.Figure:
    """The figure of ``view`` (default: ``state.view``) for the selected sentence/head/query."""
    view = view or state.view
    style = style or style_for(state)
    n, h, q = state.seq, state.head, state.query
    if view == "grid":
        return F.grid_figure(F.grid_data(result, n, max_cells=max_cells), style)
    if view in ("head", "table", "mean", "mask") and is_long(result):
        return long_figure(result, state, view, style)
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
    if view == "model":
        return model_figure(result, n, style)
    if view == "analysis":
        return rollout_figure(result, n, style)
    raise ValueError(f"Unknown view {view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")


def model_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Every layer × head as small multiples (a row per layer), pooled like the grid."""
    lw = result.layer_weights  # (layers, N, H, L, S)
    layers, _N, H = lw.shape[:3]
    data = []
    for layer in range(layers):
        for h in range(H):
            d = F._matrix_data(lw[layer, n, h].numpy(), result.tokens[n], result.source_tokens[n],
                               f"L{layer} H{h}", F.DEFAULT_MAX_CELLS // 2)
            data.append(d)
    name = result.config.model
    return F.grid_figure(data, style, title=_("model view: {layers} layer(s) × {H} heads of {name}").format(
        layers=layers, H=H, name=name), cols=H,
                         ticks=False, clickable=True)


def head_table(result: AttentionResult, n: int) -> list[dict]:
    """The head analysis of sequence ``n``: a row per layer × head."""
    from .analysis import head_stats

    return [s.row() for s in head_stats(result.layer_weights, n, result.lengths[n], result.tokens[n])]


def rollout_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Attention rollout across every layer (Abnar & Zuidema 2020), over the real tokens."""
    from .analysis import rollout

    k = result.lengths[n]
    r = rollout(result.layer_weights[:, n, :, :k, :k]).numpy()  # (k, k)
    toks = result.tokens[n][:k]
    return F.matrix_figure(r, toks, toks, _("attention rollout over {layers} layer(s): how much each token draws on "
                                            "each input token").format(layers=result.layers), style,
                           value_name=_("share"), zero_one=True)


def is_long(result: AttentionResult) -> bool:
    """Too many cells for a hoverable heatmap of one head: drawn as an image instead."""
    L, S = result.weights.shape[-2:]
    return L * S > F.IMAGE_ABOVE_CELLS


def long_figure(result: AttentionResult, state: ViewState, view: str, style: F.FigureStyle) -> go.Figure:
    """A full-detail view of a long text: every cell as one pixel of an image."""
    n = state.seq
    if view == "mask":
        return F.image_figure(F.mask_data(result, n), style, scale=F.MASK_COLORS)
    d = F.mean_data(result, n) if view == "mean" else F.head_data(result, n, state.head)
    return F.image_figure(d, style)


def region_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle | None = None) -> go.Figure:
    """The exact numbers of a long view: a REGION × REGION close-up from (q0, k0)."""
    h = None if state.view == "mean" else state.head
    return F.region_figure(F.region_data(result, state.seq, h, state.q0, state.k0), style or style_for(state))


def view_key(state: ViewState, view: str | None = None) -> tuple:
    """The plain values that ``view_figure`` reads for ``view``: a cache key for its figure.

    Only the selection a view shows is included, so changing the head leaves the
    cached grid, mean and mask figures valid.
    """
    view = view or state.view
    selection = {"head": (state.head,), "table": (state.head,), "query": (state.query,),
                 "region": (state.view, state.head, state.q0, state.k0)}.get(view, ())
    return (state.config(), view, state.seq, *selection, style_for(state))


def view_description(result: AttentionResult, state: ViewState, view: str, fig: go.Figure | None = None) -> str:
    """The text alternative of ``view``: what the weights do, or (other views) what the figure plots."""
    from .describe import describe_figure, describe_grid, describe_head, describe_query

    n = state.seq
    if view == "grid":
        return describe_grid(result, n)
    if view in ("head", "table"):
        return describe_head(result, n, state.head)
    if view == "query":
        return describe_query(result, n, state.query)
    return describe_figure(fig if fig is not None else view_figure(result, state, view))


def pooled_note(result: AttentionResult, max_cells: int = F.DEFAULT_MAX_CELLS) -> str | None:
    """What the grid overview says when it max-pools a long text (None when it doesn't)."""
    L, S = result.weights.shape[-2:]
    block = F.pool_block(L, S, max_cells)
    return F.pooling_note(L, S, block) if block > 1 else None


def file_stem(state: ViewState, view: str) -> str:
    """A meaningful, filesystem-safe download name: attnviz-grid-causal-4h-64d-seed0."""
    query = f"-query{state.query}" if state.query >= 0 else "-last"
    extra = {"head": f"-head{state.head}", "query": query}.get(view, "")
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
    """The whole run as JSON, with the charts' text alternatives; byte-identical for the
    same config (sorted keys, no times)."""
    from .describe import describe_grid, describe_head

    data = result.to_dict()
    N, H = result.weights.shape[:2]
    data["descriptions"] = [{"all_heads": describe_grid(result, n), "heads": [describe_head(result, n, h)
                                                                            for h in range(H)]} for n in range(N)]
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


# --- the teaching pages' main figures ---------------------------------------------------
# A link to any page renders that page's figure from the CLI (`render --from-url`), and
# the pages draw the same figures, built here.

PAGES = ("explorer", "step-by-step", "mask-lab", "cross-attention", "verify", "gradients", "why-scale",
         "image-patches", "audio-frames", "graph-nodes")


def page_of(url_or_path: str) -> str:
    """The page a link opens: the last path segment ("" and unknown paths: the explorer)."""
    from urllib.parse import urlsplit

    s = url_or_path.strip()
    path = urlsplit(s).path if "://" in s or s.startswith("/") else ""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name if name in PAGES else "explorer"


def mask_kinds(state: ViewState) -> list[str]:
    """The mask lab's comparison, in order, without repeats."""
    from .masks import MASK_KINDS

    return [k for k in dict.fromkeys(state.masks.split(",")) if k in MASK_KINDS]


def cross_grid_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle) -> go.Figure:
    return F.grid_figure(F.grid_data(result, state.seq), style, title=_("cross-attention weights per head"))


def mask_comparison_figure(results: dict[str, AttentionResult], state: ViewState,
                           style: F.FigureStyle) -> go.Figure:
    """Head ``state.head``'s weights under each mask, side by side on one 0–1 scale."""
    data = []
    for kind, r in results.items():
        d = F.head_data(r, state.seq, state.head)
        d.title = _("mask: {kind}").format(kind=kind)
        data.append(d)
    return F.grid_figure(data, style, title=_("weights of head {h} under each mask").format(h=state.head))


def gradient_figures(grads, tok: str, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    """(per key: ‖∂/∂V‖, ‖∂/∂K‖; per query-side token: ‖∂/∂Q‖, ‖∂/∂X‖)."""
    label = F.escape_label(tok)
    kv = F.token_bars(grads.keys, {"‖∂/∂V‖": grads.norms["V"], "‖∂/∂K‖": grads.norms["K"]},
                      _("gradient per key token, for the output of “{token}”").format(token=label), style,
                      y_title=_("gradient norm"))
    qx = F.token_bars(grads.tokens, {"‖∂/∂Q‖": grads.norms["Q"], "‖∂/∂X‖": grads.norms["X"]},
                      _("gradient per query-side token"), style, y_title=_("gradient norm"))
    return kv, qx


def verify_figure(v, style: F.FigureStyle) -> go.Figure:
    """Where attnviz and nn.MultiheadAttention differ: max |Δ weight| per head and per query."""
    return F.difference_figure(v.head_diffs, v.row_diffs, v.row_tokens, v.threshold,
                               _("max |difference| of the weights, {dtype} on {device}").format(
                                   dtype=v.dtype, device=v.device), style)


def scaling_figure(res, style: F.FigureStyle) -> go.Figure:
    return F.lines_figure(res.d_k, {_("q·k (raw)"): res.std_raw, "q·k / √d_k": res.std_scaled},
                          _("spread (std) of the scores"), style, x_title="d_k", y_title=_("std"))


def step_weights_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle) -> go.Figure:
    """The step-by-step page's weights step for the followed head, its token outlined."""
    from .walkthrough import walkthrough

    step = next(s for s in walkthrough(result, state.seq, state.head, state.query) if s.key == "Weights")
    return F.matrix_figure(step.matrix, step.rows, step.cols, _("{step} — head {h}").format(
        step=step.title, h=state.head), style,
                           zero_one=True, highlight_row=state.query)


def input_run(page: str, state: ViewState, data: bytes | None = None) -> tuple:
    """(input, result, image or None) of a modality page, from a file's bytes or the
    state's built-in sample."""
    from . import inputs as I

    if page == "image-patches":
        image = I.read_image(data)[0] if data is not None else I.sample_image(state.image_sample)
        return (*image_run(state, image), image)
    if page == "audio-frames":
        samples, rate = (I.read_wav(data)[:2] if data is not None else I.sample_audio(state.audio_sample))
        return (*audio_run(state, samples, rate), None)
    if page == "graph-nodes":
        return (*graph_run(state), None)
    raise ValueError(f"{page} is not a page of other inputs.")


def page_figure(page: str, state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The main figure of ``page`` for ``state``: what a link to that page shows first
    (``data``: an image or WAV file's bytes for the modality pages).

    Raises ``ValueError`` with a user-facing message for settings that cannot run.
    """
    from .pipeline import compute

    if page in INPUT_PAGES:
        inp, result, image = input_run(page, state, data)
        return input_view_figure(inp, result, state, style, image=image)
    if page == "explorer":
        view = "head" if state.view == "table" else state.view
        result = compute(state.config())
        state = _check_selection(result, state)
        return view_figure(result, state, view, style=style)
    if page == "cross-attention":
        result = compute(state.config(cross=True))
        state = _check_selection(result, state)
        return cross_grid_figure(result, state, style)
    if page == "mask-lab":
        kinds = mask_kinds(state)
        results = {k: compute(state.config().with_(mask=k)) for k in kinds}
        state = _check_selection(next(iter(results.values())), state)
        return mask_comparison_figure(results, state, style)
    if page == "step-by-step":
        result = compute(state.config())
        state = _check_selection(result, state)
        return step_weights_figure(result, state, style)
    if page == "verify":
        from .verify import verify

        return verify_figure(verify(state.config(), float64=state.float64), style)
    if page == "gradients":
        from .gradients import token_gradients

        state = _check_selection(compute(state.config()), state)
        grads = token_gradients(state.config(), state.seq, state.query, state.grad_of)
        return gradient_figures(grads, grads.tokens[state.query], style)[0]
    if page == "why-scale":
        from .scaling import sweep

        return scaling_figure(sweep(seed=state.seed, additive=state.additive), style)
    raise ValueError(f"Unknown page {page!r}; choose one of {', '.join(PAGES)}.")


def _check_selection(result: AttentionResult, state: ViewState) -> ViewState:
    """A build stops on a selection that does not exist (the app shows another instead);
    returns ``state`` with its query resolved."""
    problems = selection_problems(result, state)
    if problems:
        raise ValueError(next(iter(problems.values())) + ".")
    return resolve_query(result, state)


# --- other inputs: image patches, audio frames, graph nodes -----------------------------

INPUT_PAGES = ("image-patches", "audio-frames", "graph-nodes")


def image_run(state: ViewState, image) -> tuple:
    """(input, result) of the image-patches page for an (H, W, 3) image."""
    from .inputs import compute_vectors, image_input, patch_mask

    inp = image_input(image, state.patch, state.stride, state.d_model, state.seed)
    nH, nW = inp.meta["grid"]
    result = compute_vectors(inp, num_heads=state.heads, d_model=state.d_model, seed=state.seed,
                             device=state.device, mask=patch_mask(state.patch_mask, nH, nW, state.patch_k),
                             projections=state.input_projections,
                             description=f"image: {nH}×{nW} patches of {state.patch} px, stride {state.stride}")
    return inp, result


def audio_run(state: ViewState, samples, rate: int) -> tuple:
    from .inputs import audio_input, compute_vectors

    inp = audio_input(samples, rate, state.frame, state.hop, state.d_model, state.seed)
    result = compute_vectors(inp, num_heads=state.heads, d_model=state.d_model, seed=state.seed,
                             device=state.device, projections=state.input_projections,
                             description=f"audio: {len(inp.labels)} frames of {state.frame} samples, hop {state.hop}")
    return inp, result


def graph_run(state: ViewState) -> tuple:
    from .inputs import compute_vectors, graph_input, parse_edges, preset_edges

    n, edges, notes = parse_edges(state.edges if state.edges.strip() else preset_edges(state.graph))
    inp = graph_input(n, edges, state.d_model, state.seed, state.graph_mask)
    inp.notes += notes
    result = compute_vectors(inp, num_heads=state.heads, d_model=state.d_model, seed=state.seed,
                             device=state.device, projections=state.input_projections,
                             description=f"graph: {n} nodes, {len(edges)} edges")
    return inp, result


def followed(state: ViewState, inp) -> int:
    """The token a modality page follows: a patch, a frame or a node (clamped)."""
    n = len(inp.labels)
    if inp.kind == "image":
        nH, nW = inp.meta["grid"]
        at = (nH // 2) * nW + nW // 2 if state.patch_at < 0 else state.patch_at
    elif inp.kind == "audio":
        at = state.frame_at
    else:
        at = state.node
    return max(0, min(at, n - 1))


def input_figure(inp, result: AttentionResult, state: ViewState, style: F.FigureStyle, image=None) -> go.Figure:
    """What the followed token attends to, drawn on its own data: the image with a
    translucent map per head, the spectrogram with a line per head, or the graph."""
    at = followed(state, inp)
    w = result.weights[0, :, at].numpy()  # (H, L)
    if inp.kind == "image":
        nH, nW = inp.meta["grid"]
        panels = [(_("head {h}").format(h=h), w[h].reshape(nH, nW)) for h in range(w.shape[0])]
        panels.append((_("mean over heads"), w.mean(0).reshape(nH, nW)))
        return F.overlay_figure(image, panels, (nH, nW), inp.meta["patch"], inp.meta["stride"], at, style,
                                title=_("what patch {patch} attends to (outlined), per head").format(
                                    patch=inp.labels[at]))
    if inp.kind == "audio":
        return F.spectrogram_figure(inp.meta["spectrogram"].numpy(), inp.labels, w, at, inp.meta["rate"],
                                    inp.meta["frame"], style)
    return F.graph_figure(inp.meta["n"], inp.meta["edges"], w.mean(0), at, state.seed, style)


def input_view_figure(inp, result: AttentionResult, state: ViewState, style: F.FigureStyle, image=None) -> go.Figure:
    """A modality page's figure for ``state.view``: grid (every head), mean, or (any
    other view) what the followed token attends to on its own data."""
    if state.view == "grid":
        return F.grid_figure(F.grid_data(result, 0), style)
    if state.view == "mean":
        return F.heatmap_figure(F.mean_data(result, 0, max_cells=F.DEFAULT_MAX_CELLS), style)
    return input_figure(inp, result, state, style, image=image)
