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
from attnviz.analysis.edgegraph import Graph, Split, graph_of
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


def carried(dropped: torch.Tensor, corrupted: torch.Tensor, acts: list[torch.Tensor], totals: Totals | None = None
            ) -> torch.Tensor:
    """(R, B, L, E): Σ_f dropped[b, f, r] · (corrupted[:, f] − now[b, :, f]), what each receiver's input gains
    from the dropped edges carrying their senders' corrupted activations; dropped (B, F, R) of 0 and 1,
    corrupted (L, F, E), now the senders as this run computes them: ``acts`` concatenated along their third
    axis ((B, L, k, E) each), the first F of them.

    A mask is mostly kept or mostly dropped (a curve keeps the top edges, an edge's effect drops one): the
    sparser side is summed edge by edge, without the (B, L, F, E) difference the dense product needs (on
    SmolLM2's 123,211 edges that difference and its product were most of the Circuit page's first reading).
    ``totals``: the run's running sums (``Totals``), where one split run calls this for each of its receivers."""
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
        every = (totals or Totals(corrupted)).gap(acts, F)  # (B, L, E): Σ_f corrupted − now
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


class Totals:
    """Σ_f corrupted[:, f] − now[:, :, f] over the first F senders, for one split run's receivers in turn: the
    senders' sums are kept as the run goes (each receiver summed every sender before it: a layer's worth of
    sums more per layer, most of the curve's bookkeeping)."""

    def __init__(self, corrupted: torch.Tensor) -> None:  # (L, F, E)
        self.cum = corrupted.cumsum(1)  # (L, F, E)
        self.acts, self.done, self.width, self.now = None, 0, 0, 0

    def gap(self, acts: list[torch.Tensor], F: int) -> torch.Tensor:
        """(B, L, E) where ``acts`` are the senders so far of the run (groups (B, L, k, E))."""
        if acts is not self.acts:
            self.acts, self.done, self.width, self.now = acts, 0, 0, 0
        for act in acts[self.done:]:
            self.now, self.width = self.now + act.sum(2), self.width + act.shape[2]
        self.done = len(acts)
        now = self.now if self.width == F else sum(_first(acts, F))  # a receiver that reads fewer than are made
        return self.cum[:, F - 1][None] - now


def _first(acts: list[torch.Tensor], F: int):
    """Each group's sum over its senders, of the first ``F`` senders: (B, L, E) each."""
    start = 0
    for act in acts:
        if start >= F:
            return
        yield act[:, :, :F - start].sum(2)
        start += act.shape[2]


def _faithful(subject: Subject, ran: Runs, masks: list[np.ndarray], split: Split | None = None) -> list[float]:
    """The metric of the patched clean run for each kept-edge mask (senders, receivers), batched. A mask's run
    starts at the first layer it drops an edge into (before it, the clean run's own streams), and a mask that
    drops none is the clean run (an edge's exact effect is mostly a late layer's: most of its run is skipped)."""
    stack = subject.stack
    graph = graph_of(stack)
    split = split or Split(stack, graph, ran.corrupted)
    corrupted = split.senders(ran.corrupted)  # (L, F, E)
    clean_senders = split.senders(ran.clean)  # (L, F, E)
    L = corrupted.shape[0]
    allowed, layer_of = graph.allowed(), graph.receiver_layers()
    starts = [None if not (d := (allowed & ~m).any(0)).any() else int(layer_of[d].min()) for m in masks]
    out = [float(metric(ran.clean.logits, ran.answer, ran.wrong)[0])] * len(masks)
    # a logit difference reads two tokens' logits: the unembedding of those two alone (columns 0 and 1)
    tokens, read = (None, (ran.answer, None)) if ran.wrong is None else ([ran.answer, ran.wrong], (0, 1))
    for start in sorted({s for s in starts if s is not None}):
        rows = [i for i, s in enumerate(starts) if s == start]
        x = ran.clean.resid_pre[start][0] if start < graph.layers else ran.clean.resid_final[0]  # (L, E)
        first = graph.reads(("a", start) if start < graph.layers else ("logits", 0))[0]  # the senders before
        for chunk in batches(len(rows), L):
            picked = [rows[i] for i in chunk]
            dropped = torch.from_numpy(~np.stack([masks[i] for i in picked])).float()  # (B, F, R): 1 carries corrupted
            totals = Totals(corrupted)

            def into(key, streams, acts, dropped=dropped, totals=totals):  # (k, B, L, E)
                prev, cols = graph.reads(key)
                return streams + carried(dropped[:, :prev, cols], corrupted[:, :prev], acts, totals)

            B = len(picked)
            before = clean_senders[None, :, :first].expand(B, -1, -1, -1) if start else None  # (B, L, first, E)
            with torch.no_grad():
                logits, _acts = split.run(x.expand(B, L, -1), into, start=start, before=before, tokens=tokens)
            for i, v in zip(picked, metric(logits, *read).tolist(), strict=True):
                out[i] = v
    return out


def circuit_metric(subject: Subject, clean, corrupted, *, answer, wrong=None, edges: Iterable[str],
                         ran: Runs | None = None) -> Faithfulness:
    """The metric with only ``edges`` (names, as ``EdgeAttribution`` names them) carrying the clean
    run's activations, every other edge its sender's corrupted one (see the module doc)."""
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    graph = graph_of(subject.stack)
    kept = _kept(graph, list(edges), subject.name)
    return Faithfulness(subject.name, int(kept.sum()), _faithful(subject, ran, [kept])[0], *_ends(ran))


def _curve_masks(graph: Graph, attribution: EdgeAttribution, counts: Iterable[int], name: str
                 ) -> tuple[list[int], list]:
    """The curve's sizes (``counts`` under the number of edges, then every edge) and their kept-edge masks."""
    if attribution.senders != graph.senders or attribution.receivers != graph.receivers:
        raise ValueError(f"The attribution is of another graph than {name}'s: score this model's edges first.")
    sizes = sorted({int(c) for c in counts if 0 < int(c) < len(attribution)}) + [len(attribution)]
    return sizes, [attribution.kept_top(n) for n in sizes]


def _effect_masks(graph: Graph, edges, name: str) -> tuple[list[str], list]:
    """The named edges (once each, checked) and each one's mask: every edge kept but that one."""
    names = list(dict.fromkeys(edges if not isinstance(edges, str) else [edges]))
    singles = [_kept(graph, [n], name) for n in names]  # checks every name first
    every = graph.allowed()
    return names, [every & ~one for one in singles]


def _ends(ran: Runs) -> tuple[float, float]:
    """The metric of the clean run and of the corrupted run."""
    a, w = ran.answer, ran.wrong
    return float(metric(ran.clean.logits, a, w)[0]), float(metric(ran.corrupted.logits, a, w)[0])


def faithfulness_by_count(subject: Subject, clean, corrupted, *, answer, wrong=None, attribution: EdgeAttribution,
                       counts: Iterable[int] = CURVE_COUNTS, ran: Runs | None = None) -> list[Faithfulness]:
    """Faithfulness with the ``counts`` edges of largest |score| in ``attribution`` kept (those under
    the number of edges), then every edge."""
    return curve_and_effects(subject, clean, corrupted, answer=answer, wrong=wrong, attribution=attribution,
                             counts=counts, edges=[], ran=ran)[0]


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
    return curve_and_effects(subject, clean, corrupted, answer=answer, wrong=wrong, attribution=None, edges=edges,
                             ran=ran)[1]


def curve_and_effects(subject: Subject, clean, corrupted, *, answer, wrong=None, attribution: EdgeAttribution | None,
                      edges: Iterable[str], counts: Iterable[int] = CURVE_COUNTS, ran: Runs | None = None,
                      split: Split | None = None) -> tuple[list[Faithfulness], EdgeEffects]:
    """``faithfulness_by_count`` (none without ``attribution``) and ``edge_effects``, their patched runs in one
    batch (the Circuit page's curve and table: 8 rows and 20 cost less as one run of 28); ``split`` as
    ``score_edges`` takes it."""
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    graph = graph_of(subject.stack)
    sizes, curve = ([], []) if attribution is None else _curve_masks(graph, attribution, counts, subject.name)
    names, singles = _effect_masks(graph, edges, subject.name)
    values = _faithful(subject, ran, curve + singles, split)
    c, x = _ends(ran)
    return ([Faithfulness(subject.name, n, v, c, x) for n, v in zip(sizes, values, strict=False)],
            EdgeEffects(subject.name, c, x, {n: v - c for n, v in zip(names, values[len(sizes):], strict=True)}))


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
