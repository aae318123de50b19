"""The Circuit page's settings, data, record and figures (``attnviz.analysis.circuit``): for a model,
two prompts and an answer, every head patched, every path into every later head through q, k and v,
the circuit found by the numbers, and the composition scores from the weights; a background job
shared by everyone who asks for the same (``CIRCUITS``), on the prompts' runs the Patching page
caches (``patching.trace_of``). One edge opened: the receiver's attention on the corrupted prompt
with and without that path patched (``edge_figures``); one cell of it opened: its score attribution
(``cell_attribution``). What ``attnviz.circuit_view`` draws, and ``render --page circuit`` writes
(every number in JSON)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go

from attnviz import jobs, limits
from attnviz.analysis.circuit import FoundCircuit, find_circuit, sweep_tokens
from attnviz.analysis.composition import MODES, composition_scores_of
from attnviz.analysis.eap import DEFAULT_STEPS, METHODS
from attnviz.analysis.eap import DEFINITION as EAP
from attnviz.analysis.faithful import EFFECT, FAITHFULNESS
from attnviz.analysis.patching import runs
from attnviz.analysis.pathpatch import DEFINITION as PATHS
from attnviz.analysis.pathpatch import edge_attention
from attnviz.analysis.scoreattr import DEFINITION as SCORES
from attnviz.analysis.scoreattr import ScoreAttribution, attribute_score
from attnviz.i18n import N_, _
from attnviz.jobs import Job
from attnviz.learn.trained import subject_of
from attnviz.plots import matrix_figure
from attnviz.plots.circuit import check_threshold, circuit_figure, edges, found_title, with_cell_clicks
from attnviz.plots.circuit import clicked_cell as clicked_cell  # the page reads its clicks through this module
from attnviz.plots.circuit import clicked_edge as clicked_edge
from attnviz.plots.style import FigureStyle
from attnviz.settings.spec import OWN, Reason, setting, validate
from attnviz.views import attribution as A
from attnviz.views.patching import kept_sweep, model_identity, trace_of, with_example, wrong_of

PAGE = "circuit"
EXAMPLE = "break"  # the kind of example pair the page opens with (attnviz.analysis.examples)
COMPOSITION_CHOICES = ("none", *MODES)
EDGE = re.compile(r"^([qkv]):(\d+)\.(\d+)-(\d+)\.(\d+)$")  # "k:0.1-1.0": into L1 H0's keys from L0 H1
CELL = re.compile(r"^(\d+)\.(\d+)$")  # "17.10": query 17, key 10
# An edge of the attribution graph, as EAP-IG names it: "a0.h1->a1.h0<k>", "input->m0", "m1->logits"
LINK = re.compile(r"^(input|a\d+\.h\d+|m\d+)->(a\d+\.h\d+<[qkv]>|m\d+|logits)$")


def _edge(raw: str, taken: dict) -> str:
    raw = raw.strip().lower()
    if raw and not EDGE.match(raw):
        raise Reason(_("must be empty (the circuit's own edge) or component:layer.head-layer.head, like k:0.1-1.0"))
    return raw


def _link(raw: str, taken: dict) -> str:
    raw = raw.strip()
    if raw and not LINK.match(raw):
        raise Reason(_("must be empty (the top edge) or sender->receiver as the graph names it, like a0.h1->a1.h0<k>"))
    return raw


def _cell(raw: str, taken: dict) -> str:
    raw = raw.strip()
    if raw and not CELL.match(raw):
        raise Reason(_("must be empty (the cell the receiver attends to most) or query.key, like 17.10"))
    return raw


@dataclass(frozen=True)
class CircuitSettings:
    """The Circuit page's own settings, declared once: its widgets, its link, the CLI's flags. The prompts
    and the answer are Patching's (shared: one link opens both pages on the same pair)."""

    threshold: float = setting(0.1, url="circuit_threshold", pages=OWN, lo=0.0, hi=1.0, label=N_("Threshold"),
                               help=N_("Draw the paths that bring back at least this share of the answer."))
    composition: str = setting("k", url="circuit_composition", pages=OWN, choices=COMPOSITION_CHOICES,
                               label=N_("Composition scores"),
                               help=N_("A second layer of edges from the weights alone (dashed, 0.2 and above): "
                                       "through queries, keys or values; none hides them."))
    method: str = setting("eap-ig-inputs", url="circuit_method", pages=OWN, choices=METHODS, label=N_("Attribution"),
                          help=N_("How every edge is scored at once: EAP (the gradient at the clean run) or EAP-IG "
                                  "(averaged between the runs, on the inputs or on each node's outputs)."))
    steps: int = setting(DEFAULT_STEPS, url="circuit_steps", pages=OWN, lo=limits.EAP_STEPS[0],
                         hi=limits.EAP_STEPS[1], label=N_("Integration steps"),
                         help=N_("The points EAP-IG averages the gradient over (EAP takes one: the clean run)."))
    top: int = setting(20, url="circuit_top", pages=OWN, lo=1, hi=limits.MAX_EDGES_DRAWN, label=N_("Edges drawn"),
                       help=N_("The edges of largest |score| the graph draws."))
    link: str = setting("", url="circuit_link", pages=OWN, convert=_link, label=N_("Scored edge"),
                        help=N_("The edge of the graph whose exact effect is shown, as sender->receiver "
                                "(a0.h1->a1.h0<k>); a click on an edge sets it. Empty: the top edge."))
    edge: str = setting("", url="circuit_edge", pages=OWN, convert=_edge, label=N_("Edge"),
                        help=N_("The path opened below, as component:layer.head-layer.head (k:0.1-1.0); a click on "
                                "an edge sets it. Empty: the circuit's own."))
    cell: str = setting("", url="circuit_cell", pages=OWN, convert=_cell, label=N_("Cell"),
                        help=N_("The attention cell whose score is split into parts, as query.key; a click on the "
                                "attention sets it. Empty: where the receiver attends most from the last position."))

    def validate(self) -> None:
        validate(self)

    def with_(self, **changes) -> CircuitSettings:
        return replace(self, **changes)


COMPOSITION = ("how much of what the sender writes (its OV matrix) the receiver reads through its queries, keys "
               "(its QK matrix, either side) or values (its OV matrix), as a share of the two matrices' norms; on the "
               "weights with the norms folded and the writing weights centred")
DEFINITIONS = {"attribution": EAP, "faithfulness": FAITHFULNESS, "effect": EFFECT, "paths": PATHS,
               "composition": COMPOSITION, "score_attribution": SCORES}
DEFINITION_NAMES = {"attribution": N_("edge attribution"), "faithfulness": N_("faithfulness"),
                    "effect": N_("exact effect"), "paths": N_("path patching"), "composition": N_("composition score"),
                    "score_attribution": N_("score attribution")}  # as the page names them
# Each definition as a formula (LaTeX), drawn above its words: m is the metric (the answer's logit minus the
# wrong token's), s the sender, r the receiver, c its input (q, k or v).
FORMULAS = {
    "attribution": r"\mathrm{score}(u \to v) = \sum_{\text{positions}} "
                   r"\big(z_u^{\text{corrupted}} - z_u^{\text{clean}}\big) "
                   r"\cdot \frac{\partial m}{\partial\, \text{input}_v}",
    "faithfulness": r"\frac{m(\text{clean run, every edge outside the circuit corrupted}) - m_{\text{corrupted}}}"
                    r"{m_{\text{clean}} - m_{\text{corrupted}}}",
    "effect": r"m(\text{clean run, edge } u \to v \text{ corrupted}) - m_{\text{clean}}",
    "paths": r"m\big(\text{corrupted run};\ c_r \leftarrow \mathrm{LN}(x + o_s^{\text{clean}} - o_s^{\text{corrupted}})"
             r"\, W_c^{r}\big)",
    "composition": r"\frac{\lVert W_{OV}^{s}\, W^{r} \rVert_F}{\lVert W_{OV}^{s} \rVert_F\, \lVert W^{r} \rVert_F},"
                   r"\quad W^{r} \in \{W_Q W_K^\top,\ W_K W_Q^\top,\ W_V W_O\}",
    "score_attribution": r"s_{qk} = \text{scale} \cdot \Big(\sum_i \mathrm{LN}_q(x_i)\, W_Q\Big) \cdot "
                         r"\Big(\sum_j \mathrm{LN}_k(x_j)\, W_K\Big) = \sum_{i,j} t_{ij}",
}


@dataclass
class CircuitRun:
    """Everything a picture of the circuit shows for one model, two prompts and an answer."""

    found: FoundCircuit
    composition: dict[str, np.ndarray]  # mode -> (layers, H, layers, H)


def circuit_run(model, clean, corrupted, answer, wrong=None, progress=None, step=None) -> CircuitRun:
    """The circuit between two prompts (``progress(fraction)`` as it goes; ``step(work)`` runs each
    batch of patched runs: the app's compute workers)."""
    subject = subject_of(model)
    wrong = wrong_of(wrong)
    found = find_circuit(subject, clean, corrupted, answer=answer, wrong=wrong, progress=progress, step=step,
                         trace=lambda ids: trace_of(subject, model, ids), keep=kept_sweep(model))
    return CircuitRun(found, {m: composition_scores_of(subject.stack, m).numpy() for m in MODES})


CIRCUITS = jobs.kind("circuit")  # by model and prompts


def circuit_key(model, clean, corrupted, answer, wrong) -> tuple:
    return ("circuit", *model_identity(model), clean, corrupted, answer, wrong_of(wrong))


def circuit_job(model, clean, corrupted, answer, wrong=None, compute_with=None) -> Job:
    """The (one, shared) circuit job of these inputs: running, finished (or failed, its message
    kept until the inputs change), or started now in the background."""
    key = circuit_key(model, clean, corrupted, answer, wrong)
    return CIRCUITS.ask(key, lambda job: circuit_run(model, clean, corrupted, answer, wrong,
                                                     lambda f: job.report(f), compute_with))


def draw(run: CircuitRun, threshold: float, composition: str | None = "k",
         style: FigureStyle = FigureStyle()) -> go.Figure:
    """The graph: heads, the paths past ``threshold``, the ``composition`` scores beside them."""
    f = run.found
    title = found_title(f, threshold)
    return circuit_figure(f.heads, f.paths, threshold, title, style,
                          None if composition is None else run.composition[composition])


def circuit_record(run: CircuitRun, threshold: float) -> dict:
    """Every number the picture draws, and the definitions."""
    return {"circuit": run.found.to_dict(), "threshold": check_threshold(threshold),
            "edges": [{"component": c, "sender": [s, h], "receiver": [r, g], "share": v}
                      for c, s, h, r, g, v in edges(run.found.paths, threshold)],
            "composition": {m: v.tolist() for m, v in run.composition.items()}, "definitions": DEFINITIONS}


def exact_too_large(model, clean) -> str | None:
    """Why the exact sweep of every path is not run for this model and prompt (its patched runs' tokens past
    ``MAX_EXACT_SWEEP_TOKENS``), or None where it is."""
    subject = subject_of(model)
    need = sweep_tokens(subject.stack.layers, subject.stack.heads, len(subject.ids(clean)))
    if need <= limits.MAX_EXACT_SWEEP_TOKENS:
        return None
    return _("Patching every path of {model} exactly takes {need:,} tokens of patched runs, more than this page's "
             "bound of {most:,}: the attribution graph scores every edge instead, and its table gives the top "
             "edges' exact effects.").format(model=subject.name, need=need, most=limits.MAX_EXACT_SWEEP_TOKENS)


def attribution_of(model, clean, corrupted, answer, wrong, settings: CircuitSettings) -> A.AttributionRun:
    return A.attribution_run(model, clean, corrupted, answer, wrong, settings.method, settings.steps)


def circuit_json(model, clean, corrupted, answer, wrong=None, settings: CircuitSettings | None = None) -> bytes:
    """Every number the Circuit page draws for these prompts and ``settings``: every edge's attribution, the
    faithfulness curve, the top edges' exact effects and the opened edge's; then, where the model is small
    enough, the circuit by exact path patching, the edges past the threshold, the composition scores, the
    opened path's two patterns and the opened cell's terms."""
    settings = settings or CircuitSettings()
    settings.validate()
    arun = attribution_of(model, clean, corrupted, answer, wrong, settings)
    link = A.picked(arun, settings.link)
    data = {"config": {"model": str(model), "clean": clean, "corrupted": corrupted, "answer": answer,
                       "wrong": wrong_of(wrong), "composition": settings.composition, "method": settings.method,
                       "steps": settings.steps, "top": settings.top},
            "attribution": A.attribution_record(arun, settings.top),
            "link": {"edge": link, "score": arun.attribution[link],
                     "exact_effect": A.edge_effect(model, clean, corrupted, answer, wrong, arun, link)},
            "definitions": DEFINITIONS}
    too_large = exact_too_large(model, clean)
    if too_large is not None:
        return json.dumps({**data, "circuit": None, "exact_sweep": too_large}, ensure_ascii=False,
                          sort_keys=True).encode("utf-8")
    run = circuit_run(model, clean, corrupted, answer, wrong)
    data.update(circuit_record(run, settings.threshold))
    edge = edge_of(run, settings)
    if edge is not None:
        view = edge_view(model, clean, corrupted, answer, wrong, edge)
        q, k = cell_of(view, settings)
        data["edge"] = {"name": edge.name, "component": edge.component, "sender": list(edge.sender),
                        "receiver": list(edge.receiver), "tokens": view.tokens, "before": view.before.tolist(),
                        "after": view.after.tolist()}
        data["cell"] = cell_attribution(model, clean, *edge.receiver, q, k).to_dict()
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")


def page_json(state) -> bytes:
    """What ``render --page circuit --out x.json`` writes for a link's settings (the model's example pair
    where the prompts are the defaults, as on the page)."""
    state = with_example(state, EXAMPLE)
    pair = state.pair
    return circuit_json(state.model, pair.clean, pair.corrupted, pair.answer, pair.wrong, state.circuit)


def circuit_page_figure(state, style: FigureStyle) -> go.Figure:
    """The page's first figure for a link's settings (``render --page circuit --out x.png``): the attribution
    graph, its picked edge outlined."""
    state = with_example(state, EXAMPLE)
    state.circuit.validate()
    pair, settings = state.pair, state.circuit
    arun = attribution_of(state.model, pair.clean, pair.corrupted, pair.answer, pair.wrong, settings)
    return A.draw_graph(arun, settings.top, style, A.picked(arun, settings.link))


def composition_mode(settings: CircuitSettings) -> str | None:
    return None if settings.composition == "none" else settings.composition


# --- one edge and one cell opened (the page's clicks, the CLI's --circuit-edge and --circuit-cell) ---------

@dataclass(frozen=True)
class Edge:
    component: str  # "q", "k" or "v"
    sender: tuple[int, int]
    receiver: tuple[int, int]

    @property
    def name(self) -> str:
        """As a link writes it: k:0.1-1.0."""
        return f"{self.component}:{self.sender[0]}.{self.sender[1]}-{self.receiver[0]}.{self.receiver[1]}"

    def words(self) -> str:
        return _("L{s} H{h} → L{r} H{g}, into its {c}").format(
            s=self.sender[0], h=self.sender[1], r=self.receiver[0], g=self.receiver[1],
            c={"q": _("queries"), "k": _("keys"), "v": _("values")}[self.component])


def edge_of(run: CircuitRun, settings: CircuitSettings) -> Edge | None:
    """The edge ``settings`` names, else the circuit's own (its sender into its receiver); None for a model
    of one layer. ``ValueError`` for an edge outside the model or a receiver not after its sender."""
    f = run.found
    if not settings.edge:
        return None if f.receiver is None else Edge(f.through, f.sender, f.receiver)
    c, s, h, r, g = EDGE.match(settings.edge).groups()
    edge = Edge(c, (int(s), int(h)), (int(r), int(g)))
    layers, heads = f.heads.shape
    for name, (layer, head) in (("sender", edge.sender), ("receiver", edge.receiver)):
        if not (0 <= layer < layers and 0 <= head < heads):
            raise ValueError(f"The edge's {name} L{layer} H{head} does not exist: {f.model} has {layers} layers of "
                             f"{heads} heads.")
    if edge.receiver[0] <= edge.sender[0]:
        raise ValueError(f"The edge's receiver L{edge.receiver[0]} H{edge.receiver[1]} is not after its sender "
                         f"L{edge.sender[0]} H{edge.sender[1]}: a head reads only what the layers below it wrote. "
                         "Pick a receiver in a later layer.")
    return edge


def without_edge(settings: CircuitSettings) -> CircuitSettings:
    """The settings with no edge named: the circuit's own edge is drawn (a typed edge that cannot be read falls
    back to it)."""
    return replace(settings, edge="")


def without_cell(settings: CircuitSettings) -> CircuitSettings:
    """The settings with no cell named: the receiver's most attended key is opened."""
    return replace(settings, cell="")


@dataclass
class EdgeView:
    """The receiver's attention on the corrupted prompt, as it is and with the edge patched."""

    edge: Edge
    tokens: list[str]  # the corrupted prompt's tokens
    before: np.ndarray  # (L, L)
    after: np.ndarray  # (L, L)


def edge_view(model, clean, corrupted, answer, wrong, edge: Edge) -> EdgeView:
    """Both patterns, from the prompts' cached runs (``patching.trace_of``): one layer's scores each."""
    subject = subject_of(model)
    wrong = wrong_of(wrong)
    ran = runs(subject, clean, corrupted, answer=answer, wrong=wrong, trace=lambda ids: trace_of(subject, model, ids))
    before, after = edge_attention(subject, ran, edge.sender, edge.receiver, edge.component)
    return EdgeView(edge, subject.spelled(ran.corrupted_ids), before, after)


def edge_figure(view: EdgeView, style: FigureStyle, cell: tuple[int, int] | None = None, *,
                patched: bool) -> go.Figure:
    """The receiver's (L, L) weights without (``patched`` False) or with the edge patched, the opened cell's
    row outlined, a click on a cell reported (``with_cell_clicks``)."""
    r, g = view.edge.receiver
    title = (_("…with {edge} patched").format(edge=view.edge.words()) if patched else
             _("L{r} H{g} on the corrupted prompt").format(r=r, g=g))
    return with_cell_clicks(matrix_figure(view.after if patched else view.before, view.tokens, view.tokens, title,
                                          style, zero_one=True, value_name=_("weight"),
                                          highlight_row=None if cell is None else cell[0]))


def cell_of(view: EdgeView, settings: CircuitSettings) -> tuple[int, int]:
    """(query, key): the cell ``settings`` names, else the key the receiver attends to most from the last
    position once the edge is patched. ``ValueError`` outside the prompt or the causal mask."""
    n = len(view.tokens)
    if not settings.cell:
        return n - 1, int(np.argmax(view.after[n - 1]))
    q, k = (int(v) for v in CELL.match(settings.cell).groups())
    if not (q < n and k < n):
        raise ValueError(f"The cell {q}.{k} is outside the prompt: it has {n} tokens (positions 0–{n - 1}).")
    if k > q:
        raise ValueError(f"The cell {q}.{k} is masked: a causal model's query {q} never sees the later key {k}. "
                         "Pick a key at or before the query.")
    return q, k


def cell_attribution(model, clean, layer: int, head: int, query: int, key: int) -> ScoreAttribution:
    """The cell's score on the clean prompt (where the circuit carries the answer), split into parts."""
    subject = subject_of(model)
    return attribute_score(subject, clean, layer=layer, head=head, query=query, key=key,
                           trace=lambda ids: trace_of(subject, model, ids))  # the run the sweep cached


def terms_figure(a: ScoreAttribution, style: FigureStyle) -> go.Figure:
    """The (query parts × key parts) terms of one cell's score as a heat map, on a scale centred on 0."""
    title = _("L{l} H{h}, query “{q}” ({qi}) · key “{k}” ({ki})<br>score {s:+.2f} = the sum of these terms").format(
        l=a.layer, h=a.head, q=a.tokens[a.query], qi=a.query, k=a.tokens[a.key], ki=a.key, s=a.score)
    fig = matrix_figure(a.terms.numpy(), a.query_parts, a.key_parts, title, style, value_name=_("term"))
    fig.update_layout(yaxis_title=_("query side"), xaxis_title=_("key side"))
    return fig


def cell_record(a: ScoreAttribution) -> dict:
    return a.to_dict()


def main_figure(state, style: FigureStyle, data: bytes | None = None) -> go.Figure:
    """The page's figure for the CLI."""
    return circuit_page_figure(state, style)


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    return page_json(state)
