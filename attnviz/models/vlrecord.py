"""The text rows of a vision-language model's attention, read from its own queries and keys as the
forward pass reaches each language-model layer, without its N × N weights.

The loaded model runs eager attention (what ``output_attentions`` returns). ``vl_twin`` gives it a
twin that shares every parameter and buffer and runs attention through ``IMPLEMENTATION``,
registered in transformers' attention interface. There each language-model layer hands over q
and k as its scores use them: rotated by position (LLaMA's rotary, Qwen2-VL's multimodal M-RoPE
over temporal, height and width sections: transformers rotates them before the interface is
called), each query head beside its key/value head, with the module's own scale. The vision
tower's attention and any other module run SDPA unchanged.

For the text positions T (every position that is not an image token) of N, each layer computes,
exactly as eager attention does (float32 softmax of q·kᵀ · scale + the additive mask; soft-capping
c·tanh(s / c) where the model caps):

    W[h, t, :] = softmax(q[h, t] · k[h, :]ᵀ · scale + mask[t, :])         (H, T, N), one layer at a time

and keeps only W at the image positions (H, T, I) and the share of each row on them (H, T).
The layer's output is SDPA's (the same numbers up to rounding). With ``grads=True`` the value
vectors at the image positions are kept and the output's gradient is read back: for
O = W V, ∂loss/∂W[h, t, j] = ∂loss/∂O[h, t] · V[h, j] (no N × N weights either).

The mask is transformers' SDPA mask: none for a causal model without padding (then causal rows
are built here), a boolean (N, N) where the model attends otherwise (a prefix of bidirectional
image tokens, a sliding window).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from attnviz.models.capture import shared_twin

IMPLEMENTATION = "attnviz_vl"
_LOCAL = threading.local()


@dataclass
class Recording:
    """What one forward pass hands over, per language-model layer in order."""

    text: torch.Tensor  # (T,) long: the text positions
    image: torch.Tensor  # (I,) long: the image positions
    layers: dict  # id(attention module) -> layer index
    grads: bool = False
    maps: list = field(default_factory=list)  # per layer (H, T, I) float32
    share: list = field(default_factory=list)  # per layer (H, T) float32
    values: list = field(default_factory=list)  # per layer (H, I, D) float32, with grads
    outputs: list = field(default_factory=list)  # per layer the output (1, N, H, D), with grads


def _rows(query, key, mask, scale: float, softcap, text: torch.Tensor, causal: bool) -> torch.Tensor:
    """Eager attention's weights of the text rows: (H, T, N) float32."""
    H, KV = query.shape[1], key.shape[1]
    q = query[0, :, text]  # (H, T, D)
    k = key[0].repeat_interleave(H // KV, dim=0)  # (H, N, D)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (H, T, N)
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    N = k.shape[1]
    if mask is None:
        if causal:
            allowed = torch.arange(N, device=s.device)[None, :] <= text[:, None]  # (T, N)
            s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
    else:
        m = mask[0, 0] if mask.dim() == 4 else mask  # (N, N)
        m = m[text][:, :N]  # (T, N)
        s = s.masked_fill(~m, torch.finfo(s.dtype).min) if m.dtype == torch.bool else s + m
    return torch.softmax(s, dim=-1, dtype=torch.float32)  # (H, T, N)


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None,
               **kwargs):
    """transformers' attention interface: SDPA, with the language model's text rows recorded."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rec: Recording | None = getattr(_LOCAL, "recording", None)
    layer = None if rec is None else rec.layers.get(id(module))
    softcap = kwargs.pop("softcap", None)
    if layer is None or query.shape[2] == 1:  # the vision tower, another thread, or one new token on a cache
        extra = {} if softcap is None else {"softcap": softcap}
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **extra, **kwargs)
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    with torch.no_grad():
        w = _rows(query.float(), key.float(), attention_mask, scale, softcap, rec.text, causal)  # (H, T, N)
        rec.maps.append(w[:, :, rec.image].contiguous())  # (H, T, I)
        rec.share.append(w[:, :, rec.image].sum(-1))  # (H, T)
    del w
    if softcap is None:
        out, _ = sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=scale,
                                        is_causal=is_causal, **kwargs)  # (1, N, H, D)
    else:  # SDPA does not cap: the eager formula, which holds N × N for this layer only
        k = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)  # (1, H, N, D)
        v = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)  # (1, H, N, D)
        s = torch.tanh(torch.matmul(query, k.transpose(2, 3)) * scale / softcap) * softcap  # (1, H, N, N)
        if attention_mask is not None:
            s = s.masked_fill(~attention_mask, torch.finfo(s.dtype).min) if attention_mask.dtype == torch.bool \
                else s + attention_mask
        out = torch.matmul(torch.softmax(s, -1, dtype=torch.float32).to(query.dtype), v).transpose(1, 2)
    if rec.grads:
        H = query.shape[1]
        v = value[0].repeat_interleave(H // value.shape[1], dim=0)  # (H, N, D)
        rec.values.append(v[:, rec.image].detach().float())  # (H, I, D)
        if not out.requires_grad:  # nothing upstream needs a gradient: the first layer's output is where it starts
            out = out.detach().requires_grad_(True)
        rec.outputs.append(out)
    return out, None


def _register() -> None:
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(IMPLEMENTATION, _attention)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


def attention_layers(language_model) -> dict:
    """id(attention module) -> layer index, for the language model's decoder layers."""
    return {id(layer.self_attn): i for i, layer in enumerate(language_model.layers)}


def vl_twin(owner, model):
    """``model``'s twin (see the module doc), made once per ``owner`` (the object that holds it)."""
    return shared_twin(owner, model, "_vl_twin", IMPLEMENTATION, _register)


@contextmanager
def recording(rec: Recording):
    """While inside, this thread's forward passes through a twin record into ``rec``."""
    before = getattr(_LOCAL, "recording", None)
    _LOCAL.recording = rec
    try:
        yield rec
    finally:
        _LOCAL.recording = before


def gradients(rec: Recording, loss: torch.Tensor) -> list[torch.Tensor]:
    """Per layer ∂loss/∂W at the text rows and image columns, (H, T, I): ∂loss/∂O[h, t] · V[h, j]."""
    outs = torch.autograd.grad(loss, rec.outputs)  # each (1, N, H, D)
    return [torch.matmul(g[0][rec.text].transpose(0, 1).float(), v.transpose(-1, -2))  # (H, T, D) @ (H, D, I)
            for g, v in zip(outs, rec.values, strict=True)]
