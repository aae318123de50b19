"""CircuitsVis's ``attention_heads``, ``attention_pattern`` and ``attention_patterns``, with
every keyword of CircuitsVis's (python/circuitsvis/attention.py), drawn
with attnviz's figures; the result has ``_repr_html_()`` (self-contained, offline) and
``.figure`` (the Plotly figure).

- Values below 0 (or ``min_value`` < 0) make the scale diverging and symmetric about 0,
  from ``negative_color`` through white to ``positive_color`` (attnviz's diverging scale
  when neither is given); otherwise white to ``positive_color`` (attnviz's scale when not
  given).
- ``mask_upper_tri`` blanks the cells above the diagonal (key after query, NaN: not drawn).
  As in CircuitsVis it defaults to masking, for causal models, when the pattern is square;
  pass ``False`` for bidirectional attention.
- ``show_axis_labels=False`` hides the token labels (``attention_pattern``).
- A keyword that cannot apply here (``development_mode``: CircuitsVis's development server)
  is accepted and ignored with a one-line warning, never a TypeError.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from attnviz.inputs.handover import Attention, is_model_output, normalise
from attnviz.plots import (
    DEFAULT_MAX_CELLS,
    DIVERGING,
    FigureStyle,
    colorscale,
    escape_label,
    grid_figure,
    heatmap_figure,
    matrix_data,
)
from attnviz.plots.html import Rendered

_COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}|[a-zA-Z]{3,30}|(rgb|rgba|hsl|hsla)\(\s*[0-9.,%\s]+\)")


def _colour(value, arg: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _COLOUR.fullmatch(value.strip()):
        raise ValueError(f"{arg} must be a CSS colour ('#1f77b4', 'blue', 'rgb(31, 119, 180)'), not {value!r}.")
    return value.strip()


def _ndim(x) -> int | None:
    if hasattr(x, "ndim"):
        return int(x.ndim)
    try:
        return int(np.ndim(x))
    except ValueError:  # ragged: normalise says so
        return None


# How to take one layer (and one sequence) out of what the field hands over, by its dimensions.
_ONE_LAYER = {4: "(N, H, L, S), one layer of a batch: pass attention[0]",
              5: "(layers, N, H, L, S), every layer: pass attention[layer, 0]"}


def _checked(attention, tokens, ndim: int, shape: str, source_tokens) -> Attention:
    if is_model_output(attention) or hasattr(attention, "cache_dict"):
        raise ValueError(f"attention must be {shape}, one layer's pattern: pass outputs.attentions[layer][0] or "
                         f"cache['pattern', layer][0].")
    nd = _ndim(attention)
    if nd is not None and nd != ndim:
        hint = _ONE_LAYER.get(nd, "") if ndim == 3 else ""
        raise ValueError(f"attention must be {shape}; got {nd} dimensions" + (f" {hint}" if hint else "") + ".")
    if tokens is None:
        raise ValueError("tokens are required: one string per position.")
    return normalise(attention, tokens, signed=True, source_tokens=source_tokens)


def upper_mask(L: int, S: int) -> np.ndarray:
    """True above the diagonal: key j after query i."""
    return np.triu(np.ones((L, S), dtype=bool), k=1)  # (L, S)


def _scale(w: np.ndarray, max_value, min_value, negative_color, positive_color) -> dict:
    """zmin, zmax and the colour scale for the visible values ``w``."""
    neg, pos = _colour(negative_color, "negative_color"), _colour(positive_color, "positive_color")
    lo = float(w.min()) if min_value is None else float(min_value)
    hi = float(w.max()) if max_value is None else float(max_value)
    if not hi > lo and max_value is not None and min_value is not None:
        raise ValueError(f"max_value ({max_value}) must be greater than min_value ({min_value}).")
    if lo < 0:
        lim = max(abs(lo), abs(hi)) or 1.0
        scale = ([[0.0, neg or "#b2182b"], [0.5, "#ffffff"], [1.0, pos or "#2166ac"]] if neg or pos
                 else colorscale(DIVERGING))
        return {"zmin": -lim, "zmax": lim, "colorscale": scale, "signed": True}
    lo = 0.0 if min_value is None else lo
    hi = max(hi, lo + 1e-9) if max_value is not None else max(hi, 1e-9)
    scale = [[0.0, "#ffffff"], [1.0, pos]] if pos else colorscale(FigureStyle().colors)
    return {"zmin": lo, "zmax": hi, "colorscale": scale, "signed": False}


def _masked(w: np.ndarray, mask_upper_tri, L: int, S: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with the upper triangle at -inf, the visible values)."""
    on = (L == S) if mask_upper_tri is None else bool(mask_upper_tri)
    if not on:
        return w, w.reshape(-1)
    mask = np.broadcast_to(upper_mask(L, S), w.shape)
    return np.where(mask, -np.inf, w).astype(np.float32), w[~mask]


def _blank(z: np.ndarray) -> np.ndarray:
    """-inf (masked, also after max-pooling: a block wholly above the diagonal) -> NaN."""
    z = np.array(z, dtype=np.float32)
    z[np.isneginf(z)] = np.nan
    return z


def _ignored(function: str, **given) -> None:
    """One warning per keyword that was given but cannot apply here."""
    reasons = {"development_mode": "it loads CircuitsVis's development server; attnviz draws offline"}
    for name, value in given.items():
        if value is not None:
            warnings.warn(f"{function}: {name} is ignored ({reasons[name]}).", UserWarning, stacklevel=3)


def attention_heads(attention, tokens, attention_head_names=None, max_value=None, min_value=None,
                    negative_color=None, positive_color=None, mask_upper_tri=None, development_mode=None, *,
                    source_tokens=None) -> Rendered:
    """Every head of ``attention`` (H, L, S) side by side, one shared colour scale."""
    _ignored("attention_heads", development_mode=development_mode)
    a = _checked(attention, tokens, 3, "(H, L, S): heads × queries × keys", source_tokens)
    w = a.weights[0]  # (H, L, S)
    names = [f"Head {h}" for h in range(a.heads)] if attention_head_names is None else list(attention_head_names)
    if len(names) != a.heads:
        raise ValueError(f"{len(names)} attention_head_names for {a.heads} heads.")
    z, visible = _masked(w, mask_upper_tri, a.L, a.S)
    s = _scale(visible if visible.size else w, max_value, min_value, negative_color, positive_color)
    data = [matrix_data(z[h], a.tokens, a.source_tokens, escape_label(str(names[h])), DEFAULT_MAX_CELLS)
            for h in range(a.heads)]
    for d in data:
        d.z = _blank(d.z)
    fig = grid_figure(data, FigureStyle(), title="attention heads")
    fig.update_layout(coloraxis={"colorscale": s["colorscale"], "cmin": s["zmin"], "cmax": s["zmax"],
                                 **({"cmid": 0.0} if s["signed"] else {})})
    return Rendered([fig])


def attention_patterns(tokens, attention, development_mode=None, *, source_tokens=None) -> Rendered:
    """CircuitsVis's plural: every head of ``attention`` (H, L, S), with ``attention_heads``'s
    defaults (the upper triangle of a square pattern masked, one colour scale)."""
    _ignored("attention_patterns", development_mode=development_mode)
    return attention_heads(attention, tokens, source_tokens=source_tokens)


def attention_pattern(tokens, attention, max_value=None, min_value=None, negative_color=None,
                      show_axis_labels=None, positive_color=None, mask_upper_tri=None, development_mode=None, *,
                      source_tokens=None) -> Rendered:
    """One pattern ``attention`` (L, S), every cell. ``show_axis_labels=False`` hides the
    tokens on both axes (CircuitsVis's default shows them)."""
    _ignored("attention_pattern", development_mode=development_mode)
    a = _checked(attention, tokens, 2, "(L, S): queries × keys", source_tokens)
    w = a.weights[0, 0]  # (L, S)
    z, visible = _masked(w, mask_upper_tri, a.L, a.S)
    s = _scale(visible if visible.size else w, max_value, min_value, negative_color, positive_color)
    d = matrix_data(_blank(z), a.tokens, a.source_tokens, "attention pattern", None, zmin=s["zmin"], zmax=s["zmax"])
    fig = heatmap_figure(d, FigureStyle())
    fig.update_traces(colorscale=s["colorscale"], hoverongaps=False, **({"zmid": 0.0} if s["signed"] else {}))
    if show_axis_labels is not None and not show_axis_labels:
        fig.update_xaxes(showticklabels=False, title_text=None)
        fig.update_yaxes(showticklabels=False, title_text=None)
    return Rendered([fig])
