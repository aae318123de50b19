"""The backward view: how one query's output depends on every token.

Autograd differentiates a scalar of query q's output with respect to V, K, Q and the
embeddings X; hooks on Q, K and V record their gradients as they flow back (the seed
tutorial's ``register_hook``). Per-token gradient norms say which positions could
change that output most.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.core.devices import resolve_device
from attnviz.i18n import N_
from attnviz.run.config import AttentionConfig
from attnviz.run.run import shared_result

SCALARS = ("sum", "norm", "dim0")
SCALAR_LABELS = {"sum": N_("sum of the output vector"), "norm": N_("length ‖o‖ of the output vector"),
                 "dim0": N_("first component o[0] of the output vector")}


@dataclass
class TokenGradients:
    tokens: list[str]  # queries' tokens
    keys: list[str]  # keys'/values' tokens
    norms: dict[str, np.ndarray]  # "X", "Q", "K", "V" -> per-token gradient norm
    value: float  # the scalar that was differentiated
    hooked: dict[str, float]  # total gradient norm seen by each hook


def scalar_of(o: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "sum":
        return o.sum()
    if kind == "norm":
        return o.norm()
    if kind == "dim0":
        return o[..., 0].sum()
    raise ValueError(f"Unknown scalar {kind!r}; choose one of {', '.join(SCALARS)}.")


def token_gradients(config: AttentionConfig, seq: int = 0, query: int = 0, scalar: str = "sum") -> TokenGradients:
    """d scalar(output[seq, query]) / d {X, Q, K, V}, as a norm per token (over heads and features).

    Runs on ``config.device``, like the forward pass; the norms come back on the CPU.
    """
    config = config.with_(dropout=0.0)  # a gradient of a random mask teaches nothing
    result = shared_result(config)  # the run the pages show (the shared results): its inputs and mask
    result.require_complete()  # autograd keeps every step: the same budget as the teaching pages
    if not 0 <= seq < len(result.tokens):
        raise ValueError(f"Sentence {seq + 1} does not exist (the text has {len(result.tokens)}).")
    if not 0 <= query < len(result.tokens[seq]):
        raise ValueError(f"Query position {query} is past the last token ({len(result.tokens[seq]) - 1}).")
    device = resolve_device(config.device)
    model = copy.deepcopy(result.model).to(device)  # the result's module may be shared (a pretrained layer)
    x = result.embeddings.to(device).clone().requires_grad_(True)  # (N, L, E)
    x_kv = result.source_embeddings.to(device).clone().requires_grad_(True) if result.is_cross else x
    mask = None if result.mask is None else result.mask.to(device)
    hooked: dict[str, float] = {}
    with torch.enable_grad():
        steps = model.steps(x, x_kv if result.is_cross else None, None, mask)
        for name, t in (("Q", steps.q), ("K", steps.k), ("V", steps.v)):
            t.retain_grad()
            t.register_hook(lambda g, name=name: hooked.__setitem__(name, float(g.norm())) or g)
        value = scalar_of(steps.output[seq, query], scalar)
        value.backward()
    per_token = lambda g: g[seq].transpose(0, 1).flatten(1).norm(dim=-1).cpu().numpy()  # (H, T, D) -> (T,)  # noqa: E731
    norms = {
        "X": x.grad[seq].norm(dim=-1).cpu().numpy(),  # (L,)
        "Q": per_token(steps.q.grad),
        "K": per_token(steps.k.grad),
        "V": per_token(steps.v.grad),
    }
    if result.is_cross:
        norms["source X"] = x_kv.grad[seq].norm(dim=-1).cpu().numpy()
    return TokenGradients(result.tokens[seq], result.source_tokens[seq], norms, float(value.detach()), hooked)
