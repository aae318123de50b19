"""BertViz 1.4.1's ``head_view`` and ``model_view``, same arguments, same meanings, drawn
with attnviz's figures and rendered offline::

    from attnviz import notebook as bertviz   # the only change to a BertViz notebook
    outputs = model(inputs, output_attentions=True)
    bertviz.head_view(outputs.attentions, tokens)

``attention`` is the per-layer tuple of (1, H, L, S) a Hugging Face model returns. The head
view shows one layer's heads with a layer menu (``layer`` is the one shown first,
``include_layers`` the ones offered, ``heads`` the heads drawn); the model view shows every
included layer × head, a row per layer. ``sentence_b_start`` draws the sentence A / B
boundary in every block and names it in the title. Encoder-decoder models get one figure
each for encoder self-attention, decoder self-attention and cross-attention (decoder
queries × encoder keys).

Unlike BertViz, nothing is fetched: plotly.js is embedded (no CDN, no require.js) and every
figure has its own div id. ``html_action="return"`` returns a ``Rendered`` whose ``.data``
is the HTML, as BertViz's object's is.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import plotly.graph_objects as go

from attnviz.inputs.handover import Attention, is_model_output, normalise
from attnviz.notebook.views import MODEL_MAX_CELLS, blocks, colour_axis, pooled_suffix
from attnviz.notebook.views import show_model as model_grid
from attnviz.plots import DEFAULT_MAX_CELLS, FigureStyle, figure, grid_figure, pool_block
from attnviz.plots.html import Rendered, check_action, deliver, to_html  # noqa: F401

DISPLAY_MODES = {"dark": "dark", "light": "light"}
DIVIDER = {"color": "#ff4d4d", "width": 1.5, "dash": "dot"}


def prettify(tokens: list[str]) -> list[str]:
    """Tokens without WordPiece's '##' and BPE's 'Ġ' / '▁' / '</w>' markers (a token that
    would be left empty keeps its text)."""
    out = []
    for t in tokens:
        p = t.replace("Ġ", "").replace("▁", "").replace("</w>", "")
        p = p[2:] if p.startswith("##") and len(p) > 2 else p
        out.append(p if p.strip() else t)
    return out


def _checked(name: str, attention, tokens, source_tokens=None, stack: str | None = None) -> Attention:
    """``attention`` normalised; ``stack``: the attention a model output passed as
    ``encoder_attention=`` (``decoder_attention=``, ``cross_attention=``) stands for."""
    try:
        a = normalise(attention, tokens, source_tokens=source_tokens,
                      stack=stack if is_model_output(attention) else None)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    if a.batch > 1:
        warnings.warn(f"{name} has a batch of {a.batch} sequences; BertViz's views take batch 1: showing the "
                      "first.", UserWarning, stacklevel=4)
    return a


def attention_sets(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
                   decoder_tokens) -> list[tuple[str, Attention]]:
    """(name, Attention) for each figure, with BertViz's rules and messages."""
    pair = (encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens)
    if attention is not None:
        if tokens is None:
            raise ValueError("'tokens' is required")
        if any(x is not None for x in pair):
            raise ValueError("If you specify 'attention' you may not specify any encoder-decoder arguments. This "
                             "argument is only for self-attention models.")
        return [("", _checked("attention", attention, tokens))]
    sets = []
    if encoder_attention is not None:
        if encoder_tokens is None:
            raise ValueError("'encoder_tokens' required if 'encoder_attention' is not None")
        sets.append(("Encoder", _checked("encoder_attention", encoder_attention, encoder_tokens, stack="encoder")))
    if decoder_attention is not None:
        if decoder_tokens is None:
            raise ValueError("'decoder_tokens' required if 'decoder_attention' is not None")
        sets.append(("Decoder", _checked("decoder_attention", decoder_attention, decoder_tokens, stack="decoder")))
    if cross_attention is not None:
        for arg, value in (("encoder_tokens", encoder_tokens), ("decoder_tokens", decoder_tokens)):
            if value is None:
                raise ValueError(f"'{arg}' required if 'cross_attention' is not None")
        sets.append(("Cross", _checked("cross_attention", cross_attention, decoder_tokens, encoder_tokens,
                                          stack="cross")))
    if not sets:
        raise ValueError("You must specify at least one attention argument.")
    return sets


def _pretty(a: Attention, on: bool) -> Attention:
    return replace(a, tokens=prettify(a.tokens), source_tokens=prettify(a.source_tokens)) if on else a


def _indices(values, n: int, arg: str, plural: str) -> list[int]:
    """Selected indices (None or empty: all of them), each checked against ``n``."""
    if values is None or (hasattr(values, "__len__") and len(values) == 0):
        return list(range(n))
    if isinstance(values, (int, np.integer)):
        values = [values]
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"{arg}: {v!r} is not one of the {n} {plural} (0–{n - 1}).")
        if int(v) not in out:
            out.append(int(v))
    return out


def _sentence_b(b, a: Attention, name: str) -> int | None:
    if b is None:
        return None
    if name:
        raise ValueError("sentence_b_start splits the tokens of 'attention' (a sentence pair); it does not apply to "
                         "encoder-decoder attention.")
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 < b < a.L:
        raise ValueError(f"sentence_b_start must be a position between 1 and {a.L - 1} (the first token of sentence "
                         f"B); got {b!r}.")
    return int(b)


def sentence_note(b: int, L: int) -> str:
    return f" · sentence A = tokens 0–{b - 1}, sentence B = tokens {b}–{L - 1}"


def dividers(fig: go.Figure, b: int, pooled: int, *, stacked: bool = False) -> list[dict]:
    """Lines between sentence A and B in every block of a grid figure (found through the
    trace's block index, ``customdata``): a column line (keys) and a row line (queries).
    ``stacked``: a trace per row of blocks (the model view), one below the other."""
    at = b / pooled - 0.5  # categories sit at 0, 1, ...: the boundary is half a cell before b
    shapes, top = [], 0
    for trace in (fig.data if stacked else fig.data[:1]):
        if trace.type != "heatmap":
            continue
        head = np.asarray(trace.customdata)  # (rows of this trace, C)
        for i in sorted(set(head[head >= 0].tolist())):
            rows, cols = np.nonzero(head == i)
            r0, r1, c0, c1 = rows.min() + top, rows.max() + 1 + top, cols.min(), cols.max() + 1
            shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": c0 + at, "x1": c0 + at,
                           "y0": r0 - 0.5, "y1": r1 - 0.5, "line": DIVIDER})
            shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": c0 - 0.5, "x1": c1 - 0.5,
                           "y0": r0 + at, "y1": r0 + at, "line": DIVIDER})
        top += head.shape[0]
    return [{k: (float(v) if isinstance(v, np.number) else v) for k, v in s.items()} for s in shapes]


def _head_figure(a: Attention, name: str, layers: list[int], layer: int, heads: list[int], b: int | None,
                 style: FigureStyle) -> go.Figure:
    """One grid trace per included layer, the others hidden; a menu switches layers."""
    prefix = f"{name}: " if name else ""
    figs = {}
    for lay in layers:
        data = blocks(a, [(lay, h) for h in heads], lambda _l, h: f"head {h}", DEFAULT_MAX_CELLS)
        title = f"{prefix}layer {lay}, attention per head" + pooled_suffix(data)
        figs[lay] = grid_figure(data, style, title=title + (sentence_note(b, a.L) if b is not None else ""))
    traces = []
    for lay in layers:
        t = figs[lay].data[0].to_plotly_json()
        t["visible"] = lay == layer
        traces.append(t)
    layout = figs[layer].layout.to_plotly_json()
    if len(layers) > 1:
        layout["updatemenus"] = [{
            "type": "dropdown", "active": layers.index(layer), "showactive": True,
            "x": 1.0, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
            "buttons": [{"label": f"layer {lay}", "method": "update",
                         "args": [{"visible": [k == i for k in range(len(layers))]},
                                  {"title.text": figs[lay].layout.title.text}]}
                        for i, lay in enumerate(layers)]}]
    fig = figure(traces, layout)
    if b is not None:
        fig.update_layout(shapes=dividers(fig, b, pool_block(a.L, a.S, DEFAULT_MAX_CELLS)))
    return colour_axis(fig, a.weights[np.ix_(layers, heads)], False)


def head_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, layer=None, heads=None,
              encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
              decoder_tokens=None, include_layers=None, html_action="view"):
    """BertViz's head view: one layer's heads (``heads``, default all), a menu over
    ``include_layers`` (default all), ``layer`` shown first (default the first included)."""
    check_action(html_action)
    sets = attention_sets(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
                          decoder_tokens)
    style = FigureStyle()
    figures = []
    for name, a in sets:
        b = _sentence_b(sentence_b_start, a, name)
        layers = _indices(include_layers, a.layers, "include_layers", "layers")
        if layer is not None and layer not in layers:
            raise ValueError(f"Layer {layer} is not in include_layers: {layers}")
        shown = layers[0] if layer is None else int(layer)
        chosen = _indices(heads, a.heads, "heads", "heads")
        figures.append(_head_figure(_pretty(a, prettify_tokens), name, layers, shown, chosen, b, style))
    return deliver(Rendered(figures), html_action)


def model_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, display_mode="dark",
               encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
               decoder_tokens=None, include_layers=None, include_heads=None, html_action="view"):
    """BertViz's model view: every included layer × head as small multiples, a row per
    layer, in ``display_mode`` "dark" or "light"."""
    check_action(html_action)
    if display_mode not in DISPLAY_MODES:
        raise ValueError(f"display_mode must be 'dark' or 'light', not {display_mode!r}.")
    sets = attention_sets(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
                          decoder_tokens)
    style = FigureStyle(theme=DISPLAY_MODES[display_mode])
    figures = []
    for name, a in sets:
        b = _sentence_b(sentence_b_start, a, name)
        layers = _indices(include_layers, a.layers, "include_layers", "layers")
        chosen = _indices(include_heads, a.heads, "include_heads", "heads")
        title = (f"{name}: " if name else "") + f"every layer × head ({len(layers)} × {len(chosen)}), a row per layer"
        if b is not None:
            title += sentence_note(b, a.L)
        fig = model_grid(_pretty(a, prettify_tokens), style, layers, chosen, title=title)
        if b is not None:
            fig.update_layout(shapes=dividers(fig, b, pool_block(a.L, a.S, MODEL_MAX_CELLS), stacked=True))
        figures.append(fig)
    return deliver(Rendered(figures), html_action)
