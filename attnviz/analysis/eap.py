"""Edge attribution patching: which edges of the model's graph carry the answer (EAP, Syed et al.
2023; EAP-IG, Hanna et al. 2024), and how much of the answer a set of edges keeps (faithfulness).
The definitions are hannamw/EAP-IG's as circuitkit 0.2.0 ships them (read from its source:
``circuitkit/backends/eap/attribute.py``: ``get_scores_eap``, ``get_scores_eap_ig``,
``get_scores_ig_activations``; ``eap_utils.make_hooks_and_matrices``; ``graph.py``; ``evaluate.py``:
``evaluate_graph``), on a model in parts (``attnviz.models.stacks``), through a subject
(``attnviz.analysis.subjects``).

**The graph** (``graph.py``, ``Graph.from_model``). Senders, in the order they write the stream:
``input``, then per layer ``a{l}.h{h}`` (each head's output z_h · W_O^h, TransformerLens's
``attn.hook_result``) and ``m{l}`` (the MLP's output, ``hook_mlp_out``). Receivers: per layer each
head's query, key and value input apart (``a{l}.h{h}<q>``, ``<k>``, ``<v>``: TransformerLens's
``hook_q_input`` … with ``use_split_qkv_input``), ``m{l}`` (``hook_mlp_in``) and ``logits`` (the stream
into the final norm). An edge u → v for every sender that writes before v reads: a head reads
``input`` and every node of the layers below; an MLP also reads its own layer's heads, except where
attention and MLP sit side by side on one stream (GPT-NeoX's parallel residual, EAP-IG's
``parallel_attn_mlp``); the logits read every node. Named as EAP-IG names them: ``input->a0.h3<k>``,
``a0.h3->a1.h0<v>``, ``a1.h0->m1``, ``m1->logits``.

- The attention's output bias b_O is no node's: TransformerLens's ``hook_result`` is z_h · W_O^h without
  it (``attn_out`` = Σ_h result_h + b_O), and it is the same on both runs, so it cancels in every
  activation difference below. The MLP's output keeps its bias (``hook_mlp_out``), which cancels too.
- ``input`` is the stream into layer 0. circuitkit hooks ``hook_embed`` (the token embedding alone);
  the prompts have one length, so the position embedding GPT-2 adds is the same on both runs: the
  differences, the gradients and the interpolations below are the same either way.
- A grouped-query model (LLaMA's shared KV heads): EAP-IG needs TransformerLens's
  ``ungroup_grouped_query_attention`` (circuitkit refuses the model otherwise), which repeats each KV
  head's k and v weights for every query head that reads it. So ``a{l}.h{h}<k>`` and ``<v>`` are query
  head h's own key and value input, made through its KV head's weights and read by head h alone; the
  other query heads of the group read their own copies. The gradient into ``a1.h0<k>`` is the one that
  reaches the stream through head 0's scores only, not through the whole group's.

**The scores** (``make_hooks_and_matrices``: the activation difference is what the corrupted run's
forward hooks add minus what the clean run's subtract; ``gradient_hook`` sums
``activation_difference · gradient`` over batch, positions and width)::

    score(u -> v) = Σ_positions (z_u(corrupted) − z_u(clean)) · ∂m/∂(v's input)

with m the metric of ``patching.metric`` (logit[answer] − logit[wrong] at the last position, or the
answer's log-probability there). The sign is kept: an edge whose corruption lowers the metric scores
negative. The gradient is taken at:

- ``eap``: the clean run (``get_scores_eap``).
- ``eap-ig-inputs``: the runs whose input is corrupted + (k/steps)(clean − corrupted), k = 1 … steps
  (``get_scores_eap_ig``: the last point is the clean run), averaged. Integrated gradients' completeness
  holds for ``input``: the sum of its edges' scores is Δinput · (mean gradient of m at the stream into
  layer 0), which tends to m(corrupted) − m(clean) as steps grow (a right Riemann sum; tested).
- ``eap-ig-activations``: for each node group in EAP-IG's list (``input``, each layer's heads together,
  each MLP) and each k = 1 … steps, the clean run with that group's output replaced by the constant
  (k/steps) clean + (1 − k/steps) corrupted (``output_interpolation_hook``: no gradient passes through a
  replaced group), every edge's gradient read on each such run, averaged over all (group, k) runs
  (``get_scores_ig_activations`` divides by their number). Every edge is scored on every run, not only
  the interpolated group's: as the source does.

**Faithfulness** (``evaluate_graph`` with ``intervention="patching"``): the clean run in which each
receiver reads its input as this run computes it plus, for every edge into it outside the circuit,
z_u(corrupted) − z_u(this run): every edge outside carries its sender's corrupted activation, every
edge inside the sender's activation as the patched run computes it. With every edge kept it is the
clean run; with none, the corrupted one. ``evaluate_graph`` first prunes nodes with no path from
``input`` or to ``logits``: that changes nothing here (a node none of whose inputs is kept computes
its corrupted output; a node none of whose outputs is kept is read by nobody), so it is not done.

How it runs: the clean and the corrupted prompt through the model as it is, one batch of two (checked
as ``patching.runs`` checks them; every node's activation, and the arguments each layer gets, its
rotary positions), then the model
again, split: each layer's heads each make their q, k and v from a stream of their own (the stream
plus a zero delta per receiver input, so the gradient into each receiver is its own; a value's head
through its KV head's weights), through the layer's own norm, rotation, causal softmax and W_O per
head, then the MLP and the final norm as the model's own modules. One backward pass gives every
receiver's gradient; every edge's score is then one product of the (senders × positions·width)
differences with the (positions·width × receivers) gradients for each layer's receivers, not a loop
over edges. The split run is checked against the model's own logits (a model whose attention is
not this, Qwen3's normed q and k, is refused). The integration points are batched
``PATCH_BATCH_TOKENS`` tokens at a time.

May import: attnviz.analysis, attnviz.limits, attnviz.models.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from attnviz import limits
from attnviz.analysis.edgegraph import Split, graph_of
from attnviz.analysis.patching import Runs, metric
from attnviz.analysis.subjects import Subject, answer_ids, spelled_answer, two_prompts
from attnviz.models.stacks import Trace

METHODS = ("eap", "eap-ig-inputs", "eap-ig-activations")
DEFAULT_STEPS = 5
# Kept edges along a faithfulness curve (then every edge), as EAP-IG's papers plot them.
CURVE_COUNTS = (1, 2, 5, 10, 20, 50, 100, 200)
DEFINITION = ("score(u→v) = Σ over positions of (z_u(corrupted) − z_u(clean)) · ∂metric/∂(v's input), the gradient "
              "at the clean run (EAP) or averaged over points between the runs (EAP-IG): hannamw/EAP-IG's definitions")


def check_method(method: str) -> str:
    m = str(method).lower()
    if m not in METHODS:
        raise ValueError(f"method must be 'eap', 'eap-ig-inputs' or 'eap-ig-activations'; got {method!r}.")
    return m


def check_steps(steps) -> int:
    lo, hi = limits.EAP_STEPS
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not lo <= int(steps) <= hi:
        raise ValueError(f"steps must be a whole number from {lo} to {hi} (EAP_STEPS: the points EAP-IG averages the "
                         f"gradient over); got {steps!r}.")
    return int(steps)


def batches(n: int, L: int) -> list[range]:
    size = max(1, limits.PATCH_BATCH_TOKENS // L)
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def _gradients(split: Split, x0: torch.Tensor, out, answer: int, wrong: int | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(every receiver's gradient of the metric summed over the rows (receivers, L, E), the logits (B, V)):
    one forward and one backward pass of the rows ``x0`` (B, L, E), a zero delta on each receiver's input."""
    deltas = []

    def into(_key, streams, _acts):
        d = torch.zeros(streams.shape, requires_grad=True)  # (k, B, L, E): a receiver's own input, so its own gradient
        deltas.append(d)
        return streams + d

    with torch.enable_grad():
        logits, _acts = split.run(x0, into, out)
        grads = torch.autograd.grad(metric(logits, answer, wrong).sum(), deltas, allow_unused=True)
    return torch.cat([(torch.zeros_like(d) if gr is None else gr).sum(1) for d, gr in zip(deltas, grads, strict=True)]
                     ), logits.detach()


@dataclass
class EdgeAttribution(Mapping):
    """Every edge's score, by name (a mapping name → float, graph order), as a table and ranked."""

    model: str
    method: str
    steps: int | None
    answer: str
    wrong: str | None
    clean: float  # the metric on the clean run
    corrupted: float
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    senders: list[str]
    receivers: list[str]
    matrix: np.ndarray  # (senders, receivers) float64, NaN where there is no edge
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        at = np.argwhere(~np.isnan(self.matrix.T))  # receivers in order, senders in order within each
        self._at = at  # (edges, 2): each edge's (receiver, sender)
        self._scores = self.matrix.T[~np.isnan(self.matrix.T)]  # (edges,) in the same order
        self._order = np.argsort(-np.abs(self._scores), kind="stable")  # (edges,) largest |score| first

    @cached_property
    def _names(self) -> list[str]:  # named when first asked (123,211 names on SmolLM2 cost 0.1 s)
        return [self._name(k) for k in range(len(self._at))]

    @cached_property
    def _index(self) -> dict[str, int]:
        return {n: k for k, n in enumerate(self._names)}

    def _name(self, k: int) -> str:
        j, i = self._at[k]
        return f"{self.senders[i]}->{self.receivers[j]}"

    def __getitem__(self, name: str) -> float:
        try:
            return float(self._scores[self._index[name]])
        except KeyError:
            raise KeyError(f"{name!r} is not an edge of {self.model}'s graph.") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._at)

    def ranked(self) -> list[str]:
        """Every edge's name by |score|, largest first (graph order among equals)."""
        return [self._names[k] for k in self._order]

    def kept_top(self, n: int) -> np.ndarray:
        """(senders, receivers) bool: the ``n`` edges of largest |score| (``ranked``'s first ``n``), without
        naming them (a faithfulness curve's masks over 123,211 edges parsed every name once per point)."""
        order = self._order[:max(0, int(n))]
        kept = np.zeros(self.matrix.shape, dtype=bool)
        kept[self._at[order, 1], self._at[order, 0]] = True
        return kept

    def top(self, n: int = 10) -> list[tuple[str, float]]:
        """The ``n`` edges of largest |score|, as (name, signed score)."""
        return [(self._name(k), float(self._scores[k])) for k in self._order[:max(0, int(n))]]

    def table(self) -> list[dict]:
        """One row per edge, graph order: edge, sender, receiver, input ("q", "k", "v" or None), score."""
        rows = []
        for name, score in zip(self._names, self._scores, strict=True):
            sender, receiver = name.split("->")
            node, _, rest = receiver.partition("<")
            rows.append({"edge": name, "sender": sender, "receiver": node, "input": rest[:-1] or None,
                         "score": float(score)})
        return rows

    def to_dict(self) -> dict:
        return {"model": self.model, "method": self.method, "steps": self.steps, "answer": self.answer,
                "wrong": self.wrong, "definition": DEFINITION, "clean": self.clean, "corrupted": self.corrupted,
                "clean_tokens": self.clean_tokens, "corrupted_tokens": self.corrupted_tokens,
                "scores": {n: float(s) for n, s in zip(self._names, self._scores, strict=True)}}


def _one(trace: Trace, i: int) -> Trace:
    """Sequence ``i`` of a batched run, as a run of its own (N = 1)."""
    def rows(xs):
        return [None if x is None else x[i:i + 1] for x in xs]
    return Trace(rows(trace.resid_pre), rows(trace.z), rows(trace.attn_out), rows(trace.mlp_out),
                 trace.resid_final[i:i + 1], trace.logits[i:i + 1], calls=trace.calls)


def both_runs(subject: Subject, clean, corrupted, answer, wrong, ran: Runs | None) -> Runs:
    """Both prompts through the model in one batch (no attention weights kept), checked and read as
    ``patching.runs`` checks and reads them (its messages for bad prompts and tokens)."""
    if ran is not None:
        return ran
    a_ids, b_ids = two_prompts(subject, clean, corrupted)
    a, w = answer_ids(subject, answer, wrong)
    both = subject.stack.run(torch.tensor([a_ids, b_ids]))  # one pass of two rows costs less than two passes
    return Runs(a_ids, b_ids, a, w, _one(both, 0), _one(both, 1))


def score_edges(subject: Subject, clean, corrupted, *, answer, wrong=None, method: str = "eap",
                     steps: int = DEFAULT_STEPS, ran: Runs | None = None, split: Split | None = None
                     ) -> EdgeAttribution:
    """Every edge's score between two prompts (texts or ids of one length, as ``patching.patch`` reads
    them) by ``method`` ("eap", "eap-ig-inputs", "eap-ig-activations"; ``steps`` points for the last two):
    see the module doc. ``ran``: both runs where they were made already; ``split``: the split run of
    ``ran.corrupted``'s length where one is made already (``Split``)."""
    method, steps = check_method(method), check_steps(steps)
    ran = both_runs(subject, clean, corrupted, answer, wrong, ran)
    stack, a, w = subject.stack, ran.answer, ran.wrong
    graph = graph_of(stack)
    split = split or Split(stack, graph, ran.corrupted)
    acts_clean, acts_corrupted = split.senders(ran.clean), split.senders(ran.corrupted)  # (L, F, E) each
    x_clean, x_corrupted = ran.clean.resid_pre[0][0], ran.corrupted.resid_pre[0][0]  # (L, E)
    L = x_clean.shape[0]
    if method == "eap":
        rows = [(None, 1.0)]
    elif method == "eap-ig-inputs":
        rows = [(("input", 0), k / steps) for k in range(1, steps + 1)]
    else:
        rows = [(key, k / steps) for key in [("input", 0)] + [k for k in graph.keys() if k[0] != "logits"]
                for k in range(1, steps + 1)]
    groups = {}  # a sender group's columns among the senders
    for key in graph.keys():
        if key[0] in ("a", "m"):
            lo = 1 + key[1] * graph.per_layer + (graph.heads if key[0] == "m" else 0)
            groups[key] = slice(lo, lo + (graph.heads if key[0] == "a" else 1))
    groups[("input", 0)] = slice(0, 1)
    total = torch.zeros(len(graph.receivers), L, acts_clean.shape[-1])  # (R, L, E)
    checked = False
    for chunk in batches(len(rows), L):
        part = [rows[i] for i in chunk]
        alpha = torch.tensor([al for _key, al in part])  # (B,)
        if method == "eap-ig-inputs":
            x0 = x_corrupted + alpha[:, None, None] * (x_clean - x_corrupted)  # (B, L, E)
        else:
            x0 = x_clean.expand(len(part), L, -1)
        out = None
        if method == "eap-ig-activations":
            def out(key, outputs, part=part, alpha=alpha):  # (B, L, k, E): the group's rows held at their points
                mine = torch.tensor([k == key for k, _al in part])  # (B,)
                if not mine.any():
                    return outputs
                s = groups[key]
                al = alpha[:, None, None, None]
                held = al * acts_clean[None, :, s] + (1 - al) * acts_corrupted[None, :, s]  # (B, L, k, E)
                return torch.where(mine[:, None, None, None], held, outputs)
        grads, logits = _gradients(split, x0, out, a, w)
        total += grads
        clean_row = next((i for i, (_k, al) in enumerate(part) if al == 1.0), None)
        if not checked and clean_row is not None:
            split.check(logits[clean_row], ran.clean)
            checked = True
    mean = total / len(rows)  # (R, L, E)
    diff = (acts_corrupted - acts_clean).double()  # (L, F, E): corrupted minus clean, EAP-IG's activation difference
    mean = mean.double()
    scores = np.full((len(graph.senders), len(graph.receivers)), np.nan)
    for key in graph.keys():  # each group of receivers against the senders it reads only
        prev, cols = graph.reads(key)
        scores[:prev, cols] = torch.einsum("lfe,rle->fr", diff[:, :prev], mean[cols]).numpy()
    return EdgeAttribution(subject.name, method, None if method == "eap" else steps,
                           spelled_answer(subject, answer, a), None if w is None else spelled_answer(subject, wrong, w),
                           float(metric(ran.clean.logits, a, w)[0]), float(metric(ran.corrupted.logits, a, w)[0]),
                           subject.spelled(ran.clean_ids), subject.spelled(ran.corrupted_ids), graph.senders,
                           graph.receivers, scores)
