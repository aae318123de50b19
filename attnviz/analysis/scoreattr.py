"""Why a head attends where it does: one attention cell's pre-softmax score split into
(query part × key part) terms (Elhage et al. 2021's decomposition of the QK circuit, read on one
input).

The stream into layer r at a position is a sum of parts: the token embedding, the position
embedding (where the model adds one), each earlier head's output z_h · W_O^h, each earlier
layer's attention biases (b_O, and the value biases every head's output carries: TransformerLens
folds them into b_O) and each earlier MLP's output. The norm before the attention is linear in
the stream once its scale is frozen at this input (TransformerLens's ``apply_ln_to_stack``):

    norm(x) = Σ_parts centre(part) / σ(x) ⊙ w + b      (RMSNorm: part / rms(x) ⊙ w; none: part)

so q = rotate_i(norm(x_i) W_Q^h + b_Q^h) is a sum of one vector per part, the norm's bias and b_Q
being parts of their own, and the rotation (rotary models) a linear map at each position. The
same for k at the key position, through the head's KV head. Each term is scale · q_part · k_part;
the terms sum to the score, q·k·scale, which is what softmax reads before the causal mask
(TransformerLens's ``hook_attn_scores``). The score is checked against the model's own weights:
its row's softmax must be the head's attention, or the model is refused (a norm of q and k after
their projections, as Qwen3 has, makes a score that is not a sum of parts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.analysis.subjects import Subject
from attnviz.models.base import ModelError
from attnviz.models.reading import embeddings, reading, rotation, turned, w_o_heads
from attnviz.models.stacks import SUM_TOLERANCE, Trace

DEFINITION = ("the pre-softmax score q·k·scale of one attention cell, split into (query part × key part) terms: the "
              "parts of the stream (embeddings, each earlier head's output, each MLP's, the biases) through each "
              "side's norm with its scale frozen at this input, rotated where the model rotates q and k")


@dataclass
class ScoreAttribution:
    """One cell's score in terms (see the module doc)."""

    model: str
    tokens: list[str]
    layer: int
    head: int
    query: int
    key: int
    query_parts: list[str]
    key_parts: list[str]
    terms: torch.Tensor  # (query parts, key parts) float64: scale · q_part · k_part
    score: float  # q·k·scale from the whole streams: what softmax reads
    weight: float  # the cell's attention weight, the model's own

    @property
    def total(self) -> float:
        return float(self.terms.sum())

    def top(self, k: int = 5) -> list[tuple[str, str, float]]:
        """The ``k`` largest terms by size: (query part, key part, term)."""
        flat = self.terms.abs().flatten()
        order = torch.argsort(flat, descending=True)[:k].tolist()
        nk = len(self.key_parts)
        return [(self.query_parts[i // nk], self.key_parts[i % nk], float(self.terms.flatten()[i])) for i in order]

    def part_words(self, part: str, position: int) -> str:
        """A part in words at ``position``: "L0 H1's output at “B”", "token embedding of “A”"."""
        token = self.tokens[position]
        if part.startswith("L") and "H" in part and " " not in part:
            layer, head = part[1:].split("H")
            return f"L{layer} H{head}'s output at “{token}”"
        if part == "token embedding":
            return f"token embedding of “{token}”"
        if part == "position embedding":
            return f"position embedding of position {position}"
        if part.endswith("MLP") or part.endswith("attention biases"):
            return f"{part} at “{token}”"
        return part

    def words(self, k: int = 3) -> list[str]:
        """The ``k`` largest terms in words: "L0 H1's output at “B” · token embedding of “A”: +2.31"."""
        return [f"{self.part_words(q, self.query)} · {self.part_words(kp, self.key)}: {v:+.2f}"
                for q, kp, v in self.top(k)]

    def to_dict(self) -> dict:
        return {"model": self.model, "tokens": self.tokens, "layer": self.layer, "head": self.head,
                "query": self.query, "key": self.key, "query_parts": self.query_parts, "key_parts": self.key_parts,
                "terms": self.terms.tolist(), "score": self.score, "sum_of_terms": self.total, "weight": self.weight,
                "top_terms": self.words(5), "definition": DEFINITION}


def stream_parts(stack, trace: Trace, ids: list[int], layer: int) -> tuple[list[str], torch.Tensor]:
    """The stream into ``layer`` at every position in its parts: (names, (parts, L, E)); checked to sum to it."""
    names, parts = [], []
    for name, x in embeddings(stack, trace, ids):
        names.append(name)
        parts.append(x)
    for lower in range(layer):
        w_o, b_o = stack.w_o(lower)  # (E, H·D)
        b_v = stack.value_biases(lower, trace)  # (H·D,): in every head's output whatever it attends to
        heads = w_o_heads(stack, lower)  # (H, D, E)
        H, D, _E = heads.shape
        z = (trace.z[lower][0] - b_v).view(-1, H, D)  # (L, H, D)
        for h, out in enumerate(torch.einsum("lhd,hde->hle", z, heads)):  # (L, E) each
            names.append(f"L{lower}H{h}")
            parts.append(out)
        bias = w_o @ b_v + (0 if b_o is None else b_o)  # (E,)
        if bias.abs().max() > 0:
            names.append(f"L{lower} attention biases")
            parts.append(bias.expand_as(parts[0]))
        if trace.mlp_out[lower] is not None:
            names.append(f"L{lower} MLP")
            parts.append(trace.mlp_out[lower][0])
    stacked = torch.stack(parts)  # (parts, L, E)
    whole = trace.resid_pre[layer][0]  # (L, E)
    off = float((stacked.sum(0) - whole).norm() / whole.norm().clamp_min(1e-12))
    if off > SUM_TOLERANCE:
        raise ModelError(f"{stack.name}'s stream into layer {layer} is not the sum of its embeddings and its layers' "
                         f"outputs (they differ by {off:.2g} of its norm): a score attribution needs it to be.")
    return names, stacked


def _side(r, parts: torch.Tensor, whole: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, bias_name: str,
          turn) -> tuple[list[str], torch.Tensor]:
    """One side's parts through the frozen norm and the head's projection: (names, (parts, D)) float64."""
    parts, whole = parts.double(), whole.double()  # (n, E), (E,)
    norm = r.norm
    if norm.kind == "layer":
        parts = parts - parts.mean(-1, keepdim=True)
    parts = parts / norm.scale(whole[None]).double()
    if norm.weight is not None:
        parts = parts * norm.weight.double()
    out, names = [parts @ w.double()], []  # (n, D)
    if norm.bias is not None:
        out.append((norm.bias.double() @ w.double())[None])
        names.append("norm bias")
    if b is not None:
        out.append(b.double()[None])
        names.append(bias_name)
    return names, turn(torch.cat(out))


def qk_scores(stack, trace: Trace, layer: int, head: int, q_stream: torch.Tensor, k_stream: torch.Tensor
                ) -> torch.Tensor:
    """(L, L) float64: head (``layer``, ``head``)'s pre-softmax scores, its queries made from
    ``q_stream`` (L, E) and its keys from ``k_stream``, through the layer's norm (not frozen) and
    rotation, as ``trace``'s run rotated them; the causal mask not applied."""
    r = reading(stack, layer)
    g = r.kv(head)

    def made(stream, c, h):  # (L, D)
        x = stream.double()
        norm = r.norm
        if norm.kind == "layer":
            x = x - x.mean(-1, keepdim=True)
        x = x / norm.scale(stream.double())
        if norm.weight is not None:
            x = x * norm.weight.double()
        if norm.bias is not None:
            x = x + norm.bias.double()
        out = x @ r.w[c][h].double() + (0 if r.b[c] is None else r.b[c][h].double())
        turns = rotation(trace, layer)
        return out if turns is None else turned(out, *turns)

    return r.scale * made(q_stream, "q", head) @ made(k_stream, "k", g).T


def pattern(scores: torch.Tensor) -> torch.Tensor:
    """(L, L) the causal softmax of ``scores`` (L, L)."""
    L = scores.shape[-1]
    masked = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(masked, -1)


def attribute_score(subject: Subject, text, *, layer: int, head: int, query: int, key: int,
                    trace=None) -> ScoreAttribution:
    """The score attribution of ``subject``'s head (``layer``, ``head``) at (``query``, ``key``) on ``text``
    (a text through the tokenizer, or ids: positions count as ``patch_heads`` counts them). ``trace(ids)``:
    where the prompt's run comes from (a page's cached run), by default the model now."""
    stack = subject.stack
    ids = subject.ids(text)
    L = len(ids)
    for name, value, most in (("layer", layer, stack.layers), ("head", head, stack.heads), ("query", query, L),
                              ("key", key, L)):
        if not 0 <= int(value) < most:
            raise ValueError(f"The {name} {value} does not exist: {subject.name} has {most} "
                             f"{'positions in this prompt' if name in ('query', 'key') else name + 's'} "
                             f"(0–{most - 1}).")
    if key > query:
        raise ValueError(f"The key {key} is after the query {query}: a causal model's query never sees a later key, so "
                         "that cell is masked and has no score. Pick a key at or before the query.")
    trace = trace(ids) if trace is not None else stack.run(torch.tensor([ids]), weights=True)
    r = reading(stack, layer)
    names, parts = stream_parts(stack, trace, ids, layer)  # (n, L, E)
    x = trace.resid_pre[layer][0]  # (L, E)
    turns = rotation(trace, layer)

    def at(position):
        if turns is None:
            return lambda v: v
        cos, sin = (t[position:position + 1] for t in turns)  # (1, r): one position
        return lambda v: turned(v[:, None], cos, sin)[:, 0]  # (n, D)

    g = r.kv(head)
    q_extra, q = _side(r, parts[:, query], x[query], r.w["q"][head], None if r.b["q"] is None else r.b["q"][head],
                       "query bias", at(query))
    k_extra, k = _side(r, parts[:, key], x[key], r.w["k"][g], None if r.b["k"] is None else r.b["k"][g],
                       "key bias", at(key))
    terms = r.scale * (q @ k.T)  # (query parts, key parts)
    scores = qk_scores(stack, trace, layer, head, x, x)  # (L, L) from the whole streams
    model_row = trace.weights[layer][0, head, query, :query + 1].double()
    off = float((torch.softmax(scores[query, :query + 1], -1) - model_row).abs().max())
    if off > 1e-4:
        raise ModelError(f"{subject.name}'s attention in layer {layer} is not the softmax of q·k·scale made from its "
                         f"normed stream (its weights differ by {off:.2g}): its scores cannot be split into parts.")
    return ScoreAttribution(subject.name, subject.spelled(ids), layer, head, query, key, names + q_extra,
                            names + k_extra, terms, float(scores[query, key]), float(model_row[key]))


def key_side(a: ScoreAttribution) -> np.ndarray:
    """(key parts,) each key part's terms summed over the query parts."""
    return a.terms.sum(0).numpy()
