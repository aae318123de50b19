"""A causal language model as a stack of layers over a residual stream: what activation
patching and direct logit attribution need of it (``attnviz.analysis.patching``).

    resid_pre[0] = embeddings ;  resid_pre[ℓ+1] = layer_ℓ(resid_pre[ℓ]) ;  logits = W_U · norm(resid_final)

A ``Stack`` runs the whole model once and keeps, for every layer, its residual stream on the way
in (``resid_pre``), what its heads hand to the attention's output projection (``z``: the heads'
outputs before W_O, (N, L, H·D)) and what its attention and its MLP add to the stream. It can then
run the layers from any one on, for a batch of residual streams, with some heads' z replaced
(``from_layer``): a patched run starts from the corrupted run's stream at the patched layer, as
nothing below it changes.

- ``HFStack``: a transformers causal LM in a folder (GPT-2, LLaMA with grouped-query attention,
  GPT-NeoX), found by its structure, not its name: the ``ModuleList`` of its decoder layers, each
  layer's attention output projection, its MLP, the final norm and the unembedding. Each layer is
  called with the arguments the model itself gave it (its mask, its rotary positions), which a
  forward pre-hook keeps.
- ``TinyStack``: Watch it learn's attention-only model (``attnviz.models.tiny``).

Nothing here is a definition of patching or attribution; it is only how to run the model in parts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch

from attnviz.models.base import ModelError
from attnviz.models.tiny import AttentionOnly

# A layer's attention output projection (W_O) and its MLP, relative to the layer, and the final
# norm relative to the base model: the names of the architectures attnviz runs.
OUT_PROJECTIONS = ("attn.c_proj", "self_attn.o_proj", "attention.dense", "attn.out_proj", "self_attn.out_proj",
                   "self_attention.dense")
MLPS = ("mlp", "feed_forward")
FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm")
# Where a layer's attention projects its normed stream to q, k and v, and where each head lies in
# that projection's output: GPT-2's one Conv1D [q | k | v] (each E wide), GPT-NeoX's one Linear with
# each head's [q | k | v] side by side, LLaMA's three Linears (k and v with one head per KV head).
NORMS_IN = ("ln_1", "input_layernorm")
FUSED_QKV = "attn.c_attn"
HEADWISE_QKV = "attention.query_key_value"
APART_QKV = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj"}
SUM_TOLERANCE = 1e-4  # the residual stream against the sum of its parts, relative to its norm
# Architectures whose attention and MLP read the same stream side by side (x + attn(x) + mlp(x)): no stream
# after the attention alone. GPT-NeoX says so in its config (``use_parallel_residual``).
PARALLEL_TYPES = ("gptj", "codegen", "phi")


@dataclass
class Trace:
    """One full run (batch N), everything on the CPU in float32."""

    resid_pre: list[torch.Tensor]  # per layer: the stream into it (N, L, E)
    z: list[torch.Tensor]  # per layer: its heads' outputs before W_O (N, L, H·D)
    attn_out: list[torch.Tensor]  # per layer: what its attention adds to the stream (N, L, E)
    mlp_out: list[torch.Tensor | None]  # per layer: what its MLP adds (N, L, E); None: no MLP
    resid_final: torch.Tensor  # the stream into the final norm (N, L, E)
    logits: torch.Tensor  # at the last position (N, V)
    weights: list[torch.Tensor] = field(default_factory=list)  # per layer (N, H, L, L), when asked for
    # Per layer, the arguments the model gave it after the stream (its mask, its rotary positions): a run
    # from a layer on (``from_layer``) calls each layer with them. They hang on the positions only, so a
    # trace of one prompt serves every prompt of its length.
    calls: list[tuple] = field(default_factory=list)


@dataclass(frozen=True)
class Norm:
    """A norm before a reader of the stream (an attention, the unembedding): what it does to a stream."""

    kind: str  # "layer" (LayerNorm: centre, then divide), "rms" (divide only) or "none"
    eps: float
    weight: torch.Tensor | None  # the norm's weight (E,)
    bias: torch.Tensor | None  # the norm's bias (E,)

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """The norm's divisor for stream ``x`` (..., E): σ (LayerNorm) or the root mean square (RMS); 1 for none."""
        if self.kind == "layer":
            return torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + self.eps)  # (..., 1)
        if self.kind == "rms":
            return torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return torch.ones(*x.shape[:-1], 1, dtype=x.dtype)


NO_NORM = Norm("none", 0.0, None, None)


def norm_of(module) -> Norm:
    """A transformers norm module as a ``Norm``: ``nn.LayerNorm`` is LayerNorm, anything else RMSNorm."""
    kind = "layer" if isinstance(module, torch.nn.LayerNorm) else "rms"
    eps = float(getattr(module, "eps", None) or getattr(module, "variance_epsilon", None) or 1e-5)
    b = getattr(module, "bias", None)
    return Norm(kind, eps, module.weight.detach().float(), None if b is None else b.detach().float())


@dataclass(frozen=True)
class Unembedding(Norm):
    """How the last position's stream becomes logits: the final norm (its fields), then W_U (and its bias)."""

    w_u: torch.Tensor | None = None  # (V, E)
    b_u: torch.Tensor | None = None  # (V,)


def _at(module, dotted: str):
    try:
        return module.get_submodule(dotted)
    except AttributeError:
        return None


def first_found(module, names):
    """The first of the dotted submodule ``names`` that ``module`` has; None without one."""
    return next((m for m in (_at(module, n) for n in names) if m is not None), None)


def _mine(hook):
    """``hook`` acting only in the thread that set it: the model is shared by every session of the
    server (and by every sweep), and another thread's forward pass must not be read or changed."""
    owner = threading.get_ident()

    def mine(*args):
        return hook(*args) if threading.get_ident() == owner else None
    return mine


def _w_o(o) -> torch.Tensor:
    """The output projection's weight as nn.Linear holds it: (E, H·D) (a Conv1D holds (in, out))."""
    w = o.weight.detach().float()
    return w if isinstance(o, torch.nn.Linear) else w.T


class HFStack:
    """A transformers causal LM in parts (see the module doc)."""

    def __init__(self, name: str, model, heads: int) -> None:
        self.name, self.model, self.heads = name, model, int(heads)
        n = int(getattr(model.config, "num_hidden_layers", 0) or getattr(model.config, "n_layer", 0))
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n]
        if not lists:
            raise ModelError(f"{name}: attnviz cannot find its {n} decoder layers, so it cannot patch them.")
        self.blocks = lists[0]
        self.o = [first_found(b, OUT_PROJECTIONS) for b in self.blocks]
        self.mlp = [first_found(b, MLPS) for b in self.blocks]
        base = getattr(model, "base_model", model)
        self.norm = first_found(base, FINAL_NORMS)
        self.lm_head = model.get_output_embeddings()
        if None in self.o or self.norm is None or self.lm_head is None:
            raise ModelError(f"{name}: attnviz cannot find each layer's attention output projection, the final "
                             f"norm and the unembedding it needs to patch heads (it knows GPT-2, LLaMA and GPT-NeoX).")

    @property
    def layers(self) -> int:
        return len(self.blocks)

    @property
    def parallel(self) -> bool:
        """Whether each layer's attention and MLP read the same stream side by side (GPT-NeoX with
        ``use_parallel_residual``, GPT-J): then no stream holds the attention's output alone."""
        cfg = self.model.config
        return bool(getattr(cfg, "use_parallel_residual", False)) or cfg.model_type in PARALLEL_TYPES

    def _hooks(self, keep: dict):
        handles = []

        def pre_block(i):
            def hook(_m, args, kwargs):
                keep.setdefault("resid_pre", [None] * self.layers)[i] = args[0].detach().float()
                keep.setdefault("calls", [None] * self.layers)[i] = (args[1:], dict(kwargs))
            return hook

        def pre_o(i):
            def hook(_m, args):
                keep.setdefault("z", [None] * self.layers)[i] = args[0].detach().float()
            return hook

        def post(name, i):
            def hook(_m, _args, out):
                out = out[0] if isinstance(out, tuple) else out
                keep.setdefault(name, [None] * self.layers)[i] = out.detach().float()
            return hook

        for i, b in enumerate(self.blocks):
            handles.append(b.register_forward_pre_hook(_mine(pre_block(i)), with_kwargs=True))
            handles.append(self.o[i].register_forward_pre_hook(_mine(pre_o(i))))
            handles.append(self.o[i].register_forward_hook(_mine(post("attn_out", i))))
            if self.mlp[i] is not None:
                handles.append(self.mlp[i].register_forward_hook(_mine(post("mlp_out", i))))
        handles.append(self.norm.register_forward_pre_hook(
            _mine(lambda _m, args: keep.__setitem__("resid_final", args[0].detach().float()))))
        return handles

    def run(self, ids: torch.Tensor, *, weights: bool = False) -> Trace:
        """The whole model on ``ids`` (N, L), kept in parts (``weights``: every layer's attention too)."""
        keep: dict = {}
        handles = self._hooks(keep)
        try:
            with torch.no_grad():
                out = self.model(input_ids=ids, use_cache=False, output_attentions=weights)
        finally:
            for h in handles:
                h.remove()
        trace = Trace(keep["resid_pre"], keep["z"], keep["attn_out"], keep.get("mlp_out", [None] * self.layers),
                      keep["resid_final"], out.logits[:, -1].float(), calls=keep["calls"])
        if weights:
            trace.weights = [a.float() for a in out.attentions]  # (N, H, L, L) each
        return trace

    def from_layer(self, layer: int, hidden: torch.Tensor, trace: Trace, patch_z=None, reads=None) -> torch.Tensor:
        """Layers ``layer`` … on from the streams ``hidden`` (B, L, E) into it, then the logits at
        the last position (B, V). ``patch_z(z)`` edits ``layer``'s heads' outputs (B, L, H·D) before
        its W_O. ``reads=(component, stream)``: ``layer``'s attention makes its q, k or v (every
        head's) from ``stream`` (B, L, E) instead, through its own norm; the rest of the layer reads
        ``hidden``. Each layer gets the arguments it got in ``trace``'s run (one sequence of the same
        length: they broadcast over the batch)."""
        handles = []
        if patch_z is not None:
            handles.append(self.o[layer].register_forward_pre_hook(
                _mine(lambda _m, args: (patch_z(args[0].clone()), *args[1:]))))
        if reads is not None:
            component, stream = reads
            norm, module, columns = self.projection(layer, component)
            with torch.no_grad():
                made = module(norm(stream))  # (B, L, out): the projection of the other stream
            at = columns.reshape(-1)

            def read(_m, _args, out):
                out = out.clone()
                out[..., at] = made[..., at]
                return out
            handles.append(module.register_forward_hook(_mine(read)))
        try:
            with torch.no_grad():
                x = hidden
                for i in range(layer, self.layers):
                    rest, kwargs = trace.calls[i]
                    out = self.blocks[i](x, *rest, **kwargs)
                    x = out[0] if isinstance(out, tuple) else out
                return self.lm_head(self.norm(x[:, -1:]))[:, 0].float()  # (B, V)
        finally:
            for h in handles:
                h.remove()

    def w_o(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        o = self.o[layer]
        return _w_o(o), (None if getattr(o, "bias", None) is None else o.bias.detach().float())

    @property
    def head_dim(self) -> int:
        return _w_o(self.o[0]).shape[1] // self.heads

    def projection(self, layer: int, component: str):
        """(the norm before ``layer``'s attention, the module that projects its output to
        ``component`` ("q", "k" or "v"), the columns of that module's output each head's lie in:
        (heads, D), a head per KV head for k and v where KV heads are shared)."""
        block, D, H = self.blocks[layer], self.head_dim, self.heads
        norm = first_found(block, NORMS_IN)
        c = "qkv".index(component)
        if (module := _at(block, FUSED_QKV)) is not None:
            columns = c * H * D + torch.arange(H * D).view(H, D)
        elif (module := _at(block, HEADWISE_QKV)) is not None:
            columns = torch.arange(H).view(H, 1) * 3 * D + c * D + torch.arange(D)
        else:
            module = _at(block, APART_QKV[component])
            n = 0 if module is None else _w_o(module).shape[0] // D  # a Linear's weight is (out, in)
            columns = torch.arange(n * D).view(n, D)
        if norm is None or module is None:
            raise ModelError(f"{self.name}: attnviz cannot find layer {layer}'s norm and its {component} projection "
                             "(it knows GPT-2, LLaMA and GPT-NeoX).")
        return norm, module, columns

    def value_biases(self, layer: int, trace: Trace) -> torch.Tensor:
        """(H·D,) what every head's output holds whatever it attends to: the values of a stream
        whose norm gives its bias alone (a stream of zeros: LayerNorm's centred input is 0, and
        RMSNorm's), the norm's bias through W_V plus W_V's bias. Attention weights sum to 1, so
        each head's z carries it at every position; TransformerLens folds it into b_O
        (``fold_value_biases``). Run with the arguments of ``trace``'s run."""
        keep = {}
        handle = self.o[layer].register_forward_pre_hook(_mine(lambda _m, args: keep.__setitem__("z", args[0])))
        try:
            rest, kwargs = trace.calls[layer]
            L = trace.resid_pre[layer].shape[1]
            with torch.no_grad():
                self.blocks[layer](torch.zeros(1, L, self.model.config.hidden_size, dtype=self.model.dtype), *rest,
                                   **kwargs)
        finally:
            handle.remove()
        return keep["z"][0, -1].detach().float()  # (H·D,)

    def unembedding(self) -> Unembedding:
        n = norm_of(self.norm)
        b_u = getattr(self.lm_head, "bias", None)
        return Unembedding(n.kind, n.eps, n.weight, n.bias, self.lm_head.weight.detach().float(),
                           None if b_u is None else b_u.detach().float())


class TinyStack:
    """Watch it learn's attention-only model in parts: no MLP, no final norm, no biases. Its
    attention is attnviz's own, whose heads' outputs are read and replaced through
    ``MultiHeadAttention.forward(edit_heads=...)``."""

    def __init__(self, name: str, model: AttentionOnly) -> None:
        self.name, self.model, self.heads = name, model, int(model.heads)
        self.blocks = model.layers
        self.o = [m.out_proj for m in model.layers]
        self.mlp = [None] * len(self.blocks)

    @property
    def layers(self) -> int:
        return len(self.blocks)

    def _layer(self, i: int, x: torch.Tensor, edit_z=None, reads=None):
        """Layer ``i`` on the streams ``x`` (B, L, E): (its attention's output (B, L, E), its weights
        (B, H, L, L)); ``edit_z(z)`` sees and may replace its heads' outputs as z (B, L, H·D);
        ``reads=(component, stream)``: its q, k or v made from ``stream`` instead."""
        L = x.shape[1]
        inputs = {"q": x, "k": x, "v": x}
        if reads is not None:
            inputs[reads[0]] = reads[1]

        def edit(heads):  # (B, H, L, D) <-> z (B, L, H·D), the layout of a transformers model's W_O input
            B, H, _L, D = heads.shape
            z = edit_z(heads.transpose(1, 2).reshape(B, L, H * D))  # (B, L, H·D)
            return z.reshape(B, L, H, D).transpose(1, 2)  # (B, H, L, D)

        if reads is None:
            return self.blocks[i](x, attn_mask=self.model.mask[:L, :L], edit_heads=None if edit_z is None else edit)
        return self.blocks[i](inputs["q"], inputs["k"], inputs["v"], attn_mask=self.model.mask[:L, :L],
                              edit_heads=None if edit_z is None else edit)

    def run(self, ids: torch.Tensor, *, weights: bool = False) -> Trace:
        with torch.no_grad():
            x = self.model.inputs(ids)  # (N, L, E)
            resid, z, attn, ws = [], [], [], []
            for i in range(self.layers):
                resid.append(x)
                out, w = self._layer(i, x, lambda t: z.append(t.detach().float()) or t)
                attn.append(out)
                ws.append(w)
                x = x + out  # (N, L, E)
            logits = (x[:, -1] @ self.model.unembed.T).float()  # (N, V)
        return Trace(resid, z, attn, [None] * self.layers, x, logits, ws if weights else [])

    def from_layer(self, layer: int, hidden: torch.Tensor, trace: Trace, patch_z=None, reads=None) -> torch.Tensor:
        with torch.no_grad():
            x = hidden
            for i in range(layer, self.layers):
                edit = (lambda z: patch_z(z.clone())) if i == layer and patch_z else None
                x = x + self._layer(i, x, edit, reads if i == layer else None)[0]
            return (x[:, -1] @ self.model.unembed.T).float()  # (B, V)

    def w_o(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        o = self.o[layer]
        return _w_o(o), (None if o.bias is None else o.bias.detach().float())

    def value_biases(self, layer: int, trace: Trace) -> torch.Tensor:
        """(H·D,) zeros: no biases, no norm."""
        return torch.zeros(self.model.d_model)

    def unembedding(self) -> Unembedding:
        return Unembedding("none", 0.0, None, None, self.model.unembed.detach().float(), None)
