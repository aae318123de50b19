"""Positions a transformers model adds inside its attention, after the projections that
``hooks`` watches, found by what the attention module's forward takes (never by the model's
name):

- **rotary** (LLaMA and the models built like it): the module is given
  ``position_embeddings = (cos, sin)`` and rotates q and k by position before q·k. The q and
  k that give the scores are the rotated ones: ``rotate`` applies the module's own
  ``apply_rotary_pos_emb`` (from its modelling file), or the standard rotate-half formula
  where the file has none.
- **an additive bias** (T5's relative position bias): the module takes ``position_bias``
  and adds it to q·k (T5 does not scale: its ``scaling`` is 1). The first layer of a stack
  computes the bias and returns it beside its output, ``(output, position_bias, weights)``;
  the later layers are given it. A cross-attention is given none (a zero bias, no bias).

Whether q, k and the bias give the model's own weights is still checked (``hooks``).
"""

from __future__ import annotations

import inspect
import sys

import torch


def _named(module, args: tuple, kwargs: dict) -> tuple[dict, set[str]]:
    """The forward's arguments by name (positional ones too) and every name it takes."""
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return dict(kwargs), set(kwargs)
    named = dict(kwargs)
    try:
        named.update(sig.bind_partial(*args).arguments)
    except TypeError:
        pass
    return named, set(sig.parameters)


def position_inputs(module, args: tuple, kwargs: dict, out) -> dict[str, torch.Tensor]:
    """What a forward hook (``with_kwargs=True``) sees of the positions the module added:
    "cos" and "sin" (rotary, (N|1, L, d)) and "bias" (added to the scores, (N|1, H, L, S))."""
    named, takes = _named(module, args, kwargs)
    found: dict[str, torch.Tensor] = {}
    rotary = named.get("position_embeddings")
    if isinstance(rotary, (tuple, list)) and len(rotary) == 2 and all(torch.is_tensor(t) for t in rotary):
        found["cos"], found["sin"] = (t.detach().float() for t in rotary)
    if "position_bias" in takes:
        bias = named.get("position_bias")
        if bias is None and isinstance(out, tuple):  # made here: returned between the output and the weights
            bias = next((t for t in out[1:-1] if torch.is_tensor(t) and t.dim() == 4), None)
        if torch.is_tensor(bias) and bias.is_floating_point():
            bias = bias.detach()
            # Older transformers added the mask into T5's bias: an entry at the dtype's minimum is the mask's
            # (attnviz applies the mask itself), not a position's.
            bias = bias.masked_fill(bias <= torch.finfo(bias.dtype).min / 2, 0).float()
            if bool(bias.any()):  # a zero bias (T5's cross-attention) is no bias
                found["bias"] = bias
    return found


def rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The standard rotary formula x·cos + rotate_half(x)·sin on the first d = cos's last
    dimensions (the rest, a partial rotary's, as they are). x (N, H, T, D), cos and sin (N|1, T, d)."""
    d = cos.shape[-1]
    r, rest = x[..., :d], x[..., d:]  # (N, H, T, d), (N, H, T, D - d)
    half = torch.cat((-r[..., d // 2:], r[..., :d // 2]), -1)  # (N, H, T, d)
    return torch.cat((r * cos[:, None] + half * sin[:, None], rest), -1)  # (N, H, T, D)


def rotate(module, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
           sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q (N, H, L, D) and k (N, H, S, D) rotated by position as the module rotates them: with
    its modelling file's ``apply_rotary_pos_emb`` where it has one that takes (q, k, cos, sin),
    else with ``rotate_half``."""
    own = getattr(sys.modules.get(type(module).__module__), "apply_rotary_pos_emb", None)
    if callable(own):
        try:
            q2, k2 = own(q, k, cos, sin)  # (N, H, L, D), (N, H, S, D)
            if q2.shape == q.shape and k2.shape == k.shape:
                return q2.float(), k2.float()
        except (TypeError, ValueError, RuntimeError):  # another signature: the standard formula
            pass
    return rotate_half(q, cos, sin), rotate_half(k, cos, sin)
