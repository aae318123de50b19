"""How heads work together, from a notebook: composition scores, direct path patching and score
attribution (``attnviz.analysis.composition``, ``pathpatch``, ``scoreattr``: TransformerLens's
definitions), edge attribution and a circuit's faithfulness (``attnviz.analysis.eap``: hannamw/EAP-IG's
definitions), offline, for the models ``patch_heads`` takes.

    import attnviz
    attnviz.composition_scores("watch-it-learn", "k")                   # (layers, H, layers, H)
    attnviz.path_patch(model, clean, corrupted, answer="14", component="k")   # (layers, H, layers, H)
    a = attnviz.score_attribution(model, text, layer=1, head=0, query=12, key=4)
    a.terms, a.query_parts, a.key_parts, a.score
    attnviz.circuit("watch-it-learn").message                          # the circuit, found by the numbers
    attnviz.example_pair("gpt2")          # {"clean", "corrupted", "answer", "wrong"} that mean something
    e = attnviz.edge_attribution(model, clean, corrupted, answer="14", method="eap-ig-inputs", steps=5)
    e["a0.h3->a1.h0<k>"], e.top(10), e.table()
    attnviz.circuit_faithfulness(model, clean, corrupted, answer="14", edges=[n for n, _s in e.top(20)]).fraction
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from attnviz import limits
from attnviz.analysis.circuit import FoundCircuit, find_circuit
from attnviz.analysis.composition import composition_scores_of
from attnviz.analysis.eap import CURVE_COUNTS, DEFAULT_STEPS, EdgeAttribution, score_edges
from attnviz.analysis.edgegraph import graph_of
from attnviz.analysis.examples import example_prompts
from attnviz.analysis.faithful import EdgeEffects, Faithfulness, circuit_metric, edge_effects, faithfulness_by_count
from attnviz.analysis.pathpatch import path_patching
from attnviz.analysis.scoreattr import ScoreAttribution, attribute_score
from attnviz.learn.trained import subject_of
from attnviz.plots.circuit import check_threshold, circuit_figure, found_title
from attnviz.plots.edgescores import edge_graph_figure, graph_title
from attnviz.plots.style import FigureStyle


def composition_scores(model, mode: str) -> torch.Tensor:
    """(layers, H, layers, H): ‖W_OV^sender · W^receiver‖_F / (‖W_OV^sender‖_F ‖W^receiver‖_F),
    W^receiver being the receiver's W_Q W_Kᵀ (``mode`` "q"), W_K W_Qᵀ ("k") or W_V W_O ("v"), on the
    weights TransformerLens's ``from_pretrained`` gives (norms folded, writing weights centred);
    0 where the receiver's layer is not later (TransformerLens's ``all_composition_scores``)."""
    return composition_scores_of(subject_of(model).stack, mode)


def path_patch(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None,
               component: str | None = None, edges=None) -> torch.Tensor | EdgeEffects:
    """With ``component``: (sender layers, sender heads, receiver layers, receiver heads) float64, the
    metric on the corrupted run with the sender's clean-minus-corrupted output added to the receiver's
    own ``component`` input ("q", "k" or "v") only (TransformerLens 4.3's
    ``get_act_patch_direct_path_all_sources``; the metric and prompts as ``patch_heads``'s). NaN
    where the receiver's layer is not later than the sender's: no path, not a measurement (where
    TransformerLens puts 0.0). A grouped-query model's shared KV head: the path reaches the key or
    value of the receiving query head alone.

    With ``edges`` (names, as ``edge_attribution`` names them, for example its ``.top(20)``'s): only
    those edges, each one's exact effect (``EdgeEffects``, a mapping name → effect): the metric of the
    clean run with that one edge carrying its sender's corrupted activation, minus the clean metric,
    which is what its attribution score estimates. For an edge between two heads it is the path
    patching above with the prompts' roles swapped, minus the clean metric."""
    if (component is None) == (edges is None):
        raise ValueError("Give path_patch either component ('q', 'k' or 'v': every path into it) or edges (a list "
                         "of edge names, as edge_attribution names them), not both or neither.")
    if edges is not None:
        return edge_effects(subject_of(model), clean, corrupted, answer=answer, wrong=wrong, edges=edges)
    p = path_patching(subject_of(model), clean, corrupted, answer=answer, wrong=wrong, component=component)
    return torch.from_numpy(p.values)


def edge_attribution(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None,
                     method: str = "eap", steps: int = DEFAULT_STEPS) -> EdgeAttribution:
    """Every edge's score of the model's graph (nodes ``input``, ``a{l}.h{h}`` with their ``<q>``,
    ``<k>``, ``<v>`` inputs apart, ``m{l}``, ``logits``; edges named as EAP-IG names them, as
    "a0.h3->a1.h0<v>"): (z_u(corrupted) − z_u(clean)) · ∂metric/∂(v's input) summed over positions, the
    gradient at the clean run (``method="eap"``) or averaged over ``steps`` points between the runs
    (``"eap-ig-inputs"``: the inputs interpolated; ``"eap-ig-activations"``: each node's outputs in turn).
    A mapping name → signed score, with ``.top(n)`` (by |score|) and ``.table()``. The prompts and the
    metric as ``patch_heads`` takes them."""
    return score_edges(subject_of(model), clean, corrupted, answer=answer, wrong=wrong, method=method, steps=steps)


def circuit_faithfulness(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None,
                         edges) -> Faithfulness:
    """The metric of the clean run in which every edge outside ``edges`` (names, as ``edge_attribution``
    names them) carries its sender's corrupted activation (EAP-IG's ``evaluate_graph``): ``.metric``,
    ``.clean``, ``.corrupted`` and ``.fraction``, (metric − corrupted) / (clean − corrupted)."""
    return circuit_metric(subject_of(model), clean, corrupted, answer=answer, wrong=wrong, edges=edges)


def faithfulness_curve(model, clean, corrupted, *, answer: str | int, wrong: str | int | None = None,
                       attribution: EdgeAttribution, counts=CURVE_COUNTS) -> list[Faithfulness]:
    """``circuit_faithfulness`` with the 1, 2, 5, 10, 20, 50, 100, 200 edges of largest |score| in
    ``attribution`` kept (those fewer than all), then every edge: one ``Faithfulness`` each (``.edges``)."""
    return faithfulness_by_count(subject_of(model), clean, corrupted, answer=answer, wrong=wrong,
                                 attribution=attribution, counts=counts)


def score_attribution(model, text, *, layer: int, head: int, query: int, key: int) -> ScoreAttribution:
    """The pre-softmax score of head (``layer``, ``head``) at (``query``, ``key``) split into
    (query part × key part) terms: ``.terms`` (query parts, key parts), ``.query_parts``,
    ``.key_parts`` (the parts' names), ``.score`` (the model's, which the terms sum to)."""
    return attribute_score(subject_of(model), text, layer=layer, head=head, query=query, key=key)


def example_pair(model, kind: str = "swap") -> dict | None:
    """Two prompts and an answer that mean something for ``model``, of ``kind``: "swap" (for patching: the
    repeat and the same tokens with two swapped, for Watch it learn's model) or "break" (for the circuit: the
    repeat with its earlier copy replaced); an indirect-object pair with names the tokenizer spells as one
    token for a GPT-2-like tokenizer, either kind; None where none is known."""
    return example_prompts(subject_of(model), kind)


def circuit(model, clean=None, corrupted=None, *, answer=None, wrong=None) -> FoundCircuit:
    """The circuit between two prompts found by the numbers (``attnviz.analysis.circuit``): the head
    that carries the answer (``.receiver``), the earlier head whose path feeds it most (``.sender``,
    ``.through`` "q", "k" or "v"), the key part that makes it attend where it does (``.key_part``),
    every path (``.paths``) and a sentence (``.message``). Without prompts: the model's example
    pair for the Circuit page."""
    clean, corrupted, answer, wrong = _pair(model, clean, corrupted, answer, wrong)
    return find_circuit(subject_of(model), clean, corrupted, answer=answer, wrong=wrong)


def _pair(model, clean, corrupted, answer, wrong) -> tuple:
    """The prompts, answer and wrong token given, or the model's example pair for the Circuit page."""
    if clean is None:
        subject = subject_of(model)
        pair = example_prompts(subject, "break")
        if pair is None:
            raise ValueError(f"No example pair is known for {subject.name}: give two prompts and an answer.")
        clean, corrupted, answer, wrong = pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"]
    if corrupted is None or answer is None:
        raise ValueError("Give both prompts and the answer (or none of them, for the model's example pair).")
    return clean, corrupted, answer, wrong


def circuit_view(model, clean=None, corrupted=None, *, answer=None, wrong=None, threshold: float = 0.1,
                 composition: str | None = "k", style: FigureStyle | None = None, method: str | None = None,
                 steps: int = DEFAULT_STEPS, top: int = 20) -> go.Figure:
    """The circuit as a graph (never shown: display it). Without ``method``: heads as nodes by layer,
    sized and coloured by what each alone brings back; every path that brings back at least
    ``threshold`` of the answer (normalised) as an edge coloured by q, k or v; the ``composition``
    scores ("q", "k", "v" or None) at 0.2 and above as dashed grey edges, from the weights alone.
    With ``method`` ("eap", "eap-ig-inputs", "eap-ig-activations"; ``steps`` points): the whole
    model's graph scored by edge attribution, its ``top`` edges by |score| drawn (coloured by the input
    they reach, solid for a positive score, dotted for a negative one), as the Circuit page draws it.
    The prompts as ``circuit`` takes them."""
    threshold = check_threshold(threshold)
    if method is not None:
        clean, corrupted, answer, wrong = _pair(model, clean, corrupted, answer, wrong)
        lo, hi = 1, limits.MAX_EDGES_DRAWN
        if isinstance(top, bool) or not isinstance(top, int) or not lo <= top <= hi:
            raise ValueError(f"top must be a whole number from {lo} to {hi} (MAX_EDGES_DRAWN); got {top!r}.")
        e = edge_attribution(model, clean, corrupted, answer=answer, wrong=wrong, method=method, steps=steps)
        g = graph_of(subject_of(model).stack)
        return edge_graph_figure(e.top(top), g.layers, g.heads, g.mlp,
                                 graph_title(e.model, e.method, e.steps, top, len(e)), style or FigureStyle())
    found = circuit(model, clean, corrupted, answer=answer, wrong=wrong)
    scores = None if composition is None else composition_scores(model, composition).numpy()
    title = found_title(found, threshold)
    return circuit_figure(found.heads, found.paths, float(threshold), title, style or FigureStyle(), scores)
