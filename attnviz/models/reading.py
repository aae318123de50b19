"""How each layer's attention reads the residual stream, as weights: what composition scores and
score attribution (``attnviz.analysis.composition``, ``attnviz.analysis.scoreattr``) need of a
model in parts (``attnviz.models.stacks``).

    q_h = rotate_i( norm(x_i) · W_Q^h + b_Q^h ),   k_h = rotate_j( norm(x_j) · W_K^g + b_K^g ),
    score = scale · q_h · k_h,   g = the KV head of query head h,   v_g = norm(x_j) · W_V^g + b_V^g

- the norm before the attention (``stacks.Norm``: LayerNorm, RMSNorm or none), its weight and bias
  kept apart (the weights here are the model's, nothing folded);
- W_Q, W_K, W_V per head, (heads, E, D), read from the projection's columns that the stack names
  (GPT-2's fused Conv1D, GPT-NeoX's per-head Linear, LLaMA's three Linears); a grouped-query model
  has one W_K and W_V per KV head;
- the rotation a rotary model applies to q and k: the cos and sin it gave each layer in the run
  (``Trace.calls``), on the first dimensions of each head (all of them for LLaMA, a quarter for
  Pythia), the second half of those turned against the first (transformers' ``rotate_half``);
- the embeddings of a run's tokens, token and position apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnviz.models.base import ModelError
from attnviz.models.positions import rotate_half
from attnviz.models.stacks import NO_NORM, HFStack, Norm, Trace, first_found, norm_of

ATTENTIONS = ("attn", "self_attn", "attention")
POSITION_EMBEDDINGS = ("wpe", "embed_positions")


@dataclass
class Reading:
    """One layer's attention as it reads the stream (see the module doc)."""

    norm: Norm
    w: dict[str, torch.Tensor]  # "q" (H, E, D); "k", "v" (KV heads, E, D): normed stream @ w + b
    b: dict[str, torch.Tensor | None]  # each (heads, D), None where the projection has no bias
    scale: float  # what q·k is multiplied by

    @property
    def heads(self) -> int:
        return int(self.w["q"].shape[0])

    @property
    def kv_heads(self) -> int:
        return int(self.w["k"].shape[0])

    def kv(self, head: int) -> int:
        """The KV head query head ``head`` reads (transformers' ``repeat_kv``: consecutive query heads share one)."""
        return head // (self.heads // self.kv_heads)


def reading(stack, layer: int) -> Reading:
    """Layer ``layer``'s ``Reading``, for a transformers stack or Watch it learn's model."""
    if isinstance(stack, HFStack):
        w, b = {}, {}
        for c in "qkv":
            norm, module, columns = stack.projection(layer, c)
            weight = module.weight.detach().float()
            weight = weight.T if isinstance(module, torch.nn.Linear) else weight  # (E, out)
            w[c] = weight[:, columns].permute(1, 0, 2).contiguous()  # (heads, E, D)
            bias = getattr(module, "bias", None)
            b[c] = None if bias is None else bias.detach().float()[columns]  # (heads, D)
        attention = first_found(stack.blocks[layer], ATTENTIONS)
        scale = float(getattr(attention, "scaling", stack.head_dim ** -0.5))
        return Reading(norm_of(norm), w, b, scale)
    mha = stack.blocks[layer]
    H, E = mha.num_heads, mha.d_model
    w = {c: m.detach().float().T.reshape(E, H, E // H).permute(1, 0, 2).contiguous()
         for c, m in zip("qkv", (mha.w_q, mha.w_k, mha.w_v), strict=True)}  # (H, E, D)
    b = {c: None if mha._bias(i) is None else mha._bias(i).detach().float().view(H, E // H)
         for i, c in enumerate("qkv")}
    return Reading(NO_NORM, w, b, 1.0 / (E // H) ** 0.5)


def w_o_heads(stack, layer: int) -> torch.Tensor:
    """(H, D, E): each head's W_O, what its output z_h (D,) writes: z_h @ W_O^h."""
    w_o, _b = stack.w_o(layer)  # (E, H·D)
    E = w_o.shape[0]
    return w_o.T.reshape(stack.heads, -1, E)


def rotation(trace: Trace, layer: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (cos, sin) (L, r) a rotary model gave ``layer`` in ``trace``'s run; None without one."""
    if not trace.calls:
        return None
    given = trace.calls[layer][1].get("position_embeddings")
    if given is None:
        return None
    cos, sin = given
    return cos[0].float(), sin[0].float()  # (L, r)


def turned(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, D) at the T positions of cos, sin (T, r): rotated as the model rotates q and k
    (``positions.rotate_half``: its first r dimensions, the rest as they are)."""
    lead = x.shape[:-2]
    flat = x.reshape(-1, 1, *x.shape[-2:])  # (N, 1, T, D)
    return rotate_half(flat, cos[None].to(x.dtype), sin[None].to(x.dtype)).reshape(*lead, *x.shape[-2:])


def embeddings(stack, trace: Trace, ids: list[int]) -> list[tuple[str, torch.Tensor]]:
    """The stream into layer 0 in its parts: [("token embedding", (L, E)), ("position embedding",
    (L, E))], the second only where the model adds one (GPT-2, Watch it learn's model)."""
    if isinstance(stack, HFStack):
        token = stack.model.get_input_embeddings().weight.detach().float()[ids]  # (L, E)
        base = getattr(stack.model, "base_model", stack.model)
        positions = first_found(base, POSITION_EMBEDDINGS) is not None
    else:
        token = stack.model.embed.detach().float()[ids]  # (L, E)
        positions = True
    parts = [("token embedding", token)]
    if positions:
        parts.append(("position embedding", trace.resid_pre[0][0] - token))
    elif (trace.resid_pre[0][0] - token).abs().max() > 1e-5 * token.abs().max():
        raise ModelError(f"{stack.name}'s stream into its first layer is not its token embeddings: attnviz cannot "
                         "split it into its parts.")
    return parts
