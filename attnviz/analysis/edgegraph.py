"""The graph edge attribution scores (``attnviz.analysis.eap``) and the model run over it: nodes
``input``, ``a{l}.h{h}`` (each head's q, k and v inputs apart), ``m{l}``, ``logits``, as
hannamw/EAP-IG's ``graph.py`` (circuitkit 0.2.0) builds them, and a run of a model in parts
(``attnviz.models.stacks``) in which every receiver reads a stream of its own.

- ``Graph``: the senders and receivers in order, which sender each receiver reads (``reads``), the
  edges' mask.
- ``node_activations``: every sender's output on a run the model made (``Trace``): the input stream,
  each head's z_h · W_O^h (TransformerLens's ``hook_result``, without b_O), each MLP's output.
- ``Split``: the model again, each layer's heads each making q, k and v from a stream of their own
  through the layer's norm (the module), their weights (``models.reading``: a grouped-query model's
  KV head's for each query head that reads it), the rotation the model gave the layer, a causal
  softmax and W_O per head; the MLPs, the final norm and the unembedding as the model's modules.
  ``into`` and ``out`` edit what each receiver reads and what each sender writes. ``check`` compares
  its logits with the model's own run: a model whose attention is another (Qwen3's normed q and k)
  is refused there.

May import: attnviz.models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models.base import ModelError
from attnviz.models.reading import reading, rotation, turned, w_o_heads
from attnviz.models.stacks import NORMS_IN, HFStack, Trace, first_found

# The norm before a layer's MLP (GPT-2's, then LLaMA's and GPT-NeoX's): the MLP's receiver reads the stream into it.
NORMS_MLP = ("ln_2", "post_attention_layernorm")
SPLIT_TOLERANCE = 1e-3  # the split run's logits against the model's own, relative to their largest


@dataclass(frozen=True)
class Graph:
    """The nodes and edges of a model (see the module doc)."""

    layers: int
    heads: int
    mlp: bool  # whether each layer has an MLP (Watch it learn's model has none)
    parallel: bool  # attention and MLP read the same stream (GPT-NeoX)

    @property
    def per_layer(self) -> int:
        return self.heads + int(self.mlp)

    @property
    def senders(self) -> list[str]:
        out = ["input"]
        for layer in range(self.layers):
            out += [f"a{layer}.h{h}" for h in range(self.heads)] + ([f"m{layer}"] if self.mlp else [])
        return out

    @property
    def receivers(self) -> list[str]:
        out = []
        for layer in range(self.layers):
            out += [f"a{layer}.h{h}<{c}>" for c in "qkv" for h in range(self.heads)]
            out += [f"m{layer}"] if self.mlp else []
        return out + ["logits"]

    def reads(self, key: tuple[str, int]) -> tuple[int, slice]:
        """(how many senders, in order, write before the receivers of ``key`` read; their receivers' columns).
        ``key``: ("a", layer) (the layer's 3H q, k, v inputs), ("m", layer) or ("logits", 0)."""
        kind, layer = key
        H, m = self.heads, int(self.mlp)
        first = layer * (3 * H + m)
        if kind == "a":
            return 1 + layer * self.per_layer, slice(first, first + 3 * H)
        if kind == "m":
            return 1 + layer * self.per_layer + (0 if self.parallel else H), slice(first + 3 * H, first + 3 * H + 1)
        return 1 + self.layers * self.per_layer, slice(self.layers * (3 * H + m), self.layers * (3 * H + m) + 1)

    def keys(self) -> list[tuple[str, int]]:
        """The receivers' groups in the order the stream reaches them."""
        out = []
        for layer in range(self.layers):
            out += [("a", layer)] + ([("m", layer)] if self.mlp else [])
        return out + [("logits", 0)]

    def receiver_layers(self) -> np.ndarray:
        """(receivers,) the layer each receiver reads in (the logits: ``layers``)."""
        out = np.zeros(len(self.receivers), dtype=int)
        for kind, layer in self.keys():
            out[self.reads((kind, layer))[1]] = layer if kind != "logits" else self.layers
        return out

    def allowed(self) -> np.ndarray:
        """(senders, receivers) bool: where there is an edge."""
        out = np.zeros((len(self.senders), len(self.receivers)), dtype=bool)
        for key in self.keys():
            prev, cols = self.reads(key)
            out[:prev, cols] = True
        return out


def graph_of(stack) -> Graph:
    hf = isinstance(stack, HFStack)
    mlp = all(m is not None for m in stack.mlp)
    parallel = bool(getattr(stack.model.config, "use_parallel_residual", False)) if hf else False
    return Graph(stack.layers, stack.heads, mlp, parallel)


def node_activations(stack, graph: Graph, trace: Trace) -> torch.Tensor:
    """(L, senders, E): every sender's output on ``trace``'s run (its first sequence)."""
    parts = [trace.resid_pre[0][0][:, None]]  # (L, 1, E)
    for layer in range(graph.layers):
        w_o = w_o_heads(stack, layer)  # (H, D, E)
        H, D, _E = w_o.shape
        z = trace.z[layer][0].view(-1, H, D)  # (L, H, D)
        parts.append(torch.einsum("lhd,hde->lhe", z, w_o))  # (L, H, E)
        if graph.mlp:
            parts.append(trace.mlp_out[layer][0][:, None])  # (L, 1, E)
    return torch.cat(parts, 1)


class Split:
    """The model run with every receiver's input apart (see the module doc): what the gradients and
    the faithfulness runs go through. ``trace``: a run of a prompt of the length to be run (its
    layers' rotary positions)."""

    def __init__(self, stack, graph: Graph, trace: Trace) -> None:
        self.stack, self.graph = stack, graph
        self.hf = isinstance(stack, HFStack)
        H = graph.heads
        self.layers = []
        for layer in range(graph.layers):
            r = reading(stack, layer)
            kv = torch.tensor([r.kv(h) for h in range(H)])  # each query head's KV head, ungrouped as EAP-IG needs
            w = torch.cat([r.w["q"], r.w["k"][kv], r.w["v"][kv]])  # (3H, E, D)
            D = w.shape[-1]
            b = [r.b["q"], None if r.b["k"] is None else r.b["k"][kv], None if r.b["v"] is None else r.b["v"][kv]]
            bias = None if all(x is None for x in b) else torch.cat([torch.zeros(H, D) if x is None else x for x in b])
            block = stack.blocks[layer]
            self.layers.append({
                "w": w, "b": bias,  # (3H, E, D), (3H, D)
                "scale": r.scale, "turns": rotation(trace, layer),
                "w_o": w_o_heads(stack, layer), "b_o": stack.w_o(layer)[1],  # (H, D, E), (E,)
                "norm": first_found(block, NORMS_IN) if self.hf else None,
                "norm_mlp": first_found(block, NORMS_MLP) if self.hf and graph.mlp else None,
                "mlp": stack.mlp[layer]})
        self.dtype = stack.model.dtype if self.hf else torch.float32
        self._senders: dict[int, tuple[Trace, torch.Tensor]] = {}

    def senders(self, trace: Trace) -> torch.Tensor:
        """(L, F, E) ``node_activations`` of ``trace``, once per run for this split (the scores and the curve
        read the corrupted run's both)."""
        if id(trace) not in self._senders:
            self._senders[id(trace)] = trace, node_activations(self.stack, self.graph, trace)
        return self._senders[id(trace)][1]

    def _module(self, module, x: torch.Tensor) -> torch.Tensor:
        return module(x.to(self.dtype)).float()

    def _attention(self, p: dict, streams: torch.Tensor) -> torch.Tensor:
        """The layer's heads' outputs (B, L, H, E) from each receiver's stream (3H, B, L, E): q, k, v inputs."""
        C, B, L, E = streams.shape
        H = C // 3
        normed = streams if p["norm"] is None else self._module(p["norm"], streams)  # (3H, B, L, E)
        made = torch.bmm(normed.reshape(C, B * L, E), p["w"])  # (3H, B·L, D)
        if p["b"] is not None:
            made = made + p["b"][:, None]
        made = made.view(C, B, L, -1).transpose(0, 1)  # (B, 3H, L, D)
        q, k, v = made[:, :H], made[:, H:2 * H], made[:, 2 * H:]  # (B, H, L, D) each
        if p["turns"] is not None:
            q, k = turned(q, *p["turns"]), turned(k, *p["turns"])
        scores = p["scale"] * q @ k.transpose(-1, -2)  # (B, H, L, L)
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        z = torch.softmax(scores, -1) @ v  # (B, H, L, D)
        return torch.einsum("bhld,hde->blhe", z, p["w_o"])  # (B, L, H, E)

    def _logits(self, x: torch.Tensor, tokens: list[int] | None = None) -> torch.Tensor:
        """(B, V) at the last position of the stream ``x`` (B, L, E) into the final norm; (B, len(tokens)) those
        tokens' only (a logit difference needs two of SmolLM2's 49,152 rows)."""
        if self.hf:
            if tokens is None:
                return self._module(lambda t: self.stack.lm_head(self.stack.norm(t)), x[:, -1:])[:, 0]
            head = self.stack.lm_head
            bias = None if getattr(head, "bias", None) is None else head.bias[tokens]
            return self._module(lambda t: torch.nn.functional.linear(self.stack.norm(t), head.weight[tokens], bias),
                                x[:, -1:])[:, 0]
        unembed = self.stack.model.unembed if tokens is None else self.stack.model.unembed[tokens]
        return x[:, -1] @ unembed.T.float()  # (B, V) or (B, len(tokens))

    def run(self, x0: torch.Tensor, into=None, out=None, start: int = 0, before: torch.Tensor | None = None,
            tokens: list[int] | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(logits (B, V), every sender's output in order, [(B, L, k, E)]) from the input node's output
        ``x0`` (B, L, E). ``into(key, streams, acts)`` edits the inputs of ``key``'s receivers (("a", l):
        (3H, B, L, E), q then k then v; ("m", l) and ("logits", 0): (1, B, L, E)), ``acts`` the senders'
        outputs so far; ``out(key, outputs)`` edits a sender group's outputs (B, L, k, E) (("input", 0),
        ("a", l), ("m", l)). From layer ``start`` > 0 (``start`` = layers: the logits alone), ``x0`` is the
        stream into that layer and ``before`` (B, L, k, E) the senders before it, as one group: rows whose
        edits all lie at or past ``start`` run only from there (a run's layers before are the model's own).
        ``tokens``: the logits of these tokens only, (B, len(tokens))."""
        g = self.graph
        if start:
            x, acts = x0, [before]
        else:
            x = x0 if out is None else out(("input", 0), x0[:, :, None])[:, :, 0]
            acts = [x[:, :, None]]
        for layer, p in enumerate(self.layers[start:], start):
            streams = x[None].expand(3 * g.heads, *x.shape)  # (3H, B, L, E)
            if into is not None:
                streams = into(("a", layer), streams, acts)
            heads = self._attention(p, streams)  # (B, L, H, E)
            if out is not None:
                heads = out(("a", layer), heads)
            acts.append(heads)
            mid = x + heads.sum(2) + (0 if p["b_o"] is None else p["b_o"])  # (B, L, E)
            if not g.mlp:
                x = mid
                continue
            read = (x if g.parallel else mid)[None]  # (1, B, L, E)
            if into is not None:
                read = into(("m", layer), read, acts)
            m = self._module(lambda t, p=p: p["mlp"](p["norm_mlp"](t)), read[0])[:, :, None]  # (B, L, 1, E)
            if out is not None:
                m = out(("m", layer), m)
            acts.append(m)
            x = mid + m[:, :, 0]
        final = x[None]
        if into is not None:
            final = into(("logits", 0), final, acts)
        return self._logits(final[0], tokens), acts

    def check(self, logits: torch.Tensor, trace: Trace) -> None:
        """``logits`` (V,) of a split run of ``trace``'s prompt against the model's own; ``ModelError``
        where they differ."""
        want = trace.logits[0]
        gap = float((logits.detach() - want).abs().max())
        if gap > SPLIT_TOLERANCE * max(1.0, float(want.abs().max())):
            raise ModelError(f"{self.stack.name}: run with each head's inputs apart, the model gives other logits "
                             f"than its own run (by up to {gap:.3g}): its attention is not the q·k softmax over normed "
                             "streams that attnviz splits (it knows GPT-2, LLaMA and GPT-NeoX), so its edges cannot be "
                             "scored.")
