"""Head scores for any attention (``attnviz.inputs.handover``'s normal form) and attention flow.

``head_scores(attention, tokens)`` -> {score name: (layers, heads) array}, batch row 0,
over real (non-pad) positions. A position is a pad when its token is a pad string
(``PAD_TOKENS``) or its query row is all zero (a fully masked query); pad rows and keys
are dropped before scoring. Each score is the mean over the query rows it applies to.

How these differ from TransformerLens's ``head_detector`` (transformer_lens/head_detector.py):
there a score compares the pattern with a 0/1 detection pattern, as
sum(A ∘ D) / sum(A) over the lower triangle (mean over rows of the mass on D), optionally
excluding BOS and the current token; here each score is the plain mean of the named
weight(s), no BOS/current-token exclusion, and ``first_token``, ``self`` and ``entropy``
have no TransformerLens counterpart.

``attention_flow(attention)`` -> (1, L, L): Abnar & Zuidema's flow as their code computes it
(samiraabnar/attention_flow, ``attention_graph_util.compute_flows``): the max-flow over the
layered graph with capacities Â = rownorm(½·mean_h A + ½·I) (as ``heads.rollout``) from each
last-layer position (row) to each input token (column), each row then divided by its sum: the
share of the flow. ``raw=True`` keeps the max-flow values; ``every_layer=True`` gives every
layer's rows (layers, L, L), as their ``convert_adjmat_tomats`` does. Bounded by
``MAX_FLOW_TOKENS``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnviz.analysis.heads import diagonal_score, row_entropy
from attnviz.i18n import N_
from attnviz.inputs.handover import normalise
from attnviz.limits import MAX_FLOW_TOKENS

SCORES = ("previous_token", "first_token", "self", "duplicate_token", "induction", "entropy")
PAD_TOKENS = frozenset({"[PAD]", "<pad>", "<|pad|>", "<PAD>"})


def _real(att) -> tuple[torch.Tensor, list[str]]:
    """Attention -> ((layers, H, n, n) float32 over the real positions, their tokens).

    float32, as the weights come (the notebook's normal form): at 2048 tokens × 16 heads a
    float64 copy was 0.5 GB more, and the scores are means, summed in float64 (``head_scores``)."""
    w = torch.as_tensor(np.asarray(att.weights), dtype=torch.float32)  # (layers, H, L, S)
    if att.L != att.S:
        raise ValueError(f"head scores need self-attention (L = S); got L={att.L}, S={att.S}.")
    empty = (w.abs().sum(-1) == 0).all(0).all(0)  # (L,) a query row masked in every head
    keep = [i for i, t in enumerate(att.tokens) if t not in PAD_TOKENS and not bool(empty[i])]
    if len(keep) == att.L:  # nothing to drop: no copy
        return w, list(att.tokens)
    idx = torch.tensor(keep, dtype=torch.long)
    return w[:, :, idx][:, :, :, idx], [att.tokens[i] for i in keep]


def _matched(w: torch.Tensor, tokens: list[str], shift: int) -> torch.Tensor:
    """(layers, H, n, n) -> (layers, H): mean over rows i with a match of Σ_{j<i−shift, t_j=t_i} a[i, j+shift]."""
    n = len(tokens)
    codes = {t: c for c, t in enumerate(dict.fromkeys(tokens))}
    ids = torch.tensor([codes[t] for t in tokens])  # (n,) one code per distinct token
    # (n, n): t_j = t_i for the keys j < i − shift (a Python loop over i and j took seconds at 2048 tokens)
    same = (ids[:, None] == ids[None, :]) & torch.ones(n, n, dtype=torch.bool).tril(-1 - shift)
    m = torch.zeros(n, n, dtype=w.dtype)  # (n, n) 1 where key j+shift is scored for row i
    m[:, shift:] = same[:, :n - shift].to(w.dtype)
    rows = m.sum(-1) > 0  # (n,)
    if not bool(rows.any()):
        return torch.zeros(w.shape[:2], dtype=w.dtype)
    return (w * m).sum(-1).double()[..., rows].mean(-1)  # (layers, H), each row's sum averaged in float64


def head_scores(attention, tokens=None) -> dict[str, np.ndarray]:
    """{score: (layers, heads) float64} for batch row 0 over the real positions.

    - ``previous_token``: mean of A[i, i−1] over i ≥ 1 (TransformerLens: previous-token
      detection pattern, mass on the sub-diagonal over all rows; the same up to its row 0);
    - ``first_token``: mean of A[i, 0];
    - ``self``: mean of A[i, i];
    - ``duplicate_token``: Σ A[i, j] over j < i with tokens[j] == tokens[i], mean over the i
      that have such a j (TransformerLens averages over every row, counting rows without a
      duplicate as 0);
    - ``induction``: Σ A[i, j+1] over j < i−1 with tokens[j] == tokens[i], mean over the i that
      have such a j (TransformerLens: the duplicate pattern shifted one key right, so it also
      counts j = i−1, the query's own key, when tokens[i−1] == tokens[i]; averaged over every
      row, as its default "mul" measure, Σ A∘D / Σ A, does);
    - ``entropy``: row entropy (nats) / ln(visible keys), over rows with more than one
      visible key; visible keys are j ≤ i when every head's pattern is causal (no weight
      above the diagonal), all real keys otherwise (no TransformerLens counterpart).
    """
    att = normalise(attention, tokens)
    w, toks = _real(att)  # (layers, H, n, n)
    layers, heads, n, _ = w.shape
    zero = np.zeros((layers, heads))
    if n == 0:
        return {s: zero.copy() for s in SCORES}
    causal = bool((torch.triu(w, diagonal=1).abs() <= 1e-9).all())
    visible = torch.arange(1, n + 1, dtype=torch.float64) if causal else torch.full((n,), float(n), dtype=torch.float64)
    logv = torch.log(visible)  # (n,)
    ent = row_entropy(w).double()  # (layers, H, n)
    ok = logv > 0
    entropy = (ent[..., ok] / logv[ok]).mean(-1) if bool(ok.any()) else torch.zeros(layers, heads, dtype=torch.float64)
    out = {
        "previous_token": diagonal_score(w, -1),
        "first_token": w[..., :, 0].double().mean(-1),
        "self": diagonal_score(w, 0),
        "duplicate_token": _matched(w, toks, 0),
        "induction": _matched(w, toks, 1),
        "entropy": entropy,
    }
    return {k: v.numpy().astype(np.float64) for k, v in out.items()}


def flow_capacities(weights: np.ndarray) -> np.ndarray:
    """(layers, H, L, L) -> (layers, L, L): Â = rownorm(½·mean_h A + ½·I) per layer."""
    w = np.asarray(weights, dtype=np.float64)
    L = w.shape[-1]
    hat = 0.5 * w.mean(1) + 0.5 * np.eye(L)  # (layers, L, L)
    return hat / hat.sum(-1, keepdims=True)


def _max_flow(cap: np.ndarray, src: int, sink: int) -> float:
    """Edmonds–Karp on a dense capacity matrix (V, V)."""
    V = cap.shape[0]
    res = cap.copy()
    total = 0.0
    while True:
        parent = np.full(V, -1)
        parent[src] = src
        queue = [src]
        for u in queue:
            for v in np.nonzero((res[u] > 1e-15) & (parent < 0))[0]:
                parent[v] = u
                queue.append(int(v))
            if parent[sink] >= 0:
                break
        if parent[sink] < 0:
            return total
        f, v = math.inf, sink
        while v != src:
            f = min(f, res[parent[v], v])
            v = parent[v]
        v = sink
        while v != src:
            res[parent[v], v] -= f
            res[v, parent[v]] += f
            v = parent[v]
        total += f


def attention_flow(attention, tokens=None, progress=None, *, raw: bool = False,
                   every_layer: bool = False) -> np.ndarray:
    """(1, L, L): the share of the flow from last-layer position i (row) that reaches input
    token j (column), each row summing to 1 (Abnar & Zuidema's ``compute_flows``).

    Nodes are (layer ℓ, position p), ℓ = 0 (inputs) … layers; an edge (ℓ+1, i) -> (ℓ, j)
    has capacity Â_ℓ[i, j]. ``raw``: the max-flow values themselves (rows sum to more than
    1). ``every_layer``: (layers, L, L), row i of entry ℓ − 1 being node (ℓ, i)'s flows to the
    inputs. Refuses L > ``MAX_FLOW_TOKENS``. ``progress(done, total)`` is called after each row.
    """
    att = normalise(attention, tokens)
    if att.L != att.S:
        raise ValueError(f"attention flow needs self-attention (L = S); got L={att.L}, S={att.S}.")
    if att.L > MAX_FLOW_TOKENS:
        raise ValueError(f"attention flow is limited to {MAX_FLOW_TOKENS} tokens; this input has {att.L}.")
    hat = flow_capacities(att.weights)  # (layers, L, L)
    layers, L, _ = hat.shape
    V = (layers + 1) * L
    cap = np.zeros((V, V))
    for ell in range(layers):
        top, bottom = (ell + 1) * L, ell * L
        cap[top:top + L, bottom:bottom + L] = hat[ell]
    shown = range(1, layers + 1) if every_layer else range(layers, layers + 1)
    out = np.zeros((len(shown), L, L))  # (layers shown, L, L)
    total = len(shown) * L
    for row, ell in enumerate(shown):
        # Flow from a node of layer ℓ only runs down: the graph up to layer ℓ is all it needs.
        below = cap[:(ell + 1) * L, :(ell + 1) * L]
        for i in range(L):
            for j in range(L):
                out[row, i, j] = _max_flow(below, ell * L + i, j)
            if not raw:
                out[row, i] /= out[row, i].sum()  # compute_flows: flow_values[u] /= flow_values[u].sum()
            if progress is not None:
                progress(row * L + i + 1, total)
    return out


# A head's role is its strongest score that passes the score's threshold (declared once here,
# stated on the page). Entropy is not a role; "first_token" is the attention-sink role.
ROLE_THRESHOLDS = {"previous_token": 0.4, "first_token": 0.5, "self": 0.5,
                   "duplicate_token": 0.3, "induction": 0.3}
# Roles that a probe (seeded random tokens repeated once) must show; never scored on the user's text.
PROBE_ROLES = ("duplicate_token", "induction")
# What each role's score measures, in words, for the model view's one-line legend (translated where shown).
ROLE_WORDS = {"previous_token": N_("on the previous token"), "first_token": N_("on the first token (a sink)"),
              "self": N_("on itself"), "duplicate_token": N_("on earlier copies of its token"),
              "induction": N_("on the token after an earlier copy")}
# Short labels drawn on the model view (translated where shown).
ROLE_LABELS = {"previous_token": N_("prev"), "first_token": N_("sink"), "self": N_("self"),
               "duplicate_token": N_("dup"), "induction": N_("induction")}


def head_roles(scores: dict[str, np.ndarray], probe_scores: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """(layers, heads) array of role names ("" for none): the highest score/threshold ratio ≥ 1.

    Roles in ``PROBE_ROLES`` are read from ``probe_scores`` only (skipped when it is None).
    """
    shape = scores["previous_token"].shape
    best = np.zeros(shape)
    out = np.full(shape, "", dtype=object)
    for role, t in ROLE_THRESHOLDS.items():
        src = probe_scores if role in PROBE_ROLES else scores
        if src is None:
            continue
        ratio = np.asarray(src[role]) / t  # (layers, heads)
        win = (ratio >= 1) & (ratio > best)
        out[win] = role
        best = np.where(win, ratio, best)
    return out
