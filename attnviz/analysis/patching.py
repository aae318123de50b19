"""Which heads cause an answer: activation patching and direct logit attribution, with
TransformerLens's definitions (read from its source: ``transformer_lens/patching.py``,
``ActivationCache.stack_head_results`` and ``apply_ln_to_stack``), on a model in parts
(``attnviz.models.stacks``), through a subject (``attnviz.analysis.subjects``: its tokens and bounds).

- **The metric** on a run: logit[answer] − logit[wrong] at the last position, or, without a
  wrong token, the answer's log-probability there.
- **Head patching** (``get_act_patch_attn_head_out_all_pos``): the metric on the corrupted run
  with one head's output (its z, before W_O, at every position) taken from the clean run; every
  layer × head. Pictures show it normalised, (patched − corrupted) / (clean − corrupted): 1 where
  the head alone brings the clean answer back, 0 where it does nothing.
- **Residual patching** (``get_act_patch_resid_pre``): the same with the residual stream into a
  layer, at one position, taken from the clean run; every layer × position.
- **Direct logit attribution** (``stack_head_results(pos_slice=-1, apply_ln=True)`` projected
  onto the answer's direction): each part of the last position's residual stream (each head's
  z_h W_O^h, each layer's attention bias and MLP, the embeddings), centred as the final
  LayerNorm centres it (not for RMSNorm) and divided by the final norm's scale on the whole
  stream, projected onto w ⊙ (W_U[answer] − W_U[wrong]) (w: the norm's weight, which
  TransformerLens folds into W_U); the norm's and the unembedding's biases are one more part.
  The parts sum to the logit difference (tested). Without a wrong token, in TransformerLens's
  convention (``center_unembed``): onto w ⊙ (W_U[answer] − mean_v W_U[v]), the biases likewise
  less their mean over the vocabulary, so that the parts sum to the centred logit,
  logit[answer] − mean_v logit[v] (the softmax ignores the mean); the raw logit is kept beside it.

Patching is batched and starts late: for each layer, one batch of runs (a row per head, or per
position) from the corrupted run's residual stream into that layer, the layers below it not run
again. TransformerLens runs one whole forward pass per head.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from attnviz import limits
from attnviz.analysis.subjects import Subject, answer_ids, spelled_answer, two_prompts
from attnviz.models.base import ModelError
from attnviz.models.stacks import SUM_TOLERANCE, Trace

DEFINITION = ("(patched − corrupted) / (clean − corrupted) of the metric, the metric being "
              "logit[answer] − logit[wrong] at the last position (the answer's log-probability without a wrong "
              "token): TransformerLens's activation patching")


def metric(logits: torch.Tensor, answer: int, wrong: int | None) -> torch.Tensor:
    """(B,) the metric of logits (B, V) at the last position."""
    if wrong is None:
        return torch.log_softmax(logits.double(), -1)[:, answer].float()
    return logits[:, answer] - logits[:, wrong]


@dataclass
class Patching:
    """The metric on the clean and the corrupted run, and on each patched run."""

    model: str
    answer: str
    wrong: str | None
    clean: float
    corrupted: float
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    heads: np.ndarray | None = None  # (layers, H): the metric with that head's z from the clean run
    residual: np.ndarray | None = None  # (layers, L): with the stream into that layer at that position
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def metric_name(self) -> str:
        return "log p(answer)" if self.wrong is None else "logit difference"

    @property
    def differ(self) -> list[int]:
        """The positions where the two prompts' tokens differ."""
        return [i for i, (a, b) in enumerate(zip(self.clean_tokens, self.corrupted_tokens, strict=True)) if a != b]

    def normalised(self, values: np.ndarray) -> np.ndarray:
        """(patched − corrupted) / (clean − corrupted); ``ValueError`` where the two runs agree."""
        gap = self.clean - self.corrupted
        if abs(gap) < 1e-9:
            raise ValueError(f"The clean and the corrupted prompt give the same {self.metric_name} ({self.clean:.4g}): "
                             "there is nothing for a head to bring back. Corrupt a token the answer depends on.")
        return (np.asarray(values, dtype=np.float64) - self.corrupted) / gap

    def to_dict(self) -> dict:
        out = {"model": self.model, "answer": self.answer, "wrong": self.wrong, "metric": self.metric_name,
               "definition": DEFINITION, "clean": self.clean, "corrupted": self.corrupted,
               "clean_tokens": self.clean_tokens, "corrupted_tokens": self.corrupted_tokens, "differ": self.differ}
        for name in ("heads", "residual"):
            values = getattr(self, name)
            if values is not None:
                out[name] = values.tolist()
                try:
                    out[f"{name}_normalised"] = self.normalised(values).tolist()
                except ValueError:
                    out[f"{name}_normalised"] = None
        return out


def _rows(stack, L: int, E: int) -> int:
    """Patched runs per batch: within the memory budget (each holds, in one layer, its stream and
    the scores and weights its attention forms, rows × H × L × L, with room), and at most
    ``PATCH_BATCH_TOKENS`` tokens of runs, so that one batch is a short turn on the compute workers."""
    per_row = max(1, 4 * (3 * stack.heads * L * L + 8 * L * E))
    return max(1, min(limits.memory_budget_bytes() // per_row, limits.PATCH_BATCH_TOKENS // L))


def _sweep(layers: int, width: int, rows: int, batch: Callable[[int, list[int]], np.ndarray], progress,
           step) -> np.ndarray:
    """(layers, width): ``batch(layer, items)`` for every layer and every ``rows`` items (heads or
    positions), each batch run by ``step(work)`` (by default now), ``progress(fraction)`` after each."""
    out = np.zeros((layers, width))
    for layer in range(layers):
        for i0 in range(0, width, rows):
            items = list(range(i0, min(width, i0 + rows)))
            work = partial(batch, layer, items)
            out[layer, i0:i0 + len(items)] = work() if step is None else step(work)
            if progress is not None:
                progress((layer + (i0 + len(items)) / width) / layers)
    return out


def sweep_heads(stack, clean: Trace, corrupted: Trace, answer: int, wrong: int | None,
                progress: Callable[[float], None] | None = None, step: Callable | None = None) -> np.ndarray:
    """(layers, H): for every layer, batches of runs from the corrupted stream into it, row r with
    head r's z (every position) from the clean run. ``step(work)`` runs each batch (the app's
    compute workers: other runs take turns between batches)."""
    H = stack.heads
    L, E = corrupted.resid_pre[0].shape[1:]
    D = clean.z[0].shape[-1] // H

    def batch(layer: int, heads: list[int]) -> np.ndarray:  # (len(heads),)
        def patch(z):  # z (B, L, H·D): row r takes head heads[r]'s from the clean run
            for r, h in enumerate(heads):
                z[r, :, h * D:(h + 1) * D] = clean.z[layer][0, :, h * D:(h + 1) * D]
            return z

        start = corrupted.resid_pre[layer]  # (1, L, E)
        return metric(stack.from_layer(layer, start.expand(len(heads), L, E), corrupted, patch), answer, wrong).numpy()

    return _sweep(stack.layers, H, _rows(stack, L, E), batch, progress, step)


def sweep_residual(stack, clean: Trace, corrupted: Trace, answer: int, wrong: int | None,
                   progress: Callable[[float], None] | None = None, step: Callable | None = None) -> np.ndarray:
    """(layers, L): for every layer, batches of runs from the corrupted stream into it, row p with
    position p of that stream from the clean run (``step`` as for ``sweep_heads``)."""
    L, E = corrupted.resid_pre[0].shape[1:]

    def batch(layer: int, positions: list[int]) -> np.ndarray:  # (len(positions),)
        x = corrupted.resid_pre[layer].repeat(len(positions), 1, 1)  # (B, L, E)
        for r, p in enumerate(positions):
            x[r, p] = clean.resid_pre[layer][0, p]
        return metric(stack.from_layer(layer, x, corrupted), answer, wrong).numpy()

    return _sweep(stack.layers, L, _rows(stack, L, E), batch, progress, step)


@dataclass
class Attribution:
    """Direct logit attribution at the last position: every part's push toward the answer."""

    model: str
    answer: str
    wrong: str | None  # None: onto the answer's centred logit alone
    tokens: list[str]
    heads: np.ndarray  # (layers, H): each head's z_h W_O^h
    attention_biases: np.ndarray  # (layers,): each attention's output bias b_O
    mlps: np.ndarray  # (layers,): each MLP's output (0 where there is none)
    embeddings: float  # the stream into layer 0: token (and position) embeddings
    biases: float  # the final norm's bias and the unembedding's, on the answer's direction
    # logit[answer] − logit[wrong], the model's own; without a wrong token the centred logit,
    # logit[answer] − mean_v logit[v] (TransformerLens's center_unembed)
    logit_difference: float
    norm: str  # how the final norm was taken in: "layer", "rms" or "none"
    raw_logit: float  # logit[answer] as the model gives it, uncentred

    @property
    def total(self) -> float:
        return float(self.heads.sum() + self.attention_biases.sum() + self.mlps.sum() + self.embeddings + self.biases)

    def to_dict(self) -> dict:
        return {"model": self.model, "answer": self.answer, "wrong": self.wrong, "tokens": self.tokens,
                "heads": self.heads.tolist(), "attention_biases": self.attention_biases.tolist(),
                "mlps": self.mlps.tolist(), "embeddings": self.embeddings, "biases": self.biases,
                "logit_difference": self.logit_difference, "raw_logit": self.raw_logit, "sum_of_parts": self.total,
                "final_norm": self.norm, "definition": attribution_definition(self.wrong is not None)}


def attribution_definition(wrong: bool) -> str:
    """The one sentence that defines direct logit attribution, with or without a wrong token."""
    if wrong:
        return ("each part of the last position's residual stream, centred (LayerNorm) and divided by the final norm's "
                "scale, projected onto w ⊙ (W_U[answer] − W_U[wrong])")
    return ("each part of the last position's residual stream, centred (LayerNorm) and divided by the final norm's "
            "scale, projected onto w ⊙ (W_U[answer] − mean over the vocabulary of W_U), TransformerLens's centred "
            "unembedding; the parts sum to the centred logit, logit[answer] − the mean logit (raw_logit: uncentred)")


def attribute(stack, trace: Trace, answer: int, wrong: int | None) -> dict:
    """The parts of ``trace``'s last position and their projections (``Attribution``'s fields);
    without a wrong token, onto the answer's centred unembedding (``answer_direction``)."""
    u = stack.unembedding()
    x = trace.resid_final[0, -1]  # (E,)
    parts = {"embeddings": trace.resid_pre[0][0, -1]}
    heads, biases = [], []
    for layer in range(stack.layers):
        w_o, b_o = stack.w_o(layer)  # (E, H·D), (E,)
        b_v = stack.value_biases(layer, trace)  # (H·D,): in every head's z whatever it attends to
        z = trace.z[layer][0, -1] - b_v  # (H·D,)
        D = z.shape[0] // stack.heads
        heads.append(torch.stack([w_o[:, h * D:(h + 1) * D] @ z[h * D:(h + 1) * D]
                                  for h in range(stack.heads)]))  # (H, E)
        biases.append(w_o @ b_v + (0 if b_o is None else b_o))  # (E,): b_O with the value biases folded in
    heads = torch.stack(heads)  # (layers, H, E)
    biases = torch.stack(biases)  # (layers, E)
    mlps = torch.stack([torch.zeros_like(x) if m is None else m[0, -1] for m in trace.mlp_out])  # (layers, E)
    whole = parts["embeddings"] + heads.sum((0, 1)) + biases.sum(0) + mlps.sum(0)  # (E,)
    off = float((whole - x).norm() / x.norm().clamp_min(1e-12))
    if off > SUM_TOLERANCE:
        raise ModelError(f"{stack.name}'s residual stream is not the sum of its embeddings and its layers' "
                         f"outputs (they differ by {off:.2g} of its norm): direct logit attribution needs it to be.")
    direction, bias = answer_direction(u, answer, wrong)
    scale = u.scale(x)  # (1,) the final norm's divisor, from the whole stream

    def project(c: torch.Tensor) -> torch.Tensor:  # (..., E) -> (...)
        if u.kind == "layer":
            c = c - c.mean(-1, keepdim=True)
        return (c / scale) @ direction

    logits = trace.logits[0]  # (V,)
    logit = logits[answer] - (logits.double().mean() if wrong is None else logits[wrong])
    return {"heads": project(heads).double().numpy(), "attention_biases": project(biases).double().numpy(),
            "mlps": project(mlps).double().numpy(), "embeddings": float(project(parts["embeddings"])),
            "biases": bias, "logit_difference": float(logit), "norm": u.kind, "raw_logit": float(logits[answer])}


def answer_direction(u, answer: int, wrong: int | None) -> tuple[torch.Tensor, float]:
    """(w ⊙ d (E,), the constant the norm's bias and the unembedding's bias add along d), d being
    W_U[answer] − W_U[wrong], or without a wrong token W_U[answer] − mean_v W_U[v]
    (TransformerLens's ``center_unembed``; its biases likewise centred); w: the final norm's weight,
    which TransformerLens folds into W_U."""
    unembed = u.w_u[answer] - (u.w_u.double().mean(0).float() if wrong is None else u.w_u[wrong])  # (E,)
    direction = unembed if u.weight is None else unembed * u.weight  # (E,)
    bias = 0.0
    if u.bias is not None:
        bias += float(u.bias @ unembed)
    if u.b_u is not None:
        bias += float(u.b_u[answer] - (u.b_u.double().mean() if wrong is None else u.b_u[wrong]))
    return direction, bias


@dataclass
class Runs:
    """Both prompts run once, kept whole with every layer's attention: what the sweeps, the
    attribution and a page's heads all read, so that no prompt runs through the model twice."""

    clean_ids: list[int]
    corrupted_ids: list[int]
    answer: int
    wrong: int | None
    clean: Trace
    corrupted: Trace


def runs(subject: Subject, clean, corrupted, *, answer, wrong=None, trace=None) -> Runs:
    """Both prompts' ids and runs (``trace(ids)``: where a run comes from, by default the model now;
    the page shares them through its cache); the answer and the wrong token as ids."""
    a_ids, b_ids = two_prompts(subject, clean, corrupted)
    a, w = answer_ids(subject, answer, wrong)
    trace = trace or (lambda ids: subject.stack.run(torch.tensor([ids]), weights=True))
    return Runs(a_ids, b_ids, a, w, trace(a_ids), trace(b_ids))


def patch(subject: Subject, clean, corrupted, *, answer, wrong=None, heads: bool = True,
          residual: bool = False, progress: Callable[[float], None] | None = None,
          step: Callable | None = None, ran: Runs | None = None,
          keep: Callable[[tuple, Callable[[], np.ndarray]], np.ndarray] | None = None) -> Patching:
    """Patching of ``subject`` between two prompts (texts or token ids of one length): every head
    (``heads``) and every layer × position of the residual stream (``residual``); ``step(work)``
    runs each batch of patched runs (at most ``PATCH_BATCH_TOKENS`` tokens). ``ran``: both prompts'
    runs where they were made already (``runs``). ``keep(key, sweep)``: where a sweep is kept, by
    ``key`` (which sweep, both prompts' ids, the answer and the wrong token): the app's results cache,
    so that the Patching and Circuit pages, which both sweep the heads of a pair, sweep them once."""
    t0 = time.perf_counter()
    ran = ran or runs(subject, clean, corrupted, answer=answer, wrong=wrong)
    stack, a, w, tc, tk = subject.stack, ran.answer, ran.wrong, ran.clean, ran.corrupted
    out = Patching(subject.name, spelled_answer(subject, answer, a),
                   None if w is None else spelled_answer(subject, wrong, w), float(metric(tc.logits, a, w)[0]),
                   float(metric(tk.logits, a, w)[0]), subject.spelled(ran.clean_ids),
                   subject.spelled(ran.corrupted_ids))
    parts = [f for f, on in (("heads", heads), ("residual", residual)) if on]
    for i, part in enumerate(parts):
        report = None if progress is None else (lambda f, i=i: progress((i + f) / len(parts)))
        sweep = sweep_heads if part == "heads" else sweep_residual
        work = lambda sweep=sweep, report=report: sweep(stack, tc, tk, a, w, report, step)  # noqa: E731
        key = (part, tuple(ran.clean_ids), tuple(ran.corrupted_ids), a, w)
        setattr(out, part, work() if keep is None else keep(key, work))
    out.seconds = time.perf_counter() - t0
    return out


def logit_attribution_of(subject: Subject, prompt, *, answer, wrong=None, trace: Trace | None = None) -> Attribution:
    """Direct logit attribution of ``subject`` on ``prompt`` at its last position (``trace``: its run,
    where it was made already): onto W_U[answer] − W_U[wrong], or without a wrong token onto the
    centred W_U[answer] − mean_v W_U[v] (the parts then sum to the centred logit; ``raw_logit`` beside it)."""
    ids = subject.ids(prompt)
    a, w = answer_ids(subject, answer, wrong)
    trace = trace or subject.stack.run(torch.tensor([ids]))
    return Attribution(subject.name, spelled_answer(subject, answer, a),
                       None if w is None else spelled_answer(subject, wrong, w), subject.spelled(ids),
                       **attribute(subject.stack, trace, a, w))
