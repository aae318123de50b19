"""The Circuit page's attribution graph (``attnviz.analysis.eap`` and ``faithful``): every edge of the
model scored at once by EAP or EAP-IG, the faithfulness of the top edges as a curve, and the exact
effect of the top ``EXACT_TOP`` edges beside their scores, with the rank agreement of the two; one
background job per model, prompts, method and steps (``ATTRIBUTIONS``), on the prompts' runs the
Patching page caches (``patching.trace_of``). The exact effect of an edge outside the top, when a click
opens it, is one patched run more (``edge_effect``). What ``render --page circuit`` writes under
"attribution", and ``attnviz.circuit_view(method=...)`` draws."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import jobs
from attnviz.analysis.eap import CURVE_COUNTS, EdgeAttribution, score_edges
from attnviz.analysis.edgegraph import Graph, Split, graph_of
from attnviz.analysis.faithful import EdgeEffects, Faithfulness, curve_and_effects, edge_effects, rank_agreement
from attnviz.analysis.patching import runs
from attnviz.i18n import _
from attnviz.jobs import Job
from attnviz.learn.trained import subject_of
from attnviz.plots.charts import lines_figure
from attnviz.plots.edgescores import clicked_edge_name as clicked_edge_name  # the page reads its clicks here
from attnviz.plots.edgescores import edge_graph_figure, graph_title
from attnviz.plots.style import FigureStyle
from attnviz.views.patching import model_identity, trace_of, wrong_of

EXACT_TOP = 20  # the top edges whose exact effect the job computes (one batched run of patched rows)


@dataclass
class AttributionRun:
    """Every edge's score, the faithfulness curve of the top edges, the top edges' exact effects."""

    attribution: EdgeAttribution
    curve: list[Faithfulness]
    effects: EdgeEffects  # of the EXACT_TOP edges of largest |score|
    graph: Graph

    @property
    def agreement(self) -> float:
        """Spearman's rank correlation of the top edges' scores and exact effects (NaN under two)."""
        return rank_agreement(self.attribution, self.effects)


def _runs(model, clean, corrupted, answer, wrong) -> tuple:
    subject = subject_of(model)
    ran = runs(subject, clean, corrupted, answer=answer, wrong=wrong_of(wrong),
               trace=lambda ids: trace_of(subject, model, ids))  # the prompts' runs, once per process
    return subject, ran


def attribution_run(model, clean, corrupted, answer, wrong=None, method: str = "eap-ig-inputs", steps: int = 5,
                    progress=None) -> AttributionRun:
    """The attribution graph's numbers (``progress(fraction)`` as it goes)."""
    subject, ran = _runs(model, clean, corrupted, answer, wrong)
    wrong = wrong_of(wrong)
    split = Split(subject.stack, graph_of(subject.stack), ran.corrupted)  # the scores' and the curve's, made once
    scored = score_edges(subject, clean, corrupted, answer=answer, wrong=wrong, method=method, steps=steps, ran=ran,
                         split=split)
    if progress is not None:
        progress(0.5)
    curve, effects = curve_and_effects(subject, clean, corrupted, answer=answer, wrong=wrong, attribution=scored,
                                       edges=[n for n, _s in scored.top(EXACT_TOP)], ran=ran, split=split)
    return AttributionRun(scored, curve, effects, graph_of(subject.stack))


ATTRIBUTIONS = jobs.kind("edge-attribution")  # by model, prompts, method and steps


def attribution_key(model, clean, corrupted, answer, wrong, method, steps) -> tuple:
    return ("edge-attribution", *model_identity(model), clean, corrupted, answer, wrong_of(wrong), method,
            None if method == "eap" else int(steps))


def attribution_job(model, clean, corrupted, answer, wrong, method, steps) -> Job:
    """The (one, shared) attribution job of these inputs, as ``circuit.circuit_job``."""
    key = attribution_key(model, clean, corrupted, answer, wrong, method, steps)
    return ATTRIBUTIONS.ask(key, lambda job: attribution_run(model, clean, corrupted, answer, wrong, method, steps,
                                                             lambda f: job.report(f)))


def picked(run: AttributionRun, link: str) -> str:
    """The edge a link names, else the top edge; ``ValueError`` for a name not in the model's graph."""
    if not link:
        return run.attribution.ranked()[0]
    if link not in run.attribution:
        g = run.graph
        raise ValueError(f"“{link}” is not an edge of {run.attribution.model}'s graph ({g.layers} layers × {g.heads} "
                         f"heads{'' if g.mlp else ', no MLP'}): edges are named sender->receiver, for example "
                         "a0.h1->a1.h0<k>, the receiver in a later layer than its sender (or the MLP of the sender's "
                         "layer, or the logits).")
    return link


def edge_effect(model, clean, corrupted, answer, wrong, run: AttributionRun, name: str) -> float:
    """One edge's exact effect: from the job's top edges, else one patched run on the prompts' cached runs."""
    if name in run.effects:
        return run.effects[name]
    subject, ran = _runs(model, clean, corrupted, answer, wrong)
    return edge_effects(subject, clean, corrupted, answer=answer, wrong=wrong_of(wrong), edges=[name], ran=ran)[name]


def draw_graph(run: AttributionRun, top: int, style: FigureStyle, link: str = "") -> go.Figure:
    a, g = run.attribution, run.graph
    return edge_graph_figure(a.top(top), g.layers, g.heads, g.mlp, graph_title(a.model, a.method, a.steps, top, len(a)),
                             style, link or None)


def draw_curve(run: AttributionRun, style: FigureStyle) -> go.Figure:
    """The share of the answer the top n edges keep, against n (log scale)."""
    fractions = []
    for f in run.curve:
        try:
            fractions.append(f.fraction)
        except ValueError:  # the two runs agree: nothing to keep
            fractions.append(None)
    return lines_figure([f.edges for f in run.curve], {_("faithfulness"): fractions},
                        _("Faithfulness:<br>how much of the answer<br>the top edges keep"), style,
                        x_title=_("edges kept"), y_title=_("share of the answer"))


def top_rows(run: AttributionRun) -> list[dict]:
    """The top edges with their score and exact effect, for the page's table."""
    return [{_("edge"): name, _("score"): score, _("exact effect"): run.effects[name]}
            for name, score in run.attribution.top(EXACT_TOP)]


def attribution_record(run: AttributionRun, top: int) -> dict:
    """Every number the attribution graph and its curve draw: every edge's score, the curve, the top edges'
    exact effects and their rank agreement (null where undefined)."""
    agreement = run.agreement
    curve = []
    for f in run.curve:
        try:
            fraction = f.fraction
        except ValueError:
            fraction = None
        curve.append({"edges": f.edges, "metric": f.metric, "fraction": fraction})
    return {**run.attribution.to_dict(), "drawn": [n for n, _s in run.attribution.top(top)],
            "curve": curve, "curve_counts": list(CURVE_COUNTS), "exact": run.effects.to_dict(),
            "rank_agreement": None if agreement != agreement else agreement}
