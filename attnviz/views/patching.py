"""The Patching page's data and pictures: for two prompts and an answer, every head patched and
every layer × position of the residual stream (``attnviz.analysis.patching``), the logit
attribution of the clean prompt, and one chosen head's attention on both prompts, as one
``PatchRun``; the sweep runs as a background job shared by everyone who asks for the same
(``SWEEPS``). Its entry in ``attnviz.views.catalogue`` says what the page draws of it; the CLI
writes the same (``python -m attnviz render --page patching``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
import torch

from attnviz import jobs
from attnviz import plots as F
from attnviz.analysis.examples import DEFAULT_PAIR, example_prompts
from attnviz.analysis.patching import DEFINITION, Attribution, Patching, logit_attribution_of, patch, runs
from attnviz.analysis.subjects import answer_ids, two_prompts
from attnviz.core.nexttoken import top_tokens
from attnviz.i18n import N_, _
from attnviz.jobs import Job
from attnviz.learn.trained import subject_of
from attnviz.models.door import open as open_model
from attnviz.models.stacks import Trace
from attnviz.plots.patching import attribution_figure, head_patching_figure, residual_patching_figure
from attnviz.plots.style import PROJECTOR_FIRST_CHART_PX, presenting
from attnviz.run.run import RESULTS
from attnviz.settings.spec import OWN, layer_head, setting
from attnviz.views.markdown import md


@dataclass(frozen=True)
class Settings:
    """The Patching page's own settings: the head it opens. Its prompts and answer are shared state
    (``attnviz.views.pair``: ``state.pair``), the Circuit page's too."""

    patched: str = setting("best", convert=layer_head("best"), pages=OWN, label=N_("Chosen head"),
                           help=N_("best (the head that brings back the most of the answer), or layer.head, for "
                                   "example 1.0. A click on a head of the heatmap picks it."))


@dataclass
class PatchRun:
    """Everything the Patching page shows for one model, two prompts and an answer."""

    patching: Patching  # its heads and its residual stream patched
    attribution: Attribution | None  # the clean prompt's direct logit attribution (None without a wrong token)
    clean_weights: np.ndarray  # (layers, H, L, L) the clean run's attention
    corrupted_weights: np.ndarray  # (layers, H, L, L)

    @property
    def layers(self) -> int:
        return int(self.clean_weights.shape[0])

    @property
    def heads(self) -> int:
        return int(self.clean_weights.shape[1])

    pretrained = True  # a click on a head opens that layer's head


def kept_runs(subject, identity: tuple) -> tuple[Callable, Callable]:
    """(trace, keep) for ``patching.runs`` and ``patching.patch``: a prompt's run, kept whole with
    every layer's attention, and a sweep, each once per process in the results cache by ``identity``
    (plain values naming the model's weights). The answers offered, the sweeps, the attribution, the
    circuit and the heads drawn all read them, so that each prompt runs through the model once and the
    Patching and Circuit pages sweep a pair's heads once."""
    def trace(ids: list[int]) -> Trace:
        return RESULTS.get_or_compute(("patch-trace", *identity, tuple(ids)),
                                      lambda: subject.stack.run(torch.tensor([ids]), weights=True))

    def keep(key: tuple, sweep: Callable[[], np.ndarray]) -> np.ndarray:
        return RESULTS.get_or_compute(("patch-sweep", *identity, *key), sweep)

    return trace, keep


def trace_of(subject, model, ids: list[int]) -> Trace:
    """One prompt's run of the model named ``model``, once per process (``kept_runs``)."""
    return kept_runs(subject, model_identity(model))[0](ids)


def kept_sweep(model: str) -> Callable:
    """Where the sweeps of the model named ``model`` are kept (``kept_runs``)."""
    return kept_runs(None, model_identity(model))[1]


def wrong_of(wrong) -> str | None:
    """The wrong token as the library takes it: None where the box is empty (the metric is then the
    answer's logit alone). The one place an empty wrong token is read."""
    return None if wrong is None or str(wrong).strip() == "" else str(wrong).strip()


def run_of(state, progress=None, step=None) -> PatchRun:
    """The sweep of ``state``'s model, prompts and answer (``progress(fraction)`` as it goes;
    ``step(work)`` runs each batch of patched runs: the app's compute workers)."""
    subject = subject_of(state.model)
    pair = state.pair
    wrong = wrong_of(pair.wrong)
    ran = runs(subject, pair.clean, pair.corrupted, answer=pair.answer, wrong=wrong,
               trace=lambda ids: trace_of(subject, state.model, ids))
    p = patch(subject, pair.clean, pair.corrupted, answer=pair.answer, wrong=wrong, heads=True, residual=True,
              progress=progress, step=step, ran=ran, keep=kept_sweep(state.model))
    attribution = (logit_attribution_of(subject, pair.clean, answer=pair.answer, wrong=wrong, trace=ran.clean)
                   if wrong else None)
    weights = [torch.stack([w[0] for w in t.weights]).numpy() for t in (ran.clean, ran.corrupted)]  # (layers, H, L, L)
    return PatchRun(p, attribution, *weights)


SWEEPS = jobs.kind("patching")  # the page's sweeps, by model and prompts


def model_identity(model: str) -> tuple:
    """Plain values naming the model's weights: a folder's path and its config's time (another
    folder under one name is another model), or the trained model's name."""
    return open_model(model).key


def sweep_key(state) -> tuple:
    """The plain values a sweep depends on: the model's identity, the prompts, the tokens."""
    pair = state.pair
    return ("patching", *model_identity(state.model), pair.clean, pair.corrupted, pair.answer, wrong_of(pair.wrong))


def sweep_job(state, compute_with=None) -> Job:
    """The (one, shared) sweep of ``state``: running, finished (or failed: its message is kept
    until the inputs change), or started now in the background (``compute_with(fn)``: where each
    batch of patched runs goes, the app's compute workers, held one batch at a time so that the
    explorer's runs take turns with a long sweep rather than wait for all of it)."""
    def work(job: Job) -> PatchRun:
        return run_of(state, lambda f: job.report(f), step=compute_with)

    key = sweep_key(state)
    return SWEEPS.ask(key, work)


PROMPTS = ("clean", "corrupted", "answer", "wrong")  # the settings a pair sets, shared by Patching and Circuit
EXAMPLE = "swap"  # the kind of example pair the page opens with (attnviz.analysis.examples)


def example_for(state, kind: str = EXAMPLE) -> dict[str, str] | None:
    """The model's own example pair of ``kind`` (``attnviz.analysis.examples``: a page module's ``EXAMPLE``, the
    pair its page opens with) where ``state`` still holds the default pair, which means something only for the
    tiny model's swap: an indirect-object pair for a GPT-2-like tokenizer, the broken repeat for the tiny model
    on Circuit. None where the prompts are the user's own, the defaults fit, or the model has no known pair.
    The model must be loaded (the page asks once it is)."""
    if any(state.value(k) != DEFAULT_PAIR[k] for k in PROMPTS):
        return None

    def find() -> dict | None:
        subject = subject_of(state.model)
        return example_prompts(subject, kind, trace=lambda ids: trace_of(subject, state.model, ids))

    pair = RESULTS.get_or_compute(("example-pair", kind, *model_identity(state.model)), find)  # once per model
    return None if pair is None or pair == DEFAULT_PAIR else dict(pair)


def pair_problem(state) -> str | None:
    """Why ``state``'s prompts and answer cannot be patched on its model, in the sentence the sweep would stop
    with (None: they can): read as the sweep reads them, before it starts, so that a page shows its model's
    example in their place and keeps the fields as typed."""
    subject = subject_of(state.model)
    pair = state.pair
    try:
        two_prompts(subject, pair.clean, pair.corrupted)
        answer_ids(subject, pair.answer, wrong_of(pair.wrong))
    except ValueError as e:
        return str(e)
    return None


def example_state(state, kind: str = EXAMPLE):
    """``state`` with its model's own example pair of ``kind`` (the defaults where it knows none): what a page
    shows while the pair typed cannot be read (``pair_problem``)."""
    subject = subject_of(state.model)
    found = example_prompts(subject, kind, trace=lambda ids: trace_of(subject, state.model, ids))
    return state.with_(**(found or DEFAULT_PAIR))


def with_example(state, kind: str = EXAMPLE):
    """``state`` with the model's own example pair where it holds the defaults (``example_for``): what the
    page shows, so that the CLI writes the same."""
    example = example_for(state, kind)
    return state.with_(**example) if example else state


def top_next(model: str, prompt: str, k: int = 10) -> list[tuple[str, float]]:
    """The ``k`` most likely next tokens after ``prompt``, as the model's tokenizer spells them:
    the answers the page offers to pick from."""
    subject = subject_of(model)
    ids = subject.ids(prompt)
    return top_tokens(trace_of(subject, model, ids).logits[0], subject.spelled, k)


# --- what the page draws: the entry's parts -------------------------------------------------


def normalised_heads(run: PatchRun) -> np.ndarray:
    return run.patching.normalised(run.patching.heads)


def problem(run: PatchRun, state=None) -> str | None:
    """Why the pictures would say nothing: the two prompts give the same metric."""
    try:
        run.patching.normalised(run.patching.heads)
    except ValueError as e:
        return str(e)
    return None


def definition(run: PatchRun, state=None) -> str:
    p = run.patching
    return _("Each head's output (its z before W_O, at every position) is taken from the clean run into the "
             "corrupted one: (patched − corrupted) / (clean − corrupted) of {metric}, 1 where that head alone brings "
             "the clean answer back (TransformerLens's activation patching). Clean: {clean}; corrupted: "
             "{corrupted}. Click a head to open it below.").format(metric=md(p.metric_name), clean=f"{p.clean:.3f}",
                                                                   corrupted=f"{p.corrupted:.3f}")


def tokens_caption(run: PatchRun, state=None) -> str | None:
    """Both prompts' tokens, the ones that differ in bold (none in presenter mode: the prompts fold above)."""
    if state is not None and getattr(state, "present", False):
        return None
    p = run.patching
    differ = set(p.differ)

    def line(tokens):
        return " ".join(f"**{md(t)}**" if i in differ else md(t) for i, t in enumerate(tokens))

    return _("Clean: {clean} · corrupted: {corrupted} · answer “{answer}”{wrong}").format(
        clean=line(p.clean_tokens), corrupted=line(p.corrupted_tokens), answer=md(p.answer),
        wrong=_(" against “{wrong}”").format(wrong=md(p.wrong)) if p.wrong else "")


def draw_heads(run: PatchRun, state, style: F.FigureStyle) -> go.Figure:
    title = _("each head patched from the clean run: the share of the answer it brings back")
    if style.height is None and presenting(style.font_size):  # the page's first chart, whole on a projector
        style = replace(style, height=PROJECTOR_FIRST_CHART_PX + 100)
    return head_patching_figure(normalised_heads(run), title, style)


def draw_positions(run: PatchRun, state, style: F.FigureStyle) -> go.Figure:
    p = run.patching
    return residual_patching_figure(p.normalised(p.residual), p.corrupted_tokens, p.differ,
                            _("the residual stream into each layer patched at one position"), style)


def attribution_caption(run: PatchRun, state=None) -> str:
    a = run.attribution
    if a is None:
        return _("Logit attribution needs a wrong token: it projects onto W_U[answer] − W_U[wrong].")
    return _("Direct logit attribution on the clean prompt: each head's output at the last position, divided by the "
             "final norm's scale, projected onto W_U[“{answer}”] − W_U[“{wrong}”] (TransformerLens's apply_ln=True). "
             "With the embeddings, the MLPs and the biases they sum to the logit difference: {total} = {diff}.").format(
        answer=md(a.answer), wrong=md(a.wrong), total=f"{a.total:.3f}", diff=f"{a.logit_difference:.3f}")


def draw_attribution(run: PatchRun, state, style: F.FigureStyle) -> go.Figure | None:
    a = run.attribution
    rest = {_("embeddings"): a.embeddings, _("MLPs"): float(a.mlps.sum()),
            _("attention biases"): float(a.attention_biases.sum()), _("final biases"): a.biases}
    return attribution_figure(a.heads, rest, _("each head's direct logit attribution, in logits"), style)


def has_attribution(run: PatchRun) -> bool:
    return run.attribution is not None


def chosen(run: PatchRun, state) -> tuple[int, int]:
    """The head the page opens: the link's (``patched=layer.head``, bounded by the run), or the one
    that brings back the most of the answer (``best``)."""
    if state.patching.patched == "best":
        values = normalised_heads(run)
        layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
        return int(layer), int(head)
    layer, _dot, head = state.patching.patched.partition(".")
    return min(int(layer), run.layers - 1), min(int(head), run.heads - 1)


def pick_head(layer: int, head: int, layered: bool) -> dict:
    """The setting a click on a head of the heatmap sets (the entry's ``opens``)."""
    return {"patched": f"{layer}.{head}"}


def chosen_title(run: PatchRun, state) -> str:
    layer, head = chosen(run, state)
    v = normalised_heads(run)[layer, head]
    return _("Head L{layer} H{head}: it brings back {share} of the answer").format(layer=layer, head=head,
                                                                                share=f"{v:.2f}")


def _chosen_on(run: PatchRun, state, style: F.FigureStyle, clean: bool) -> go.Figure:
    """The chosen head's (L, L) attention on one prompt, labelled with that prompt's own tokens (the pair differ
    where the corruption is: one grid of both would label both with one)."""
    layer, head = chosen(run, state)
    p = run.patching
    weights, tokens = ((run.clean_weights, p.clean_tokens) if clean else (run.corrupted_weights, p.corrupted_tokens))
    title = (_("L{layer} H{head} on the clean prompt") if clean else
             _("L{layer} H{head} on the corrupted prompt")).format(layer=layer, head=head)
    return F.matrix_figure(weights[layer, head], tokens, tokens, title, style, zero_one=True, value_name=_("weight"),
                           bar_title=_("weight"))


def draw_clean(run: PatchRun, state, style: F.FigureStyle) -> go.Figure:
    return _chosen_on(run, state, style, clean=True)


def draw_corrupted(run: PatchRun, state, style: F.FigureStyle) -> go.Figure:
    return _chosen_on(run, state, style, clean=False)


def draw_difference(run: PatchRun, state, style: F.FigureStyle) -> go.Figure:
    layer, head = chosen(run, state)
    p = run.patching
    diff = run.clean_weights[layer, head] - run.corrupted_weights[layer, head]  # (L, L)
    return F.matrix_figure(diff, p.clean_tokens, p.clean_tokens, _("clean − corrupted"), style,
                           value_name=_("difference"), bar_title=_("difference"))


def record(run: PatchRun, state) -> dict:
    """Every number the page draws."""
    layer, head = chosen(run, state)
    return {"patching": run.patching.to_dict(),
            "logit_attribution": None if run.attribution is None else run.attribution.to_dict(),
            "head": {"layer": layer, "head": head, "clean": run.clean_weights[layer, head].tolist(),
                     "corrupted": run.corrupted_weights[layer, head].tolist(),
                     "difference": (run.clean_weights[layer, head] - run.corrupted_weights[layer, head]).tolist()}}


def describe(run: PatchRun, state, fig=None) -> str:
    values = normalised_heads(run)
    layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
    return _("Patching {layers} layers × {heads} heads: head L{layer} H{head} brings back the most of the answer, "
             "{share} of it.").format(layers=run.layers, heads=run.heads, layer=int(layer), head=int(head),
                                      share=f"{values[layer, head]:.2f}")


def patching_json(state) -> bytes:
    """What ``render --page patching --out x.json`` writes: the settings and every number the page draws."""
    run = run_of(state)
    data = {"config": {"model": state.model, "clean": state.pair.clean, "corrupted": state.pair.corrupted,
                       "answer": state.pair.answer, "wrong": wrong_of(state.pair.wrong)},
            "definition": DEFINITION, **record(run, state)}
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The page's figure for the CLI: the heads patched (its view's figure in the table of views)."""
    return draw_heads(run_of(with_example(state)), state, style)


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    return patching_json(with_example(state))
