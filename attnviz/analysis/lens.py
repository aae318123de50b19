"""The logit lens and the tuned lens: what each point of a causal LM's residual stream would
predict if the model stopped there (nostalgebraist 2020, "interpreting GPT: the logit lens";
Belrose et al. 2023, "Eliciting Latent Predictions from Transformers with the Tuned Lens"), on a
model in parts (``attnviz.models.stacks``) through a subject (``attnviz.analysis.subjects``).

**Points**, in the order of TransformerLens 4.3's ``accumulated_resid(incl_mid=True)`` (read from
its source, ``ActivationCache.accumulated_resid``): the embeddings (the stream into layer 0); for
each layer ℓ its middle, resid_pre[ℓ] + attn_out[ℓ] (the stream its MLP reads; only where the layer
has an MLP after its attention on one stream: not GPT-NeoX's attention and MLP side by side, which
TransformerLens gives no ``resid_mid`` either, not Watch it learn's attention-only model), and its
end, resid_pre[ℓ + 1] (the stream into the final norm for the last layer).

**Logits** at a point r (E,), with the final norm's weight w and bias b, c the centring (LayerNorm
only; RMSNorm divides without centring) and the unembedding W_U (V, E), b_U:

- ``per-layer``: W_U (w ⊙ c(r) / s(r) + b) + b_U, s(r) the norm's scale recomputed on r itself:
  TransformerLens 4.3's ``accumulated_resid(apply_ln=True)`` (``apply_ln_to_stack(recompute_ln=True)``)
  then the unembedding; the usual logit lens.
- ``final-scale``: the same with s the final stream's own scale at that position (the final norm's
  divisor on the whole stream, as ``apply_ln_to_stack`` divides by the final layer's cached scale).
  Linear in r, so the step from one point to the next is exactly the direct logit attribution of
  the parts added between them (``attnviz.analysis.patching``: a layer's heads and attention biases,
  then its MLP). Only this form adds up so.
- a **tuned lens** (``attnviz.analysis.tunedlens``): per-layer on h + A_ℓ h + b_ℓ, translator ℓ for
  the stream into layer ℓ (the embeddings are ℓ = 0), as tuned-lens 0.2.0's ``TunedLens.forward``
  (``transform_hidden``, then its ``Unembed``: the final norm and W_U). It has no translator for a
  middle, nor for the last point, which is the model's own.

The last point of every form is the model's own distribution. **Numbers** at each point and
position, q = softmax(logits): the top-k tokens and their probabilities; the entropy −Σ q log q
(nats); KL(p ‖ q) = Σ p (log p − log q), p the model's own distribution at that position (the tuned
lens's training loss); for an answer token, its logit in TransformerLens's centred convention
(``center_unembed``: logit[answer] − the mean logit over the vocabulary; with a wrong token,
logit[answer] − logit[wrong]), its probability, and its rank (how many tokens have a larger logit:
0 is the top).

**A step** (``lens_step``): final-scale's answer logit at one point minus the point before, at one
position, split into the parts added between them by direct logit attribution
(``attnviz.analysis.patching``, on the position's prefix: a causal model's stream there is the
prefix's): into a layer's middle, its heads and its attention biases; into its end from its middle,
its MLP; into its end without a middle, all three; the embeddings point's own value is the
embeddings' part and the final norm's and unembedding's biases. The parts sum to the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz import limits
from attnviz.analysis.patching import logit_attribution_of
from attnviz.analysis.subjects import Subject, answer_ids, spelled_answer
from attnviz.i18n import _
from attnviz.models.stacks import Trace, Unembedding

MODES = ("final-scale", "per-layer")
LENS_BOUND = (limits.MAX_LENS_TOKENS, "the logit lens takes at most {n} (MAX_LENS_TOKENS: it reads every position at "
                                      "every point through the whole unembedding)")
DEFINITIONS = {
    "final-scale": "each point's stream, centred (LayerNorm) and divided by the final stream's norm scale at that "
                   "position, times the norm's weight plus its bias, through W_U and b_U: the steps between points "
                   "are the direct logit attribution of what was added between them",
    "per-layer": "each point's stream through the final norm recomputed on it (its own mean and scale), then W_U and "
                 "b_U: TransformerLens's accumulated_resid(apply_ln=True) then the unembedding",
    "tuned": "each point's stream h translated to h + A h + b by its layer's translator, then the final norm "
             "recomputed on it and W_U and b_U: tuned-lens's TunedLens.forward",
}
NUMBERS = ("top tokens and probabilities of softmax(logits); entropy −Σ q log q in nats; KL(p ‖ q) = Σ p (log p − "
           "log q), p the model's own distribution at that position; the answer's logit centred (logit[answer] − the "
           "mean logit; logit[answer] − logit[wrong] with a wrong token), its probability and its rank (tokens with "
           "a larger logit: 0 is the top)")


@dataclass
class Point:
    """One point of the residual stream: its name, its stream (L, E), and the translator of a tuned
    lens that reads it (the layer it goes into; None for a middle and for the last point)."""

    name: str
    stream: torch.Tensor
    translator: int | None


def has_middle(stack, layer: int) -> bool:
    """A stream after ``layer``'s attention alone exists: it has an MLP, which reads that stream."""
    return stack.mlp[layer] is not None and not getattr(stack, "parallel", False)


def points_of(stack, trace: Trace, mid: bool = True) -> list[Point]:
    """Every point of ``trace``'s first sequence, in TransformerLens's ``accumulated_resid`` order."""
    n = stack.layers
    out = [Point("embeddings", trace.resid_pre[0][0], 0)]
    for layer in range(n):
        if mid and has_middle(stack, layer):
            out.append(Point(f"layer {layer} middle", trace.resid_pre[layer][0] + trace.attn_out[layer][0], None))
        end = trace.resid_pre[layer + 1][0] if layer + 1 < n else trace.resid_final[0]  # (L, E)
        out.append(Point(f"layer {layer} end", end, layer + 1 if layer + 1 < n else None))
    return out


def unembed(u: Unembedding, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """(R, V) logits of streams ``x`` (R, E) through the final norm with divisor ``scale`` (R, 1), then W_U and b_U."""
    if u.kind == "layer":
        x = x - x.mean(-1, keepdim=True)
    x = x / scale
    if u.weight is not None:
        x = x * u.weight
    if u.bias is not None:
        x = x + u.bias
    logits = x @ u.w_u.T  # (R, V)
    return logits if u.b_u is None else logits + u.b_u


def point_inputs(stack, trace: Trace, *, mode: str, lens=None, mid: bool = True,
                 positions: list[int] | None = None) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(point name, stream (n, E) at ``positions``, the divisor its final norm uses (n, 1)) for every point (a
    tuned ``lens``: only the points it reads, and the last, translated), one point at a time: what
    ``unembed`` reads."""
    u = stack.unembedding()
    final = trace.resid_final[0]  # (L, E)
    at = list(range(final.shape[0])) if positions is None else positions
    final_scale = u.scale(final[at])  # (n, 1)
    points = points_of(stack, trace, mid and lens is None)
    with torch.no_grad():
        for i, p in enumerate(points):
            x = p.stream[at]  # (n, E)
            if lens is not None and i < len(points) - 1:  # the last point is the model's own
                x = lens.translate(x, p.translator)
            yield p.name, x, final_scale if mode == "final-scale" and lens is None else u.scale(x)


def point_logits(stack, trace: Trace, *, mode: str, lens=None, mid: bool = True,
                 positions: list[int] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """(point name, logits (n, V) at ``positions``, every one by default) for every point (see ``point_inputs``)."""
    u = stack.unembedding()
    for name, x, scale in point_inputs(stack, trace, mode=mode, lens=lens, mid=mid, positions=positions):
        yield name, unembed(u, x, scale)


@dataclass
class LensResult:
    """Every point's reading of a text (see the module doc for the definitions)."""

    model: str
    mode: str  # "final-scale", "per-layer" or "tuned"
    tokens: list[str]  # the text's tokens, as the tokenizer spells them
    positions: list[int]  # the positions read (every one by default)
    points: list[str]  # their names, in TransformerLens's accumulated_resid order
    top_ids: np.ndarray  # (points, positions, k) int64
    top_tokens: list  # (points, positions, k) as the tokenizer spells them
    top_probs: np.ndarray  # (points, positions, k)
    entropy: np.ndarray  # (points, positions), nats
    kl: np.ndarray  # (points, positions): KL(the model's own ‖ this point's), nats
    answer: str | None = None
    wrong: str | None = None
    answer_logit: np.ndarray | None = None  # (points, positions): centred, or logit[answer] − logit[wrong]
    answer_prob: np.ndarray | None = None  # (points, positions)
    answer_rank: np.ndarray | None = None  # (points, positions) int64, 0: the top token
    lens: str | None = None  # the tuned lens's folder, or None
    notes: list[str] = field(default_factory=list)

    @property
    def definition(self) -> str:
        return DEFINITIONS[self.mode]

    def to_dict(self) -> dict:
        out = {"model": self.model, "mode": self.mode, "definition": self.definition, "numbers": NUMBERS,
               "tokens": self.tokens, "positions": self.positions, "points": self.points, "lens": self.lens,
               "top_ids": self.top_ids.tolist(), "top_tokens": self.top_tokens, "top_probs": self.top_probs.tolist(),
               "entropy": self.entropy.tolist(), "kl": self.kl.tolist(), "answer": self.answer, "wrong": self.wrong,
               "notes": self.notes}
        for name in ("answer_logit", "answer_prob", "answer_rank"):
            values = getattr(self, name)
            out[name] = None if values is None else values.tolist()
        return out


def _positions(given, n: int) -> list[int]:
    """``given`` (None: every one; an int or a list of ints, negative ones from the end) as positions
    0 … n − 1; ``ValueError`` naming one out of range."""
    if given is None:
        return list(range(n))
    items = [given] if isinstance(given, (int, np.integer)) else list(given)
    if not items:
        raise ValueError("positions is empty: give a position, a list of them, or None for every one.")
    out = []
    for p in items:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not -n <= int(p) < n:
            raise ValueError(f"Position {p!r} is out of range: the text has {n} tokens (positions 0 to {n - 1}, "
                             f"or −{n} to −1 from the end).")
        out.append(int(p) % n)
    return out


def _rows_per_chunk(vocabulary: int) -> int:
    """Rows of logits computed at once: each holds about 8 vectors of the vocabulary (its logits,
    log-probabilities, probabilities, the model's own, their products), within half the memory budget."""
    return max(1, limits.memory_budget_bytes() // 2 // (8 * 4 * vocabulary))


def read_points(stack, trace: Trace, *, mode: str, lens=None, mid: bool = True, k: int = 5,
                positions: list[int], answer: int | None = None, wrong: int | None = None) -> dict:
    """``LensResult``'s numbers: every point's top-k, entropy, KL to the model's own, and the answer's.

    Every point's rows go through the unembedding together, in chunks of as many rows as half the memory budget
    holds (``_rows_per_chunk``): read one point at a time, ten positions a product, the lens of SmolLM2's 61
    points took 4.5 × the plain batched lens (``bench/bench_lens.py --model``). The last point's rows are the
    model's own logits, exactly."""
    u = stack.unembedding()
    final = trace.resid_final[0][positions]  # (n, E)
    names, xs, scales = [], [], []
    for name, x, scale in point_inputs(stack, trace, mode=mode, lens=lens, mid=mid, positions=positions):
        names.append(name)
        xs.append(x)
        scales.append(scale)
    P, n = len(names), len(positions)
    X, S = torch.cat(xs), torch.cat(scales)  # (P·n, E), (P·n, 1): point by point, each its n positions
    column = torch.arange(P * n) % n  # (P·n,): each row's position
    top_ids, top_probs, entropy, kl, logit, prob, rank = [], [], [], [], [], [], []
    with torch.no_grad():
        own_logits = unembed(u, final, u.scale(final))  # (n, V)
        own = torch.log_softmax(own_logits, -1)  # (n, V): the model's own log p
        p_own = own.exp()  # (n, V)
        negentropy = torch.einsum("nv,nv->n", p_own, own)  # (n,): Σ p log p
        chunk = _rows_per_chunk(own.shape[-1])
        chunk = chunk // n * n or chunk  # whole points where they fit: the model's own rows then broadcast
        for i0 in range(0, P * n, chunk):
            rows = torch.arange(i0, min(i0 + chunk, P * n))  # (r,)
            z = unembed(u, X[rows], S[rows])  # (r, V)
            mine = rows >= (P - 1) * n  # the last point: the model's own logits
            if mine.any():
                z[mine] = own_logits[column[rows[mine]]]
            c = column[rows]  # (r,)
            logq = torch.log_softmax(z, -1)  # (r, V)
            q = logq.exp()
            entropy.append(-torch.einsum("rv,rv->r", q, logq))  # (r,)
            if len(rows) % n == 0 and i0 % n == 0:  # whole points: (m, n, V) against (n, V), no copy of p_own
                m = len(rows) // n
                kl.append((negentropy - torch.einsum("mnv,nv->mn", logq.view(m, n, -1), p_own)).reshape(-1))
            else:
                kl.append(negentropy[c] - torch.einsum("rv,rv->r", p_own[c], logq))  # (r,)
            top = logq.topk(k, -1)
            top_ids.append(top.indices)
            top_probs.append(top.values.exp())  # (r, k)
            if answer is not None:
                za = z[:, answer]  # (r,)
                # float32's mean (its sum is pairwise: within 1e-8 of float64's here, 50 × faster), and the rank
                # counted in float32 (exact below 2^24 tokens; a bool sum widens to int64, 5 × slower)
                base = z.mean(-1).double() if wrong is None else z[:, wrong].double()
                logit.append(za.double() - base)
                prob.append(q[:, answer])
                rank.append((z > za[:, None]).float().sum(-1).long())

    def grid(parts, dtype=np.float64):  # chunks of rows -> (points, positions)
        return torch.cat(parts).reshape(P, n, *parts[0].shape[1:]).numpy().astype(dtype)

    out = {"points": names, "top_ids": grid(top_ids, np.int64), "top_probs": grid(top_probs),
           "entropy": grid(entropy), "kl": grid(kl)}
    if answer is not None:
        out.update(answer_logit=grid(logit), answer_prob=grid(prob), answer_rank=grid(rank, np.int64))
    return out


def arrival(result: LensResult) -> tuple[int | None, bool]:
    """The first point at which the answer is the top token at the last position read, and whether it stays on
    top at every later point; (None, False) where it never is, or no answer was read."""
    if result.answer_rank is None:
        return None, False
    ranks = result.answer_rank[:, -1]  # (points,)
    top = np.flatnonzero(ranks == 0)
    return (None, False) if top.size == 0 else (int(top[0]), bool((ranks[top[0]:] == 0).all()))


def arrival_words(result: LensResult) -> str | None:
    """Where the answer first becomes the top token at the last position, in one sentence (None: no answer)."""
    first, stays = arrival(result)
    if result.answer is None:
        return None
    if first is None:
        return _("“{answer}” is never the top token at the last position.").format(answer=result.answer)
    return (_("“{answer}” first becomes the top token at {point} and stays on top to the end.") if stays else
            _("“{answer}” first becomes the top token at {point}.")).format(answer=result.answer,
                                                                           point=result.points[first])


def logit_lens_of(subject: Subject, text, *, mode: str = "final-scale", lens=None, mid: bool = True, k: int = 5,
                  answer=None, wrong=None, positions=None, trace: Trace | None = None) -> LensResult:
    """The logit lens (or a tuned ``lens``: ``attnviz.analysis.tunedlens.TunedLens``) of ``subject`` on
    ``text`` (a text or token ids); ``ValueError`` with one sentence for what cannot be read."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}.")
    if lens is not None and mode != "per-layer":
        raise ValueError("A tuned lens normalises each translated stream by its own scale, as tuned-lens does: use "
                         "mode=\"per-layer\" (the default with a lens).")
    ids = subject.ids(text, LENS_BOUND)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= min(limits.MAX_LENS_TOP,
                                                                                         subject.vocabulary):
        raise ValueError(f"k must be a whole number from 1 to {min(limits.MAX_LENS_TOP, subject.vocabulary)}; "
                         f"got {k!r}.")
    at = _positions(positions, len(ids))
    if answer is None and wrong is not None and str(wrong).strip():
        raise ValueError("A wrong token needs an answer: give answer= too.")
    a, w = (None, None) if answer is None else answer_ids(subject, answer, wrong)
    if lens is not None:
        lens.check(subject)
    trace = trace or subject.stack.run(torch.tensor([ids]))
    numbers = read_points(subject.stack, trace, mode=mode, lens=lens, mid=mid, k=int(k), positions=at,
                          answer=a, wrong=w)
    notes = []
    if lens is not None and mid and any(has_middle(subject.stack, i) for i in range(subject.stack.layers)):
        notes.append("A tuned lens has no translator for a layer's middle: the middles are left out.")
    notes += [] if lens is None else lens.notes
    top_tokens = [[subject.spelled(row.tolist()) for row in point] for point in numbers["top_ids"]]
    return LensResult(subject.name, "tuned" if lens is not None else mode, subject.spelled(ids), at,
                      top_tokens=top_tokens, answer=None if a is None else spelled_answer(subject, answer, a),
                      wrong=None if w is None else spelled_answer(subject, wrong, w),
                      lens=None if lens is None or lens.folder is None else str(lens.folder), notes=notes, **numbers)


@dataclass
class LensStep:
    """One step of the final-scale logit lens at one position, in parts (see the module doc)."""

    point: str  # the point stepped into ("layer 1 end")
    previous: str | None  # the point before it; None for the embeddings, whose value is its parts' sum
    position: int
    token: str  # the text's token at that position
    answer: str
    wrong: str | None
    parts: list[tuple[str, int | None, int | None, float]]  # (kind, layer, head, logits); kind: PART_KINDS

    @property
    def step(self) -> float:
        return float(sum(p[3] for p in self.parts))

    def to_dict(self) -> dict:
        return {"point": self.point, "previous": self.previous, "position": self.position, "token": self.token,
                "answer": self.answer, "wrong": self.wrong, "step": self.step,
                "parts": [{"kind": k, "layer": layer, "head": h, "logits": v} for k, layer, h, v in self.parts]}


PART_KINDS = ("head", "attention biases", "mlp", "embeddings", "biases")


def lens_step(subject: Subject, ids: list[int], points: list[str], point: int, position: int, *, answer: int,
              wrong: int | None = None, attribution=None) -> LensStep:
    """The step into ``points[point]`` (a ``LensResult``'s points) at ``position`` of ``ids``, its parts by
    direct logit attribution on the position's prefix, toward token ids ``answer`` (− ``wrong``).
    ``attribution``: that attribution where it was made already (it depends on the position, not the point)."""
    if not 0 <= position < len(ids):
        raise ValueError(f"Position {position} is out of range: the text has {len(ids)} tokens (positions 0 to "
                         f"{len(ids) - 1}).")
    if not 0 <= point < len(points):
        raise ValueError(f"Point {point} is out of range: the lens reads {len(points)} points.")
    a = attribution or logit_attribution_of(subject, ids[:position + 1], answer=answer, wrong=wrong)
    name = points[point]
    if point == 0:
        parts = [("embeddings", None, None, float(a.embeddings)), ("biases", None, None, float(a.biases))]
    else:
        layer = int(name.split()[1])
        attention = [("head", layer, h, float(v)) for h, v in enumerate(a.heads[layer])]
        attention.append(("attention biases", layer, None, float(a.attention_biases[layer])))
        mlp = [] if subject.stack.mlp[layer] is None else [("mlp", layer, None, float(a.mlps[layer]))]
        parts = (attention if name.endswith("middle") else mlp if points[point - 1].endswith("middle")
                 else attention + mlp)
    return LensStep(name, points[point - 1] if point else None, position, subject.spelled([ids[position]])[0],
                    a.answer, a.wrong, parts)


def steepest_step(r: LensResult, column: int) -> int:
    """The point (an index of ``r.points``, after the first) into which the answer's logit rises most at
    ``r.positions[column]``: where the answer arrives. 0 where the lens reads one point."""
    if r.answer_logit is None:
        raise ValueError("The lens was read without an answer: its steps are the answer's.")
    if len(r.points) < 2:
        return 0
    return int(np.argmax(np.diff(r.answer_logit[:, column]))) + 1
