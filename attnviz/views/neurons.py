"""The neuron view (BertViz's) of one query: its figure, its one-line definition for the page,
its text alternative and its numbers for the JSON (its entry in ``attnviz.views.catalogue``).
Each says when the model rotates q and k by position
(rotary positions) or adds a position bias to the scores (T5), where the run's
``HeadParts`` say so (``attnviz.analysis.contributions.neuron_row``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.contributions import neuron_parts, neuron_row
from attnviz.i18n import _
from attnviz.plots.contributions import neuron_figure as neuron_bars
from attnviz.run.result import AttentionResult


def rotary_note() -> str:
    return _("q and k are rotated by position (rotary positions): the ones shown are the ones the scores use.")


def neuron_view_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """BertViz's neuron view of the state's query of its head."""
    n, h, q = state.seq, state.head, state.query
    q = q if q >= 0 else result.lengths[n] - 1  # -1: the last real token
    r = neuron_row(result, n, h, q)
    keys = result.source_tokens[n][: len(r.dot)]
    # Lines, not one: the explanation is longer than the figure is wide (it was cut off).
    lines = [_("head {h}, query “{token}” ({q})").format(h=h, token=F.escape_label(result.tokens[n][q]), q=q),
             (_("the row of q∘k sums to q·k; × {scale} gives the score; softmax gives the weight") if r.bias is None
              else _("the row of q∘k sums to q·k; × {scale} plus the position bias gives the score; softmax gives "
                     "the weight")).format(scale=f"{r.scale:.4g}")]
    if r.rotary:
        lines.append(_("q and k rotated by position (rotary)"))
    title = "<br>".join(lines)
    return neuron_bars(r.q, r.k, r.product, r.dot, r.scaled, r.weight, r.visible, keys, title, style, bias=r.bias)


def neuron_caption(result: AttentionResult, state=None) -> str:
    """The view's definition in one line, for the page: with the position bias where the
    model adds one, and a sentence on rotary positions where it rotates q and k; on a picture,
    the query is the token it follows."""
    if result.kind == "image":
        return _("BertViz's neuron view, with the token the picture follows as the query ([CLS] or the patch "
                 "you follow): each key's k, the elementwise product q∘k (one column per dimension of the head), "
                 "their sum q·k (the row of q∘k sums to it), the score q·k × scale and the weight after softmax.")
    parts = neuron_parts(result)
    text = (_("BertViz's neuron view, for the query chosen above: each key's k, the elementwise product q∘k (one "
              "column per dimension of the head), their sum q·k (the row of q∘k sums to it), the score q·k × scale "
              "and the weight after softmax.") if parts.bias is None else
            _("BertViz's neuron view, for the query chosen above: each key's k, the elementwise product q∘k (one "
              "column per dimension of the head), their sum q·k (the row of q∘k sums to it), the model's position "
              "bias b[i, j] (added to the scores inside its attention), the score q·k × scale + b[i, j] and the "
              "weight after softmax."))
    return text + (" " + rotary_note() if parts.rotary else "")


def describe_neurons(result: AttentionResult, state, fig=None) -> str:
    """The view's text alternative: the definition and where the largest weight goes."""
    n, h, q = state.seq, state.head, state.query
    q = q if q >= 0 else result.lengths[n] - 1
    r = neuron_row(result, n, h, q)
    j = int(r.weight.argmax())
    values = dict(h=h, token=result.tokens[n][q], d=r.q.shape[0], scale=f"{r.scale:.4g}", w=f"{r.weight[j]:.3f}",
                  key=result.source_tokens[n][j], dot=f"{r.dot[j]:.3f}")
    if r.bias is None:
        text = _("Neuron view of head {h}, query “{token}”: for each key, the {d} products q∘k sum to q·k, times "
                 "{scale} is the score. The largest weight, {w}, goes to “{key}” (q·k = {dot}).").format(**values)
    else:
        text = _("Neuron view of head {h}, query “{token}”: for each key, the {d} products q∘k sum to q·k; times "
                 "{scale}, plus the position bias, it is the score. The largest weight, {w}, goes to “{key}” "
                 "(q·k = {dot}, position bias = {bias}).").format(**values, bias=f"{r.bias[j]:.3f}")
    return text + (" " + rotary_note() if r.rotary else "")


def neurons_record(result: AttentionResult, state) -> dict:
    return {"view": {"view": "neurons", "sequence": state.seq, "layer": result.layer, "head": state.head,
                     "query": state.query, **neuron_row(result, state.seq, state.head, state.query).to_dict()}}
