"""Does a head matter? Weighted value norms, knock-out, and the neuron view's numbers.

All of it reads the followed layer's ``HeadParts`` (``attnviz.models.base``): the values v
per head, the output projection W_O (E, H·D) and what went into and came out of it.

- **Weighted value norms** (Kobayashi et al. 2020, "Attention is not only a weight"):
  ``‖A[i, j] · v_j W_O^h‖`` per head, where W_O^h is the slice of W_O that head h's output
  multiplies (columns h·D .. (h+1)·D of ``nn.Linear``'s weight). A large weight on a token
  whose transformed value is tiny moves nothing; this shows it. The output bias and the
  residual are left out, as in the paper's α‖f(x)‖.
- **Knock-out**: head h's output is set to zero before W_O (ablation by zeroing, not by
  the mean over keys), and we measure how far the layer's output (W_O's output) moves:
  ``‖out − out₋ₕ‖ / ‖out‖`` over the sequence's real query rows (Frobenius norms). For a
  causal LM, the model is rerun with the head zeroed (a forward pre-hook on the output
  projection) and the next-token distribution after the sentence is compared: the
  probability of the original top token, and how many of the original top 10 stay in the
  top 10.
- **Neuron view** (BertViz's): for one query, per key: q, k, q∘k, Σ q∘k = q·k, the score
  q·k · scale (+ the position bias b[i, j], where the model adds one: T5) and the weight,
  softmax of the scores over the keys the mask lets through. Where the model rotates q and k
  by position (rotary positions: LLaMA), q and k are the rotated ones, which the scores use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.i18n import _
from attnviz.models.base import HeadParts
from attnviz.run.result import AttentionResult

TOP = 10  # the next tokens compared by a knock-out


def parts_of(result: AttentionResult) -> HeadParts:
    """The run's head parts, or a ``ValueError`` that says plainly that this model (an
    attention file, weights alone) cannot give its values and output projection."""
    if result.parts is None:
        raise ValueError(_("{model} gives its attention weights only: weighted value norms and knock-out need the "
                           "layer's value vectors and output projection W_O, which it does not give (they are not "
                           "replaced by the weights).").format(model=result.model_name))
    return result.parts


def head_slices(w_o: torch.Tensor, heads: int) -> torch.Tensor:
    """W_O^h for every head: (H, E, D), from W_O (E, H·D)."""
    E, HD = w_o.shape
    return w_o.reshape(E, heads, HD // heads).permute(1, 0, 2)  # (H, E, D)


def value_norms(parts: HeadParts) -> torch.Tensor:
    """‖v_j W_O^h‖ for every head and key: (N, H, S)."""
    W = head_slices(parts.w_o.float(), parts.heads)  # (H, E, D)
    gram = W.transpose(1, 2) @ W  # (H, D, D): ‖W_h v‖² = vᵀ (W_hᵀ W_h) v
    v = parts.v.float()  # (N, H, S, D)
    sq = torch.einsum("nhsd,hde,nhse->nhs", v, gram, v)  # (N, H, S)
    return sq.clamp_min(0).sqrt()


def weighted_norms(parts: HeadParts, weights: torch.Tensor) -> torch.Tensor:
    """‖A[i, j] · v_j W_O^h‖ = A[i, j] · ‖v_j W_O^h‖ (A ≥ 0): (N, H, L, S)."""
    return weights.float() * value_norms(parts).unsqueeze(2)  # (N, H, L, S)


def row_share(norms: torch.Tensor) -> torch.Tensor:
    """Each query row's norms over their sum (0 where the row is all zero), on the weights'
    0–1 scale: (..., L, S)."""
    total = norms.sum(-1, keepdim=True)  # (..., L, 1)
    return torch.where(total > 0, norms / total.clamp_min(1e-30), torch.zeros_like(norms))


def output_without(parts: HeadParts, n: int, heads: list[int]) -> torch.Tensor:
    """Sequence ``n``'s output projection with the listed heads' outputs zeroed before W_O: (L, E)."""
    H, D = parts.heads, parts.head_dim
    joined = parts.joined[n].float().clone()  # (L, H·D)
    for h in heads:
        if not 0 <= h < H:
            raise ValueError(f"Head {h} does not exist: the layer has {H} heads (0–{H - 1}).")
        joined[:, h * D:(h + 1) * D] = 0
    out = joined @ parts.w_o.float().T  # (L, E)
    return out if parts.b_o is None else out + parts.b_o.float()


@dataclass
class KnockOut:
    """One number per head of the followed layer, for sequence ``n``."""

    moved: list[float]  # ‖out − out₋ₕ‖ / ‖out‖ over the real query rows
    top_token: str | None = None  # a causal LM's most likely next token, with every head
    top_p: float | None = None  # its probability
    top_p_without: list[float] = field(default_factory=list)  # its probability with head h zeroed
    overlap: list[int] = field(default_factory=list)  # how many of the top 10 stay in the top 10

    def to_dict(self) -> dict:
        return {"ablation": "head output set to zero before W_O", "moved": self.moved,
                "moved_means": "‖out − out without head‖ / ‖out‖ over the real query rows",
                **({"top_token": self.top_token, "top_p": self.top_p, "top_p_without": self.top_p_without,
                    f"top{TOP}_overlap": self.overlap} if self.top_token is not None else {})}


def knock_out(parts: HeadParts, n: int, length: int, *, rerun: bool = True) -> KnockOut:
    """Each head of the layer zeroed in turn (see the module doc); ``length``: the real rows.
    ``rerun=False``: the layer's output alone (no rerun of a causal LM for its next tokens)."""
    out = parts.output[n, :length].float()  # (l, E)
    base = float(out.norm())
    moved = []
    for h in range(parts.heads):
        diff = float((out - output_without(parts, n, [h])[:length]).norm())
        moved.append(diff / base if base > 0 else 0.0)
    ko = KnockOut(moved)
    if rerun and parts.knock_out is not None:
        probs = parts.knock_out(n, [-1, *range(parts.heads)]).float()  # (1 + H, V): row 0 nothing knocked out
        top = torch.topk(probs[0], min(TOP, probs.shape[1])).indices  # (10,)
        first = int(top[0])
        ko.top_token = parts.token_name(first) if parts.token_name else str(first)
        ko.top_p = float(probs[0, first])
        ko.top_p_without = [float(p) for p in probs[1:, first]]
        keep = set(top.tolist())
        ko.overlap = [len(keep & set(torch.topk(p, top.numel()).indices.tolist())) for p in probs[1:]]
    return ko


@dataclass
class NeuronRow:
    """One query's numbers over the keys of one head (BertViz's neuron view)."""

    q: np.ndarray  # (D,)
    k: np.ndarray  # (S, D)
    product: np.ndarray  # q∘k (S, D)
    dot: np.ndarray  # Σ_d q∘k = q·k (S,)
    scaled: np.ndarray  # q·k · scale (S,)
    weight: np.ndarray  # after softmax (and the mask) (S,)
    visible: np.ndarray  # bool (S,): the mask lets this query see the key
    scale: float
    bias: np.ndarray | None = None  # the position bias b[i, j] added to the scores (S,); None: none
    rotary: bool = False  # q and k are rotated by position (rotary positions)

    @property
    def score(self) -> np.ndarray:
        """What softmax reads (before the mask): q·k · scale + b[i, j] (S,)."""
        return self.scaled if self.bias is None else self.scaled + self.bias

    def to_dict(self) -> dict:
        return {"q": self.q.tolist(), "k": self.k.tolist(), "q_times_k": self.product.tolist(),
                "sum_of_q_times_k": self.product.sum(-1).tolist(), "q_dot_k": self.dot.tolist(),
                "scale": self.scale, "scaled": self.scaled.tolist(), "weight": self.weight.tolist(),
                "visible": self.visible.tolist(), "rotary": self.rotary,
                **({} if self.bias is None else {"position_bias": self.bias.tolist()}),
                "score": self.score.tolist(),
                "score_means": "q·k × scale" + ("" if self.bias is None else " + position bias")
                               + (" (q and k rotated by position)" if self.rotary else "")}


def neuron_parts(result: AttentionResult) -> HeadParts:
    """The parts with q and k, or a ``ValueError`` naming why this run has none."""
    parts = result.parts
    if parts is None or not parts.confirm_qk() or parts.q.shape[-1] == 0:
        why = parts.qk_note if parts is not None and parts.qk_note else _(
            "it gives its attention weights only, not the query and key vectors")
        raise ValueError(_("The neuron view needs each head's query and key vectors: {model} cannot show it "
                           "({why}).").format(model=result.model_name, why=why))
    return parts


def neuron_row(result: AttentionResult, n: int, h: int, i: int) -> NeuronRow:
    """Query ``i`` of head ``h``, sequence ``n``, over its real keys."""
    parts = neuron_parts(result)
    S = result.source_lengths[n]
    q = parts.q[n, h, i].float()  # (D,)
    k = parts.k[n, h, :S].float()  # (S, D)
    product = q * k  # (S, D)
    dot = k @ q  # (S,)
    bias = None if parts.bias is None else parts.bias[n, h, i, :S].float().numpy()  # (S,)
    return NeuronRow(q.numpy(), k.numpy(), product.numpy(), dot.numpy(), (dot * parts.scale).numpy(),
                     result.weights[n, h, i, :S].float().numpy(), result.mask_matrix(n)[i, :S].numpy(),
                     float(parts.scale), bias, parts.rotary)
