"""A transformers model's own queries and keys, layer by layer, from a forward pass that keeps
no weights: what long contexts need (``attnviz.analysis.longcontext``).

The loaded model runs eager attention (``hf``: ``output_attentions`` needs it), whose mask alone
is L × S numbers. ``twin`` gives it a twin that shares every parameter and buffer (nothing is
copied but the modules' small Python objects and the config) and runs attention through
``IMPLEMENTATION``, registered in transformers' attention interface: SDPA's own kernel, which
is also where each layer's q and k are read. They are the ones the scores use: rotated by
position where the model is rotary, normalised where it normalises them (Qwen3), each query
head beside its key/value head, with the module's own scale. The twin is the model's, so a
shared model's other sessions never see a change.

``each_layer(consumer)`` hands the consumer, in this thread only, each layer's (q, k, each
query's log-sum-exp, scale, causal) as the forward pass reaches it (one new token on a cache:
its q and every cached key, no log-sum-exp). On the CPU the flash
kernel that SDPA runs returns the log-sum-exp with the output; elsewhere it is ``None`` and the
consumer computes it. An attention that is not softmax(q·k · scale) under a causal (or no)
mask is refused with what it does instead.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from contextlib import contextmanager

import torch

from attnviz.models.base import ModelError

IMPLEMENTATION = "attnviz_long"
_LOCAL = threading.local()
_TWIN_LOCK = threading.Lock()
# What an attention passes besides q, k, v and a mask, and what it does instead of softmax(q·k · scale).
NOT_QK = {
    "softcap": "caps its scores with c·tanh(s / c) before the softmax (soft-capping)",
    "s_aux": "adds learned sink logits to each row's softmax (attention sinks of its own)",
    "sinks": "adds learned sink logits to each row's softmax (attention sinks of its own)",
    "position_bias": "adds a position bias to its scores (relative positions, ALiBi)",
}


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None,
               **kwargs):
    """transformers' attention interface: SDPA, with each layer's q and k handed to this thread's consumer."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    consumer = getattr(_LOCAL, "consumer", None)
    if consumer is None or query.shape[2] == 1:  # another thread, or one new token on a cache (it sees every key)
        if consumer is not None:
            consumer(query[0], key[0], None, float(scaling) if scaling is not None else query.shape[-1] ** -0.5, False)
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    for name, what in NOT_QK.items():
        if kwargs.get(name) is not None:
            raise ModelError(f"Its attention is not softmax(q·k · scale): it {what}.")
    if attention_mask is not None:
        raise ModelError("Its attention uses a mask other than a causal one (a sliding window, or padding): long "
                         "attention reads one sequence under a causal mask, or none.")
    causal = bool(query.shape[2] > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True)))
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    lse = None
    flash = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if flash is not None and query.device.type == "cpu" and query.dtype == torch.float32 \
            and query.shape[2] == key.shape[2]:
        k, v = repeat_kv(key, groups), repeat_kv(value, groups)  # (N, H, S, D)
        try:
            out, lse = flash(query, k, v, 0.0, causal, scale=scale)  # (N, H, L, D), (N, H, L)
            out = out.transpose(1, 2).contiguous()  # (N, L, H, D), as sdpa_attention_forward returns it
        except (RuntimeError, TypeError):  # a shape the kernel does not take: SDPA, and the consumer's own lse
            lse = None
    if lse is None:
        out, _ = sdpa_attention_forward(module, query, key, value, None, dropout=0.0, scaling=scale,
                                        is_causal=is_causal, **kwargs)
    consumer(query[0], key[0], None if lse is None else lse[0], scale, causal)
    return out, None


def _register() -> None:
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(IMPLEMENTATION, _attention)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


def shared_twin(owner, model, attr: str, implementation: str, register: Callable[[], None]):
    """A twin of ``model``: a deep copy that shares every parameter and buffer with it (no weight copied), its
    attention through transformers' interface ``implementation`` (registered by ``register``), made once per
    ``owner`` (the loaded model that holds it) and kept on it as ``attr``. Long context's and the vision-language
    recording's twins are both this one."""
    made = owner.__dict__.get(attr)
    if made is not None:
        return made
    with _TWIN_LOCK:
        made = owner.__dict__.get(attr)
        if made is None:
            register()
            shared = {id(t): t for t in [*model.parameters(), *model.buffers()]}
            made = copy.deepcopy(model, shared)
            try:
                made.set_attn_implementation(implementation)
            except (ValueError, KeyError, AttributeError, TypeError):
                made.config._attn_implementation = implementation
            if getattr(made.config, "_attn_implementation", None) != implementation:
                raise ModelError("Its attention does not run through transformers' attention interface, so attnviz "
                                 "cannot read its queries and keys without its weights.")
            owner.__dict__[attr] = made
    return made


def twin(owner, model):
    """``model``'s twin (see the module doc), made once per ``owner`` (the loaded model that holds it)."""
    return shared_twin(owner, model, "_long_twin", IMPLEMENTATION, _register)


@contextmanager
def each_layer(consumer: Callable):
    """While inside, this thread's forward passes through a twin hand each layer's
    (q (H, L, D), k (KV, S, D), lse (H, L) or None, scale, causal) to ``consumer``, in layer order."""
    before = getattr(_LOCAL, "consumer", None)
    _LOCAL.consumer = consumer
    try:
        yield
    finally:
        _LOCAL.consumer = before
