"""``normalise``: every shape and container attention weights come in, made one checked
``Attention`` record (weights (layers, H, L, S) float32 for the first sequence of a batch).

Accepted, as the field writes them:

- arrays: (L, S), (H, L, S), (layers, H, L, S) and (layers, N, H, L, S): a 5-d array is
  layers first, as ``torch.stack(outputs.attentions)`` and TransformerLens's
  ``cache.stack_activation("pattern")`` give it (attnviz used to read it as
  (N, layers, H, L, S): see docs/notebook.md, "Behaviour changes");
- a per-layer tuple or list of (N, H, L, S) (or (H, L, S)) tensors, as Hugging Face models
  return with ``output_attentions=True``;
- a transformers ``ModelOutput``: its ``.attentions``, or for an encoder–decoder the stack
  ``stack`` names ("encoder", "decoder" or "cross": ``encoder_attentions``,
  ``decoder_attentions``, ``cross_attentions``, as BertViz's ``encoder_attention=`` /
  ``decoder_attention=`` / ``cross_attention=`` choose them);
- a TransformerLens ``ActivationCache``: its per-layer ``blocks.{l}.attn.hook_pattern``
  activations ((N, H, L, S), or (H, L, S) with ``remove_batch_dim``).

Each as torch tensors, NumPy arrays or nested lists; the objects are read by their attributes
(neither transformers nor TransformerLens is imported). A nested *list* is read by its number
of dimensions alone; only a tuple or list of tensors/arrays of 3 or more dimensions is read as
one entry per layer (a list of matrices or rows is stacked, like a nested list). Tokens may
come as TransformerLens's ``to_str_tokens`` list, BOS included: one label per position.

Sizes are checked from the shapes before anything is copied or converted.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch

from attnviz import limits

ROW_TOLERANCE = 1e-3  # a row of softmax weights sums to 1 within this


@dataclass
class Attention:
    """Checked attention weights of one sequence."""

    weights: np.ndarray  # (layers, H, L, S) float32
    tokens: list[str]  # the L queries
    source_tokens: list[str]  # the S keys (equal to tokens for self-attention)
    batch: int = 1  # sequences in the input (only the first is kept)
    signed: bool = False  # negative values allowed (scores, attributions)
    normalised: bool = True  # every row sums to 1 (or is all zero: a fully masked query)

    @property
    def layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def L(self) -> int:
        return int(self.weights.shape[2])

    @property
    def S(self) -> int:
        return int(self.weights.shape[3])

    @property
    def is_self(self) -> bool:
        return self.L == self.S and self.tokens == self.source_tokens

    def layer_weights(self) -> torch.Tensor:
        """The weights as ``attnviz.analysis.heads`` reads them: (layers, N=1, H, L, S)."""
        return torch.from_numpy(self.weights).unsqueeze(1)  # (layers, 1, H, L, S)


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def _is_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, np.ndarray))


def _check_dtype(x, what: str) -> None:
    if isinstance(x, torch.Tensor):
        ok = not (x.dtype.is_complex or x.dtype == torch.bool)
    else:
        ok = x.dtype.kind in "fiu"
    if not ok:
        raise ValueError(f"{what} must hold real numbers; got dtype {x.dtype}.")


def _as_numeric(x, what: str):
    """A tensor or array as it is; a nested list as a float64 array (ragged lists refused)."""
    if _is_tensor(x):
        _check_dtype(x, what)
        return x
    try:
        arr = np.asarray(x, dtype=np.float64)
    except ValueError as e:
        if "inhomogeneous" in str(e) or "sequence" in str(e):
            raise ValueError(f"{what} is ragged: its nested lists have different lengths ({e}).") from None
        raise ValueError(f"{what} must hold numbers ({e}).") from None
    except TypeError as e:
        raise ValueError(f"{what} must hold numbers ({e}).") from None
    return arr


def _check_size(layers: int, H: int, L: int, S: int) -> None:
    """Bounds from the shape alone, before any copy: tokens per side and the memory budget."""
    if min(layers, H, L, S) <= 0:
        raise ValueError(f"attention is empty: (layers, H, L, S) = ({layers}, {H}, {L}, {S}).")
    for n, side in ((L, "L (queries)"), (S, "S (keys)")):
        if n > limits.MAX_TOKENS:
            raise ValueError(f"attention has {n} tokens along {side}, over the bound of {limits.MAX_TOKENS} tokens "
                             "(limits.MAX_TOKENS): select fewer tokens.")
    need, budget = layers * H * L * S * 4, limits.memory_budget_bytes()
    if need > budget:
        raise ValueError(f"attention of (layers, H, L, S) = ({layers}, {H}, {L}, {S}) needs {_mb(need)} as float32, "
                         f"over the memory budget of {_mb(budget)} (ATTNVIZ_MEMORY_BUDGET_MB): select fewer layers, "
                         "heads or tokens.")


def _to_float32(x) -> np.ndarray:
    """A float32 copy (never a view of the caller's array or tensor)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float32, copy=True).numpy()
    return np.array(x, dtype=np.float32)


def _per_layer(items, what: str) -> tuple[np.ndarray, int, tuple]:
    """A tuple of (N, H, L, S) (or (H, L, S)) tensors -> (layers, H, L, S) of sequence 0."""
    items = [_as_numeric(t, f"{what}[{i}]") for i, t in enumerate(items)]
    shapes = [tuple(t.shape) for t in items]
    if any(s != shapes[0] for s in shapes):
        j = next(i for i, s in enumerate(shapes) if s != shapes[0])
        raise ValueError(f"{what} is ragged: layer 0 has shape {shapes[0]} but layer {j} has {shapes[j]}; every layer "
                         "must have the same (N, H, L, S).")
    nd = len(shapes[0])
    if nd not in (3, 4):
        raise ValueError(f"{what} has {len(items)} layers of {nd} dimensions {shapes[0]}; each layer must be "
                         "(N, H, L, S) (or (H, L, S)), as a model returns with output_attentions=True.")
    batch = shapes[0][0] if nd == 4 else 1
    H, L, S = shapes[0][-3:]
    _check_size(len(items), H, L, S)
    if batch <= 0:
        raise ValueError(f"{what} has an empty batch (N = 0).")
    out = np.empty((len(items), H, L, S), dtype=np.float32)  # (layers, H, L, S)
    for i, t in enumerate(items):
        out[i] = _to_float32(t[0] if nd == 4 else t)  # (H, L, S)
    return out, batch, (len(items), *shapes[0])


_SHAPES = {2: "(L, S)", 3: "(H, L, S)", 4: "(layers, H, L, S)", 5: "(layers, N, H, L, S)"}


def _stacked(x, what: str) -> tuple[np.ndarray, int, tuple]:
    x = _as_numeric(x, what)
    shape = tuple(x.shape)
    if len(shape) not in _SHAPES:
        raise ValueError(f"{what} has {len(shape)} dimensions {shape}; expected 2 to 5: "
                         + ", ".join(_SHAPES.values()) + ", or a per-layer tuple of (N, H, L, S).")
    batch = shape[1] if len(shape) == 5 else 1
    if batch <= 0:
        raise ValueError(f"{what} has an empty batch (N = 0).")
    full = (shape[0], *shape[2:]) if len(shape) == 5 else (1,) * (4 - len(shape)) + shape  # (layers, H, L, S)
    _check_size(*full)
    if len(shape) == 5:
        x = x[:, 0]  # (layers, H, L, S): the first sequence of every layer, a view
    return _to_float32(x).reshape(full), batch, shape


STACKS = {"encoder": "encoder_attentions", "decoder": "decoder_attentions", "cross": "cross_attentions"}
_PATTERN = re.compile(r"blocks\.(\d+)\.attn\.hook_pattern")


def is_model_output(x) -> bool:
    """A transformers ``ModelOutput`` (or anything holding attentions the same way)."""
    return not _is_tensor(x) and not isinstance(x, (list, tuple)) and any(
        hasattr(x, name) for name in ("attentions", *STACKS.values()))


def _from_model_output(out, stack: str | None) -> tuple:
    """The per-layer tuple a model output holds: ``.attentions``, or the encoder–decoder stack ``stack`` names."""
    held = {s: getattr(out, name, None) for s, name in STACKS.items()}
    held = {s: v for s, v in held.items() if v}
    own = getattr(out, "attentions", None)
    if stack is None:
        if own:
            return tuple(own)
        if len(held) == 1:
            return tuple(next(iter(held.values())))
        if held:
            raise ValueError(f"this model output holds {', '.join(STACKS[s] for s in held)}: say which with "
                             f"stack={' | '.join(repr(s) for s in held)} (BertViz: encoder_attention=, "
                             "decoder_attention=, cross_attention=).")
    elif stack not in STACKS:
        raise ValueError(f"stack must be one of {', '.join(STACKS)}; got {stack!r}.")
    elif stack in held:
        return tuple(held[stack])
    raise ValueError("this model output holds no attention weights: run the model with output_attentions=True"
                     + (f" (it has no {STACKS[stack]})." if stack else "."))


def _is_cache(x) -> bool:
    """A TransformerLens ``ActivationCache`` (read by its ``cache_dict``)."""
    return isinstance(getattr(x, "cache_dict", None), dict)


def _from_cache(cache) -> tuple:
    """Every layer's ``blocks.{l}.attn.hook_pattern``, in layer order (layers 0 … n−1, none missing)."""
    found = {int(m.group(1)): v for k, v in cache.cache_dict.items() if (m := _PATTERN.fullmatch(str(k)))}
    if not found:
        raise ValueError("this ActivationCache holds no attention patterns (blocks.{l}.attn.hook_pattern): run "
                         "run_with_cache without a names_filter that drops them.")
    layers = sorted(found)
    if layers != list(range(len(layers))):
        raise ValueError(f"this ActivationCache holds the patterns of layers {', '.join(map(str, layers))} only: "
                         f"pass one layer's, cache['pattern', {layers[0]}].")
    return tuple(found[i] for i in layers)


def _where(w: np.ndarray, mask: np.ndarray) -> str:
    layer, h, i, j = (int(v) for v in np.argwhere(mask)[0])
    return f"layer {layer}, head {h}, query {i}, key {j}"


def _check_values(w: np.ndarray, signed: bool, what: str) -> bool:
    """NaN, inf and negative weights refused; rows that do not sum to 1 warned about.
    Returns whether every row sums to 1 (or 0)."""
    if not np.isfinite(w).all():
        nan = np.isnan(w)
        bad, kind = (nan, "NaN") if nan.any() else (~np.isfinite(w), "inf")
        raise ValueError(f"{what} contains {kind} ({int(bad.sum())} value(s), the first at {_where(w, bad)}).")
    if signed:
        return False
    neg = w < 0
    if neg.any():
        raise ValueError(f"{what} has negative weights ({int(neg.sum())} value(s), min {float(w.min()):.4g} at "
                         f"{_where(w, neg)}); attention weights are >= 0. Pass signed=True for signed values "
                         "(scores, attributions).")
    sums = w.sum(-1, dtype=np.float64)  # (layers, H, L)
    off = (np.abs(sums - 1.0) > ROW_TOLERANCE) & (sums != 0.0)
    if off.any():
        layer, h, i = (int(v) for v in np.argwhere(off)[0])
        warnings.warn(f"{what}: {int(off.sum())} of {off.size} rows do not sum to 1 (layer {layer}, head {h}, "
                      f"query {i} sums to {sums[layer, h, i]:.4g}). Weights after dropout, or pre-softmax scores? "
                      "They are drawn as given.", UserWarning, stacklevel=3)
        return False
    return True


def _labels(tokens, n: int, side: str, what: str) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(n)]
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__len__"):
        raise ValueError(f"{what} must be a list of strings, one per token; got {type(tokens).__name__}.")
    labels = [str(t) for t in tokens]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {what} do not match the attention's {side} = {n}.")
    return labels


def _tokens(tokens, source_tokens, L: int, S: int) -> tuple[list[str], list[str]]:
    queries = _labels(tokens, L, "L (queries)", "tokens")
    if source_tokens is not None:
        return queries, _labels(source_tokens, S, "S (keys)", "source_tokens")
    if tokens is None:
        return queries, [str(j) for j in range(S)]
    if L != S:
        raise ValueError(f"tokens match the L = {L} queries, but there are S = {S} keys: pass source_tokens for "
                         "the keys (cross-attention).")
    return queries, list(queries)


def normalise(attention, tokens=None, *, signed: bool = False, source_tokens=None,
              stack: str | None = None) -> Attention:
    """``attention`` in any accepted shape or container -> a checked ``Attention``.

    ``tokens`` label the L queries (positions when None); ``source_tokens`` the S keys
    (equal to ``tokens`` unless given); ``stack``: which attention of an encoder–decoder's
    model output. ``ValueError`` names what is wrong; rows that do not sum to 1 give a
    ``UserWarning``.
    """
    if isinstance(attention, Attention):
        if tokens is None and source_tokens is None:
            return replace(attention, signed=True) if signed and not attention.signed else attention
        queries, keys = _tokens(tokens if tokens is not None else attention.tokens,
                                source_tokens if source_tokens is not None else
                                (None if tokens is not None else attention.source_tokens), attention.L, attention.S)
        return replace(attention, tokens=queries, source_tokens=keys, signed=signed or attention.signed)
    what = "attention"
    if _is_cache(attention):
        attention = _from_cache(attention)
    elif is_model_output(attention):
        attention = _from_model_output(attention, stack)
    elif stack is not None:
        raise ValueError(f"stack={stack!r} chooses among a model output's attentions; this attention is a "
                         f"{type(attention).__name__}.")
    if isinstance(attention, (tuple, list)) and attention and all(_is_tensor(t) and t.ndim >= 3 for t in attention):
        w, batch, _shape = _per_layer(attention, what)
    elif isinstance(attention, (tuple, list)) and not attention:
        raise ValueError("attention is empty: no layers.")
    else:
        w, batch, _shape = _stacked(attention, what)
    queries, keys = _tokens(tokens, source_tokens, w.shape[2], w.shape[3])
    normalised = _check_values(w, signed, what)
    return Attention(np.ascontiguousarray(w), queries, keys, batch=batch, signed=signed, normalised=normalised)
