"""How much of the answer a set of edges keeps (faithfulness, EAP-IG's ``evaluate_graph`` with
patching), and the exact effect of single edges, on the graph and the split run of
``attnviz.analysis.edgegraph``; the definitions are in ``attnviz.analysis.eap``'s module doc.

May import: attnviz.analysis, attnviz.limits, attnviz.models.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.analysis.eap import CURVE_COUNTS, EdgeAttribution, batches, both_runs
from attnviz.analysis.edgegraph import Graph, Split, graph_of, node_activations
from attnviz.analysis.patching import Runs, metric
from attnviz.analysis.subjects import Subject

FAITHFULNESS = ("(the metric of the clean run in which every edge outside the circuit carries its sender's corrupted "
                "activation − the corrupted run's) / (the clean run's − the corrupted run's): EAP-IG's evaluate_graph")


@dataclass
class Faithfulness:
    """The metric of the clean run with only a set of edges carrying the clean activations."""

    model: str
    edges: int  # how many edges are kept
    metric: float
    clean: float
    corrupted: float

    @property
    def fraction(self) -> float:
        """(metric − corrupted) / (clean − corrupted); ``ValueError`` where the two runs agree."""
        gap = self.clean - self.corrupted
        if abs(gap) < 1e-9:
            raise ValueError(f"The clean and the corrupted prompt give the same metric ({self.clean:.4g}): no set of "
                             "edges can bring anything back. Corrupt a token the answer depends on.")
        return (self.metric - self.corrupted) / gap


def _kept(graph: Graph, edges, name: str) -> np.ndarray:
    """(senders, receivers) bool: the named edges; ``ValueError`` naming the first that is not one."""
    if isinstance(edges, str):
        raise ValueError("edges must be a list of edge names, for example ['input->a0.h1<q>', 'a0.h1->logits'].")
    s = {n: i for i, n in enumerate(graph.senders)}
    r = {n: j for j, n in enumerate(graph.receivers)}
    allowed = graph.allowed()
    kept = np.zeros_like(allowed)
    for e in edges:
        sender, _, receiver = str(e).partition("->")
        i, j = s.get(sender), r.get(receiver)
        if i is None or j is None or not allowed[i, j]:
            raise ValueError(f"“{e}” is not an edge of {name}'s graph ({graph.layers} layers × {graph.heads} heads"
                             f"{'' if graph.mlp else ', no MLP'}): edges are named sender->receiver, for example "
                             "input->a0.h3<k>, a0.h3->a1.h0<v>, a1.h0->m1, m1->logits, the receiver in a later layer "
                             "than its sender (or the MLP of the sender's layer, or the logits).")
        kept[i, j] = True
    return kept


def carried(dropped: torch.Tensor, corrupted: torch.Tensor, acts: list[torch.Tensor]) -> torch.Tensor:
    """(R, B, L, E): Σ_f dropped[b, f, r] · (corrupted[:, f] − now[b, :, f]), what each receiver's input gains
    from the dropped edges carrying their senders' corrupted activations; dropped (B, F, R) of 0 and 1,
    corrupted (L, F, E), now the senders as this run computes them: ``acts`` concatenated along their third
    axis ((B, L, k, E) each), the first F of them.

    A mask is mostly kept or mostly dropped (a curve keeps the top edges, an edge's effect drops one): the
    sparser side is summed edge by edge, without the (B, L, F, E) difference the dense product needs (on
    SmolLM2's 123,211 edges that difference and its product were most of the Circuit page's first reading)."""
    B, F, R = dropped.shape
    ones = dropped.sum((1, 2))  # (B,) each row's dropped edges
    few_kept = ones > F * R / 2  # such a row sums every sender's difference, less its kept edges'
    side = torch.where(few_kept[:, None, None], 1 - dropped, dropped)  # (B, F, R): the sparser side of each row
    dense = side.sum((1, 2)) * 4 > F * R  # rows with neither side sparse: the dense product
    out = corrupted.new_zeros(R, B, corrupted.shape[0], corrupted.shape[2])
    if dense.any():
        rows = dense.nonzero(as_tuple=True)[0]
        now = torch.cat(acts, 2)[rows, :, :F]  # (b, L, F, E)
        out[:, rows] = torch.einsum("bfr,blfe->rble", dropped[rows], corrupted[None] - now)
    if few_kept.any():
        rows = (few_kept & ~dense).nonzero(as_tuple=True)[0]
        every = corrupted.sum(1)[None] - sum(_first(acts, F))  # (B, L, E): Σ_f corrupted − now
        out[:, rows] = every[rows][None]
    b, f, r = (side * ~dense[:, None, None]).nonzero(as_tuple=True)
    if len(b):
        diff = corrupted[:, f].transpose(0, 1) - _senders(acts, b, f)  # (n, L, E) the listed edges' differences
        sign = torch.where(few_kept[b], -1.0, 1.0)[:, None, None]
        out.index_put_((r, b), sign * diff, accumulate=True)
    return out


def _senders(acts: list[torch.Tensor], b: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """(n, L, E): now[b_i, :, f_i] for each listed (b_i, f_i), read from the groups without concatenating them."""
    L, E = acts[0].shape[1], acts[0].shape[3]
    out = acts[0].new_empty(len(f), L, E)
    start = 0
    for act in acts:
        k = act.shape[2]
        here = ((f >= start) & (f < start + k)).nonzero(as_tuple=True)[0]
        if len(here):
            out[here] = act[b[here], :, f[here] - start]
        start += k
    return out


def _first(acts: list[torch.Tensor], F: int):
    """Each group's sum over its senders, of the first ``F`` senders: (B, L, E) each."""
    start = 0
    for act in acts:
        if start >= F:
            return
        yield act[:, :, :F - start].sum(2)
        start += act.shape[2]


def _faithful(subject: Subject, ran: Runs, masks: list[np.ndarray]) -> list[float]:
    """The metric of the patched clean run for each kept-edge mask (senders, receivers), batched."""
    stack = subject.stack
    graph = graph_of(stack)
    split = Split(stack, graph, ran.corrupted)
    corrupted = node_activations(stack, graph, ran.corrupted)  # (L, F, E)
    x_clean = ran.clean.resid_pre[0][0]  # (L, E)
    L = x_clean.shape[0]
    out = []
    for chunk in batches(len(masks), L):
        dropped = torch.from_numpy(~np.stack([masks[i] for i in chunk])).float()  # (B, F, R): 1 carries corrupted

        def into(key, streams, acts, dropped=dropped):  # (k, B, L, E)
            prev, cols = graph.reads(key)
            return streams + carried(dropped[:, :prev, cols], corrupted[:, :prev], acts)

        with torch.no_grad():
            logits, _acts = split.run(x_clean.expand(len(chunk), L, -1), into)
        out += metric(logits, ran.answer, ran.wrong).tolist()
    return out


def circuit_metric(subject: Subject, clean, corrupted, *, answer, wrong=None, edges: Iterable[str],
                         ran: Runs | None = None) -> Faithfulness:
    """The metric with only ``edges`` (names, as ``EdgeAttribution`` names them) carrying the clean
    run's activations, every other edge its sender's corrupted one (see the module doc)."""
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    graph = graph_of(subject.stack)
    kept = _kept(graph, list(edges), subject.name)
    value = _faithful(subject, ran, [kept])[0]
    a, w = ran.answer, ran.wrong
    return Faithfulness(subject.name, int(kept.sum()), value, float(metric(ran.clean.logits, a, w)[0]),
                        float(metric(ran.corrupted.logits, a, w)[0]))


def faithfulness_by_count(subject: Subject, clean, corrupted, *, answer, wrong=None, attribution: EdgeAttribution,
                       counts: Iterable[int] = CURVE_COUNTS, ran: Runs | None = None) -> list[Faithfulness]:
    """Faithfulness with the ``counts`` edges of largest |score| in ``attribution`` kept (those under
    the number of edges), then every edge."""
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    graph = graph_of(subject.stack)
    if attribution.senders != graph.senders or attribution.receivers != graph.receivers:
        raise ValueError(f"The attribution is of another graph than {subject.name}'s: score this model's edges first.")
    sizes = sorted({int(c) for c in counts if 0 < int(c) < len(attribution)}) + [len(attribution)]
    masks = [attribution.kept_top(n) for n in sizes]
    values = _faithful(subject, ran, masks)
    a, w = ran.answer, ran.wrong
    c, x = float(metric(ran.clean.logits, a, w)[0]), float(metric(ran.corrupted.logits, a, w)[0])
    return [Faithfulness(subject.name, n, v, c, x) for n, v in zip(sizes, values, strict=True)]


@dataclass
class EdgeEffects(Mapping):
    """The exact effect of each named edge: the metric of the clean run in which that one edge carries its
    sender's corrupted activation, minus the clean run's metric (what an edge's attribution score
    estimates to first order). A mapping name → effect, in the order the edges were named."""

    model: str
    clean: float
    corrupted: float
    effects: dict[str, float]

    def __getitem__(self, name: str) -> float:
        return self.effects[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.effects)

    def __len__(self) -> int:
        return len(self.effects)

    def to_dict(self) -> dict:
        return {"model": self.model, "clean": self.clean, "corrupted": self.corrupted, "definition": EFFECT,
                "effects": dict(self.effects)}


EFFECT = ("the metric of the clean run with this one edge carrying its sender's corrupted activation, minus the "
          "clean run's metric (what the edge's score estimates)")


def edge_effects(subject: Subject, clean, corrupted, *, answer, wrong=None, edges: Iterable[str],
                 ran: Runs | None = None) -> EdgeEffects:
    """The exact effect of each of ``edges`` (names, as ``EdgeAttribution`` names them; see ``EdgeEffects``):
    one patched run per edge, batched. For an edge between two heads it is TransformerLens's direct path
    patching with the prompts' roles swapped (the clean run, the corrupted sender's write into the
    receiver's one input), minus the clean metric; ``path_patch`` computes it that way too (tested)."""
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    graph = graph_of(subject.stack)
    names = list(dict.fromkeys(edges if not isinstance(edges, str) else [edges]))
    singles = [_kept(graph, [n], subject.name) for n in names]  # checks every name first
    every = graph.allowed()
    values = _faithful(subject, ran, [every & ~one for one in singles])
    a, w = ran.answer, ran.wrong
    c = float(metric(ran.clean.logits, a, w)[0])
    return EdgeEffects(subject.name, c, float(metric(ran.corrupted.logits, a, w)[0]),
                       {n: v - c for n, v in zip(names, values, strict=True)})


def rank_agreement(attribution: EdgeAttribution, effects: Mapping[str, float]) -> float:
    """Spearman's rank correlation between the edges' scores and their exact effects (the edges of
    ``effects``; ties ranked by their mean rank); NaN for fewer than two edges or a constant side."""
    names = list(effects)
    if len(names) < 2:
        return float("nan")
    a = np.array([attribution[n] for n in names])
    b = np.array([effects[n] for n in names], dtype=float)

    def ranks(x):  # mean ranks of ties, as scipy.stats.rankdata's "average"
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for v in np.unique(x):
            r[x == v] = r[x == v].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])
