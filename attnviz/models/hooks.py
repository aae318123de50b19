"""Forward hooks on a ``transformers`` model's attention projections: what the followed
layer's heads hand to the output projection (``HeadParts``), and a head knocked out.

The attention modules are found by the names of their projections (``FAMILIES``), so one
table covers GPT-2 (one Conv1D for q, k and v), LLaMA (grouped-query: a key/value head is
repeated for the query heads that share it), BERT and RoBERTa, T5, BART and ViT. The model
is shared by every session of the server: a hook acts only in the thread that set it.

Positions that a module adds after its projections (rotary q and k, an additive position bias)
are read by a hook on the module itself (``positions``): the q and k kept are the ones the
scores use, with the bias beside them, and the check says whether they give the weights.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch

from attnviz.i18n import _
from attnviz.models import positions
from attnviz.models.base import HeadParts

# The query, key, value and output projections, relative to the attention module. One Conv1D
# holding q, k and v at once (GPT-2's c_attn) is named three times; Conv1D keeps its weight (in, out).
FAMILIES = (
    ("c_attn", "c_attn", "c_attn", "c_proj"),  # GPT-2
    ("q_proj", "k_proj", "v_proj", "o_proj"),  # LLaMA (grouped-query), ViT (transformers 5)
    ("q_proj", "k_proj", "v_proj", "out_proj"),  # BART
    ("self.query", "self.key", "self.value", "output.dense"),  # BERT, RoBERTa
    ("q", "k", "v", "o"),  # T5
)
CROSS_NAMES = ("encoder_attn", "EncDecAttention", "crossattention")  # a decoder's attention over the encoder
QK_TOLERANCE = 1e-4  # softmax(q·k · scale + bias + mask) against the model's own weights


def attention_modules(model) -> dict[str, list[tuple]]:
    """Per stack ("encoder", "decoder", "cross"), every layer's (attention module, its q, k, v
    and output projections), in layer order; a model with one stack lists it as its only one."""
    found: dict[str, list[tuple]] = {}
    for name, m in model.named_modules():
        for family in FAMILIES:
            try:
                subs = [m.get_submodule(x) for x in family]
            except AttributeError:
                continue
            path = name.split(".")
            stack = "cross" if any(c in path for c in CROSS_NAMES) else "decoder" if "decoder" in path else "encoder"
            found.setdefault(stack, []).append((m, *subs))
            break
    return found


@contextmanager
def watch(watched: tuple | None):
    """Keep what the followed layer's projections see in this thread's forward pass: q, k, v
    (their outputs), the output projection's input ("joined") and output, and the positions the
    attention module adds itself ("cos" and "sin": rotary; "bias": added to the scores)."""
    seen: dict[str, torch.Tensor] = {}
    if watched is None:
        yield seen
        return
    module, q, k, v, o = watched
    owner = threading.get_ident()

    def keep(name):
        def hook(_m, _args, out):
            if threading.get_ident() == owner and name not in seen:  # the first call: the layer's own
                seen[name] = out.detach().float()
        return hook

    def keep_in(_m, args):
        if threading.get_ident() == owner and "joined" not in seen:
            seen["joined"] = args[0].detach().float()

    calls = []

    def keep_positions(m, args, kwargs, out):
        if threading.get_ident() == owner and not calls:  # the first call only, as above
            calls.append(1)
            seen.update(positions.position_inputs(m, args, kwargs, out))

    handles = [o.register_forward_pre_hook(keep_in), o.register_forward_hook(keep("output")),
               module.register_forward_hook(keep_positions, with_kwargs=True)]
    if q is k:  # one packed projection
        handles.append(q.register_forward_hook(keep("qkv")))
    else:
        handles += [q.register_forward_hook(keep("q")), k.register_forward_hook(keep("k")),
                    v.register_forward_hook(keep("v"))]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def head_parts(watched, seen: dict, w: torch.Tensor, mask, lengths: list[int],
               kv_lengths: list[int]) -> HeadParts | None:
    """The followed layer's ``HeadParts`` from what ``watch`` saw (None: nothing watched).
    ``w``: the model's own weights (N, H, L, S); whether q and k give them is checked when a
    view first needs them (``HeadParts.confirm_qk``), not in every forward pass."""
    if watched is None or "joined" not in seen or not ({"qkv"} <= seen.keys() or {"q", "k", "v"} <= seen.keys()):
        return None
    module, _q, _k, _v, o = watched
    N, H, L, S = w.shape
    if "qkv" in seen:
        E = seen["qkv"].shape[-1] // 3
        q, k, v = seen["qkv"].split(E, dim=-1)  # 3 × (N, L, E)
    else:
        q, k, v = seen["q"], seen["k"], seen["v"]  # (N, L, H·D), (N, S, kv·D) × 2
    D = q.shape[-1] // H
    kv = k.shape[-1] // D

    def heads(t, n):  # (N, T, n·D) -> (N, H, T, D), a key/value head repeated for its query heads
        t = t.reshape(N, t.shape[1], n, D).transpose(1, 2)
        return t.repeat_interleave(H // n, dim=1) if n != H else t

    q, k, v = heads(q, H), heads(k, kv), heads(v, kv)  # (N, H, L|S, D)
    rotary = "cos" in seen and seen["cos"].shape[-2] == L == k.shape[2]  # the scores use q and k rotated by position
    if rotary:
        q, k = positions.rotate(module, q, k, seen["cos"], seen["sin"])  # (N, H, L, D), (N, H, S, D)
    bias = seen.get("bias")
    bias = bias.expand(N, H, L, S) if bias is not None and bias.shape[-3:] == (H, L, S) else None  # (N, H, L, S)
    weight = o.weight.detach().float()
    w_o = weight if isinstance(o, torch.nn.Linear) else weight.T  # (E, H·D): a Conv1D holds (in, out)
    b_o = None if getattr(o, "bias", None) is None else o.bias.detach().float()
    scale = next((float(m.scaling) for m in (module, getattr(module, "self", None))
                  if isinstance(getattr(m, "scaling", None), (int, float))), D ** -0.5)
    parts = HeadParts(v, seen["joined"], seen["output"], w_o, b_o, q, k, scale, bias=bias, rotary=rotary)

    def check() -> str:  # softmax(q·k · scale + bias + mask) against the model's own weights, on the real rows
        scores = (q @ k.transpose(-1, -2)) * scale  # (N, H, L, S)
        if bias is not None:
            scores = scores + bias  # (N, H, L, S)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        mine = torch.softmax(scores, -1).nan_to_num(0.0)  # (N, H, L, S)
        worst = max(float((mine[n, :, :lengths[n], :kv_lengths[n]] - w[n, :, :lengths[n], :kv_lengths[n]])
                          .abs().max()) for n in range(N))
        return "" if worst <= QK_TOLERANCE else _(
            "its scores are not q·k × scale, even with rotary positions or a position bias taken in: the model "
            "changes q, k or the scores inside its attention (a normalisation of q and k, say), after the "
            "projections attnviz watches")

    parts.qk_check = check
    return parts


def rerun_without(model, o, inputs: dict, heads: list[int], H: int):
    """``model(**inputs)`` (a batch of len(heads) copies of one sequence), row r with head
    ``heads[r]``'s slice of the output projection ``o``'s input zeroed (-1: none), by a forward
    pre-hook. Returns (the model's output, ``o``'s output (B, L, E))."""
    owner = threading.get_ident()
    kept: dict[str, torch.Tensor] = {}

    def zero(_m, args):
        if threading.get_ident() != owner or "output" in kept:
            return None
        x = args[0].clone()  # (B, L, H·D)
        d = x.shape[-1] // H
        for r, h in enumerate(heads):
            if h >= 0:
                x[r, :, h * d:(h + 1) * d] = 0
        return (x, *args[1:])

    def keep(_m, _args, out):
        if threading.get_ident() == owner and "output" not in kept:
            kept["output"] = out.detach().float()

    handles = [o.register_forward_pre_hook(zero), o.register_forward_hook(keep)]
    try:
        with torch.no_grad():
            out = model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return out, kept["output"]
