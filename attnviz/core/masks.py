"""Attention masks: causal, local window and padding, combined with ``&``.

Convention (the one of ``torch.nn.functional.scaled_dot_product_attention``): a
**bool mask is True where a query MAY attend** to a key; a float mask is added to
the scores (0 = keep, -inf = block). This is the seed tutorial's convention too
(``mask == 0`` is blocked).

``torch.nn.MultiheadAttention`` uses the **inverse** convention for its bool
``attn_mask`` and ``key_padding_mask``: True there means "may NOT attend". The only
conversions between the two live at the bottom of this module.

Shapes use PyTorch's letters: N batch, H heads, L query length, S key length.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

MASK_KINDS = ("none", "causal", "padding", "window", "causal+window")
WINDOW_KINDS = ("window", "causal+window")  # the kinds that read the window


def _check_len(name: str, value: int) -> None:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def causal_mask(L: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Query i may see keys j <= i: bool (L, S), lower triangle True.

    For S != L the triangle is aligned at the top-left, as in PyTorch's
    ``is_causal=True``.
    """
    S = L if S is None else S
    _check_len("L", L)
    _check_len("S", S)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # (L, S)


def local_window_mask(L: int, window: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Query i may see keys j with |i - j| <= window: bool (L, S), a band."""
    S = L if S is None else S
    _check_len("L", L)
    _check_len("S", S)
    if int(window) != window or window < 0:
        raise ValueError(f"The window must be a whole number >= 0, got {window!r}.")
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    return (i - j).abs() <= window  # (L, S)


def dilated_window_mask(L: int, window: int, dilation: int, *, device=None) -> torch.Tensor:
    """Strided (dilated) local attention: query i sees keys j with |i − j| ≤ window·dilation
    and i − j a multiple of ``dilation`` (Longformer's dilated window): (L, L) bool."""
    _check_len("L", L)
    if window < 0 or dilation < 1:
        raise ValueError(f"The window must be 0 or more and the dilation at least 1, got {window}, {dilation}.")
    d = torch.arange(L, device=device)[:, None] - torch.arange(L, device=device)[None, :]  # (L, L)
    return (d.abs() <= window * dilation) & (d % dilation == 0)


def global_tokens_mask(L: int, globals_: int, *, device=None) -> torch.Tensor:
    """The first ``globals_`` tokens see every key and are seen by every query (Longformer /
    BigBird's global tokens); combine with ``|`` and a window: (L, L) bool."""
    _check_len("L", L)
    g = torch.arange(L, device=device) < globals_  # (L,)
    return g[:, None] | g[None, :]  # (L, L)


def padding_mask(lengths: Sequence[int] | torch.Tensor, S: int, *, device=None) -> torch.Tensor:
    """Block padded keys: bool (N, 1, 1, S), True for the first ``lengths[n]`` keys.

    Broadcasts over heads and queries, so it composes with a (L, S) mask by ``&``.
    """
    _check_len("S", S)
    lengths = torch.as_tensor(lengths, device=device).reshape(-1)  # (N,)
    if lengths.numel() == 0:
        raise ValueError("lengths must name at least one sequence.")
    if (lengths < 0).any() or (lengths > S).any():
        raise ValueError(f"Every length must be between 0 and S={S}, got {lengths.tolist()}.")
    j = torch.arange(S, device=lengths.device)  # (S,)
    return (j.unsqueeze(0) < lengths.unsqueeze(1)).view(-1, 1, 1, S)  # (N, 1, 1, S)


def build_mask(
    kind: str,
    L: int,
    S: int | None = None,
    *,
    window: int = 0,
    lengths: Sequence[int] | None = None,
    device=None,
) -> torch.Tensor | None:
    """The mask for one of ``MASK_KINDS``: bool, broadcastable to (N, H, L, S), or None.

    Every kind except ``none`` also blocks padded keys when ``lengths`` is given, so
    a causal or window mask on a padded batch never lets a real token see a pad.
    ``none`` is literal: no mask at all, pads included (useful to see why padding
    masks exist).
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"Unknown mask {kind!r}; choose one of {', '.join(MASK_KINDS)}.")
    S = L if S is None else S
    if kind == "none":
        return None
    mask: torch.Tensor | None = None
    if kind in ("causal", "causal+window"):
        mask = causal_mask(L, S, device=device)
    if kind in WINDOW_KINDS:
        band = local_window_mask(L, window, S, device=device)
        mask = band if mask is None else mask & band  # (L, S)
    if lengths is not None:
        pad = padding_mask(lengths, S, device=device)  # (N, 1, 1, S)
        mask = pad if mask is None else pad & mask  # (N, 1, L, S)
    if mask is None:  # "padding" with nothing padded: everything may attend
        mask = torch.ones(L, S, dtype=torch.bool, device=device)
    return mask


def to_additive(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Bool (True = attend) -> float mask to add to scores (0 or -inf)."""
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill_(~mask, float("-inf"))


# --- nn.MultiheadAttention's inverse convention -------------------------------------


def to_torch_mha_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our mask -> ``nn.MultiheadAttention``'s ``attn_mask``.

    Bool masks are inverted (there True = blocked); float masks are additive in both
    conventions and pass through unchanged.
    """
    return ~mask if mask.dtype == torch.bool else mask


def from_torch_mha_mask(mask: torch.Tensor) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``attn_mask`` -> our convention (the inverse of above)."""
    return ~mask if mask.dtype == torch.bool else mask


def to_key_padding_mask(lengths: Sequence[int] | torch.Tensor, S: int) -> torch.Tensor:
    """Lengths -> ``nn.MultiheadAttention``'s ``key_padding_mask``: (N, S), True = pad."""
    return ~padding_mask(lengths, S).view(-1, S)  # (N, S)
