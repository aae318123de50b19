"""The teaching pages' main figures, and ``page_figure``: what a link to any page shows
first. The pages draw these same figures, and ``python -m attnviz render`` renders a
link to any page with it.
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.gradients import SCALAR_LABELS, token_gradients
from attnviz.analysis.scaling import sweep
from attnviz.analysis.verify import verify
from attnviz.analysis.walkthrough import blocked_row_demo, walkthrough, weighted_sum_terms
from attnviz.core.masks import MASK_KINDS
from attnviz.i18n import _
from attnviz.inputs.corpus import read_corpus
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute
from attnviz.views.attention_file import file_run, sample_file
from attnviz.views.catalogue import INPUT_PAGES, VIEWS, views_on
from attnviz.views.circuit import circuit_page_figure
from attnviz.views.circuit import page_json as circuit_page_json
from attnviz.views.generation import generation, step_figure
from attnviz.views.longseq import part_figure
from attnviz.views.modality import followed_state, input_run, input_view_figure
from attnviz.views.patching import patching_json, run_of, with_example
from attnviz.views.qkmap import qk_page_figure, qk_record_json
from attnviz.views.selection import check_selection
from attnviz.views.state import ViewState


def mask_kinds(state: ViewState) -> list[str]:
    """The mask lab's comparison, in order, without repeats."""
    return [k for k in dict.fromkeys(state.masks.split(",")) if k in MASK_KINDS]


def cross_grid_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle) -> go.Figure:
    return F.grid_figure(F.grid_data(result, state.seq), style, title=_("cross-attention weights per head"))


def cross_head_figure(result: AttentionResult, seq: int, head: int, style: F.FigureStyle) -> go.Figure:
    """One head's cross-attention weights: target tokens × source tokens."""
    return F.heatmap_figure(F.head_data(result, seq, head), style)


def cross_query_figure(result: AttentionResult, seq: int, query: int, style: F.FigureStyle) -> go.Figure:
    """One target token's weights over the source, every head."""
    return F.query_figure(result, seq, query, style)


def mask_comparison_figure(results: dict[str, AttentionResult], state: ViewState,
                           style: F.FigureStyle) -> go.Figure:
    """Head ``state.head``'s weights under each mask, side by side on one 0–1 scale."""
    data = []
    for kind, r in results.items():
        d = F.head_data(r, state.seq, state.head)
        d.title = _("mask: {kind}").format(kind=kind)
        data.append(d)
    return F.grid_figure(data, style, title=_("weights of head {h} under each mask").format(h=state.head))


GRADIENT_OF = SCALAR_LABELS  # the scalar of a query's output that the Gradients page differentiates, in words


def gradients_of(config, seq: int, query: int, of: str):
    """The gradients of one query's output (``attnviz.analysis.gradients.token_gradients``)."""
    return token_gradients(config, seq, query, of)


def gradient_figures(grads, tok: str, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    """(per key: ‖∂/∂V‖, ‖∂/∂K‖; per query-side token: ‖∂/∂Q‖, ‖∂/∂X‖)."""
    label = F.escape_label(tok)
    kv = F.token_bars(grads.keys, {"‖∂/∂V‖": grads.norms["V"], "‖∂/∂K‖": grads.norms["K"]},
                      _("gradient per key token, for the output of “{token}”").format(token=label), style,
                      y_title=_("gradient norm"))
    qx = F.token_bars(grads.tokens, {"‖∂/∂Q‖": grads.norms["Q"], "‖∂/∂X‖": grads.norms["X"]},
                      _("gradient per query-side token"), style, y_title=_("gradient norm"))
    return kv, qx


def verify_run(config, float64: bool = False):
    """The Verify page's comparison of ``config``'s run with PyTorch's (``attnviz.analysis.verify``)."""
    return verify(config, float64=float64)


def verify_figure(v, style: F.FigureStyle) -> go.Figure:
    """Where attnviz and nn.MultiheadAttention differ: max |Δ weight| ÷ tolerance per head and per query."""
    return F.difference_figure(v.head_diffs, v.row_diffs, v.row_tokens, v.threshold,
                               _("|difference| of the weights ÷ tolerance, {dtype} on {device}").format(
                                   dtype=v.dtype, device=v.device), style, value_name=_("|difference| ÷ tolerance"))


def scaling_figure(res, style: F.FigureStyle) -> go.Figure:
    return F.lines_figure(res.d_k, {_("q·k (raw)"): res.std_raw, "q·k / √d_k": res.std_scaled},
                          _("spread (std) of the scores"), style, x_title="d_k", y_title=_("std"))


def scaling_sweep(seed: int, additive: bool):
    """Why √d_k's numbers (``attnviz.analysis.scaling.sweep``): 16 tokens, 8 random trials per d_k."""
    return sweep(seed=seed, additive=additive)


def saturation_figures(res, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    """(entropy of each weight row, largest weight in each row) against d_k, raw and scaled (and additive)."""
    # The same line in the same place of both charts' legends, so each keeps its colour across them.
    ent = {"softmax(q·k)": res.entropy_raw, "softmax(q·k / √d_k)": res.entropy_scaled}
    mx = {"softmax(q·k)": res.max_raw, "softmax(q·k / √d_k)": res.max_scaled}
    if res.entropy_additive:  # swept with the additive score too
        ent[_("additive")] = res.entropy_additive
        mx[_("additive")] = res.max_additive
    ent[_("uniform (log S)")] = [res.uniform_entropy] * len(res.d_k)
    return (F.lines_figure(res.d_k, ent, _("entropy of each weight row (nats)"), style, x_title="d_k",
                           y_title=_("entropy")),
            F.lines_figure(res.d_k, mx, _("largest weight in each row"), style, x_title="d_k",
                           y_title=_("max weight")))


def walk_steps(result: AttentionResult, seq: int, head: int, query: int):
    """The Step by step page's steps (``attnviz.analysis.walkthrough``): each with its formula, its matrix
    and the followed token's row."""
    return walkthrough(result, seq, head, query)


def walk_step_figure(step, head: int, query: int, style: F.FigureStyle) -> go.Figure:
    """One step's matrix, for ``head`` where it is per head, the followed token's row outlined."""
    title = _("{step} — head {h}").format(step=step.title, h=head) if step.per_head else step.title
    return F.matrix_figure(step.matrix, step.rows, step.cols, title, style,
                           zero_one=step.key in ("Weights", "After dropout"),
                           highlight_row=query if step.query_side else None)


def output_terms(result: AttentionResult, seq: int, head: int, query: int) -> list[tuple[str, float]]:
    """The followed token's head output as a weighted sum: (key, weight), largest first."""
    return weighted_sum_terms(result, seq, head, query)


MASK_CHOICES = MASK_KINDS  # the Mask lab's masks, in order


def blocked_rows() -> dict:
    """Why −∞ and not −1e9: a partly and a fully blocked row, softmaxed both ways and by attnviz."""
    return blocked_row_demo()


def step_weights_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle) -> go.Figure:
    """The step-by-step page's weights step for the followed head, its token outlined."""
    step = next(s for s in walkthrough(result, state.seq, state.head, state.query) if s.key == "Weights")
    return F.matrix_figure(step.matrix, step.rows, step.cols, _("{step} — head {h}").format(
        step=step.title, h=state.head), style,
                           zero_one=True, highlight_row=state.query)


def page_result(page: str, state: ViewState, data: bytes | None = None) -> tuple[AttentionResult, ViewState]:
    """The run a page's downloads hold (CSV, JSON), its own input through the one seam, and
    ``state`` as that page reads it: an image, audio or graph page's query is the token it
    follows (``followed_state``), so the neuron view's JSON is the page's."""
    if page in INPUT_PAGES:
        inp, result, _image = input_run(page, state, data)
        return result, followed_state(state, inp)
    if page == "attention-file":
        data, name = (data, None) if data is not None else sample_file()
        return file_run(data, name, state.layer), state
    return compute(state.cross_config() if page == "cross-attention" else state.config), state


# --- each page's main figure and numbers, one entry a page ---------------------------------------------------
# (state, style, data) -> the figure a link to the page shows first (``data``: an image or WAV file's bytes).


def _input_page(page: str):
    def figure(state: ViewState, style: F.FigureStyle, data: bytes | None) -> go.Figure:
        inp, result, image = input_run(page, state, data)
        return input_view_figure(inp, result, state, style, image=image)
    return figure


def _check_view(page: str, state: ViewState) -> None:
    if state.view not in views_on(page):
        where = next(p for p in VIEWS[state.view].pages)
        raise ValueError(f"The view {state.view} is drawn on the {where} page: give --page {where}.")


def explorer_figure(state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    _check_view("explorer", state)
    result = compute(state.config)
    state = check_selection(result, state)
    if state.generate:  # a causal LM's generated tokens: the chosen one's attention
        gen = generation(result, state.seq, state.generate)
        if gen is None:
            raise ValueError(f"{result.model_name} is not a causal language model: it generates no tokens "
                             f"(generate works with GPT-2- and LLaMA-style models).")
        if state.step >= gen.count:
            raise ValueError(f"Generated token {state.step} does not exist: {result.model_name} wrote "
                             f"{gen.count} (0–{gen.count - 1}).")
        return step_figure(gen, result.layer, state.step, style)
    return VIEWS[state.view].figure(result, state, style)


def attention_file_figure(state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    _check_view("attention-file", state)
    data, name = (data, None) if data is not None else sample_file()
    result = file_run(data, name, state.layer)
    state = check_selection(result, state.with_(seq=0))
    return VIEWS[state.view].figure(result, state, style)


def _cross(state: ViewState, style: F.FigureStyle, data: bytes | None) -> go.Figure:
    result = compute(state.cross_config())
    return cross_grid_figure(result, check_selection(result, state), style)


def _mask_lab(state: ViewState, style: F.FigureStyle, data: bytes | None) -> go.Figure:
    results = {k: compute(state.config.with_(mask=k)) for k in mask_kinds(state)}
    return mask_comparison_figure(results, check_selection(next(iter(results.values())), state), style)


def _step_by_step(state: ViewState, style: F.FigureStyle, data: bytes | None) -> go.Figure:
    result = compute(state.config)
    return step_weights_figure(result, check_selection(result, state), style)


def _gradients(state: ViewState, style: F.FigureStyle, data: bytes | None) -> go.Figure:
    state = check_selection(compute(state.config), state)
    grads = gradients_of(state.config, state.seq, state.query, state.grad_of)
    return gradient_figures(grads, grads.tokens[state.query], style)[0]


PAGE_FIGURES = {
    "explorer": explorer_figure,
    "step-by-step": _step_by_step,
    "mask-lab": _mask_lab,
    "cross-attention": _cross,
    "verify": lambda state, style, data: verify_figure(verify_run(state.config, float64=state.float64), style),
    "gradients": _gradients,
    "why-scale": lambda state, style, data: scaling_figure(scaling_sweep(state.seed, state.additive), style),
    **{page: _input_page(page) for page in INPUT_PAGES},
    "long-sequences": lambda state, style, data: part_figure(state.part, state, style),
    "attention-file": attention_file_figure,
    "qk-map": lambda state, style, data: qk_page_figure(state, style, None if data is None else read_corpus(data)),
    "patching": lambda state, style, data: VIEWS["patching"].figure(run_of(with_example(state, "patching")), state,
                                                                    style),
    "circuit": lambda state, style, data: circuit_page_figure(state, style),
}
# Pages whose numbers are their own, not a run's (the others write the run's JSON or CSV): (state, format) -> bytes.
PAGE_RECORDS = {
    "qk-map": lambda state, fmt: qk_record_json(state, fmt),
    "patching": lambda state, fmt: patching_json(with_example(state, "patching")),
    "circuit": lambda state, fmt: circuit_page_json(state),
}
# Pages with a command of their own: a text file and settings of its own (``attnviz.cli.longctx``), a training.
OWN_COMMAND = {"long-context": "python -m attnviz render --page long-context --text-file F",
               "watch-it-learn": "python -m attnviz learn"}


def page_figure(page: str, state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The main figure of ``page`` for ``state``: what a link to that page shows first (``data``: an image,
    WAV, attention or corpus file's bytes for the pages that read one).

    Raises ``ValueError`` with a user-facing message for settings that cannot run.
    """
    if page in OWN_COMMAND:
        raise ValueError(f"The {page} page has a command of its own: {OWN_COMMAND[page]}.")
    if page not in PAGE_FIGURES:
        raise ValueError(f"Unknown page {page!r}; choose one of {', '.join(PAGE_FIGURES)}.")
    return PAGE_FIGURES[page](state, style, data)


def page_record(page: str, state: ViewState, fmt: str) -> bytes | None:
    """The numbers of a page whose numbers are its own (``PAGE_RECORDS``), in ``fmt``; None for a page that
    writes its run's. ``ValueError`` for a format the page does not write."""
    if page not in PAGE_RECORDS:
        return None
    if fmt != "json":
        raise ValueError(f"The {page} page writes .json, .png, .svg or .html.")
    return PAGE_RECORDS[page](state, fmt)


def mask_lab_figure(result: AttentionResult, part: str, n: int, h: int, style: F.FigureStyle) -> go.Figure:
    """One of the mask lab's four pictures of a mask at work on head ``h``: the mask, the
    scores before masking, after masking (−∞ blank), and the weights after softmax."""
    if part == "mask":
        return F.mask_figure(result, n, style, key_axis_top=False)
    a = result.steps.attention
    toks, keys = result.tokens[n], result.source_tokens[n]
    if part == "before":
        return F.matrix_figure(a.scaled[n, h].numpy(), toks, keys,
                               _("scores before masking — head {h}").format(h=h), style)
    if part == "after":
        return F.matrix_figure(a.masked[n, h].numpy(), toks, keys, _("after masking (blank = −∞)"), style)
    return F.matrix_figure(a.weights[n, h].numpy(), toks, keys, _("weights after softmax"), style, zero_one=True)
