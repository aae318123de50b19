"""The computation as a numbered sequence of steps, with the numbers it used.

Each ``Step`` holds the formula, the matrix of one head of one sequence, the shape of
the whole tensor, and the selected query's row, so a page can follow one token
through softmax(QKᵀ/√d_k + M)V and the multi-head split. Every number is read from
the run's intermediates (``AttentionResult.steps``), never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.core.attention import attention_steps
from attnviz.i18n import N_, _
from attnviz.run.result import AttentionResult

# The steps, in order, by their English names (``Step.key``).
STEP_KEYS = ("Embeddings X", "Queries of this head", "Keys of this head", "Values of this head", "Scores",
             "Scaled scores", "Masked scores", "Weights", "After dropout", "Head output", "Heads joined", "Output")


@dataclass
class Step:
    number: int
    title: str
    latex: str
    matrix: np.ndarray  # (rows, cols) for the chosen sequence/head; -inf where masked
    shape: tuple[int, ...]  # the whole tensor's shape
    rows: list[str]
    cols: list[str]
    row: np.ndarray  # the chosen query's row of ``matrix``
    explain: str
    per_head: bool = True  # False for X, the joined heads and the output
    query_side: bool = True  # rows are queries (False for K and V, whose rows are keys)
    key: str = ""  # the step's English name, stable across languages ("Weights", "Head output", ...)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).numpy()


def walkthrough(result: AttentionResult, seq: int = 0, head: int = 0, query: int = 0) -> list[Step]:
    result.require_complete()
    s, a = result.steps, result.steps.attention
    n, h, q = seq, head, query
    toks, keys = result.tokens[n], result.source_tokens[n]
    E = result.embeddings.shape[-1]
    D = s.q.shape[-1]
    dims_e = [str(i) for i in range(E)]
    dims_d = [str(i) for i in range(D)]
    x_kv_note = _(" (keys and values come from the source)") if result.is_cross else ""
    x_explain = (_("Each token's vector: the hidden state entering layer {layer} of {model}.").format(
        layer=result.layer, model=result.model_name) if result.pretrained else
        _("Each token's vector: hashed character n-grams plus the sinusoidal position."))
    raw = [
        ("Embeddings X", r"X \in \mathbb{R}^{L \times d_{model}}", result.embeddings, toks, dims_e, x_explain),
        ("Queries of this head", r"Q_h = X W_Q^{(h)\top} + b_Q^{(h)}", s.q, toks, dims_d,
         _("The three projections, split into heads: d_k = d_model / heads columns each.")),
        ("Keys of this head", r"K_h = X W_K^{(h)\top} + b_K^{(h)}", s.k, keys, dims_d,
         _("What each position offers to be matched against") + x_kv_note + "."),
        ("Values of this head", r"V_h = X W_V^{(h)\top} + b_V^{(h)}", s.v, keys, dims_d,
         _("What each position hands over when it is attended to.")),
        ("Scores", r"S = Q_h K_h^\top", a.scores, toks, keys,
         _("Dot product of every query with every key.")),
        ("Scaled scores", rf"S / \sqrt{{d_k}} = S / \sqrt{{{D}}}", a.scaled, toks, keys,
         _("Divided by √{D} = {root} so the spread does not grow with d_k.").format(D=D, root=f"{D ** 0.5:.3f}")),
        ("Masked scores", r"S / \sqrt{d_k} + M,\quad M_{ij} \in \{0, -\infty\}", a.masked, toks, keys,
         _("Blocked pairs become −∞ (shown blank), so softmax gives them exactly 0.")),
        ("Weights", r"A = \mathrm{softmax}(S / \sqrt{d_k} + M)", a.weights, toks, keys,
         _("Each row now sums to 1 (or is all zero if every key was blocked).")),
        ("After dropout", r"\tilde A = \mathrm{dropout}_p(A)", a.dropped, toks, keys,
         _("p = {p}: kept weights are divided by 1 − p; off by default.").format(p=result.dropout)),
        ("Head output", r"O_h = \tilde A V_h", a.output, toks, dims_d,
         _("Each query's weighted sum of the value rows.")),
    ]
    steps = []
    for i, (key, latex, t, rows, cols, explain) in enumerate(raw, 1):
        m = _np(t[n] if t.dim() == 3 else t[n, h])
        steps.append(Step(i, _(key), latex, m, tuple(t.shape), rows, cols, m[min(q, len(m) - 1)], explain,
                          per_head=t.dim() == 4, query_side=rows is toks, key=key))
    for key, latex, t, explain in (
        ("Heads joined", r"\mathrm{Concat}(O_1, \dots, O_H)", s.joined,
         _("The heads side by side: head {h} is columns {first}–{last}.").format(h=h, first=h * D,
                                                                                last=(h + 1) * D - 1)),
        ("Output", r"\mathrm{MultiHead}(X) = \mathrm{Concat}(O_1, \dots, O_H) W_O^\top + b_O", s.output,
         _("The joined heads mixed by the output projection.")),
    ):
        m = _np(t[n])
        steps.append(Step(len(steps) + 1, _(key), latex, m, tuple(t.shape), toks, dims_e, m[q], explain,
                          per_head=False, key=key))
    return steps


# The step names, marked for translation (walkthrough() translates them as it builds).
STEP_NAMES = (N_("Embeddings X"), N_("Queries of this head"), N_("Keys of this head"), N_("Values of this head"),
              N_("Scores"), N_("Scaled scores"), N_("Masked scores"), N_("Weights"), N_("After dropout"),
              N_("Head output"), N_("Heads joined"), N_("Output"))


def weighted_sum_terms(result: AttentionResult, seq: int, head: int, query: int) -> list[tuple[str, float]]:
    """The query's output as Σ_j a_j · v_j: (key token, weight) pairs, largest first."""
    w = result.steps.attention.dropped[seq, head, query]  # (S,)
    pairs = [(result.source_tokens[seq][j], float(w[j])) for j in range(w.shape[0])]
    return sorted(pairs, key=lambda p: -p[1])


def blocked_row_demo(scores: list[float] | None = None) -> dict[str, list[float]]:
    """Why a large negative number stands in for −∞, and why a fully masked row needs care.

    For one row whose keys are *all* blocked: softmax with −∞ gives NaN (0/0), with
    −1e9 it gives a uniform row (every blocked key gets weight 1/S: wrong, silently),
    and attnviz defines the row as zeros.
    """

    s = torch.tensor(scores or [1.2, -0.3, 2.5, 0.4])
    blocked = torch.zeros(1, len(s), dtype=torch.bool)  # (L=1, S): every key blocked
    with torch.no_grad():
        inf = torch.softmax(torch.full_like(s, float("-inf")) + 0 * s, -1)
        big = torch.softmax(s.masked_fill(torch.ones_like(s, dtype=torch.bool), -1e9), -1)
        # attnviz's own attention on the same row: q·kᵀ·scale = s with d_k = 1, q = 1, k = s.
        ours = attention_steps(torch.ones(1, 1), s.view(-1, 1), torch.eye(len(s)), blocked, scale=1.0)
    return {"scores": s.tolist(), "-inf": inf.tolist(), "-1e9": big.tolist(),
            "attnviz": ours.weights[0].tolist()}
