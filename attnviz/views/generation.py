"""A causal LM's greedy generation on the explorer: which tokens it writes after the
sentence, and, for each, the attention of the query that chose it."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.i18n import _
from attnviz.inputs.text import lines_of
from attnviz.models.door import Cap, available
from attnviz.models.door import open as open_model
from attnviz.models.generate import Generation, chat_ids, greedy
from attnviz.run.result import AttentionResult


def generation(result: AttentionResult, n: int, count: int, chat: bool = False) -> Generation | None:
    """Up to ``count`` greedy tokens after sentence ``n`` (None for a model that writes none:
    the random layer, an encoder, weights from a file); ``chat``: the sentence asked as a question in the
    model's chat template, the answer what it writes."""
    if result.config is None or not result.pretrained or count < 1:
        return None
    model = open_model(result.config.model).load()
    if not getattr(model, "causal", False):
        return None
    line = lines_of(result.config.text)[n]
    ids = chat_ids(model, line) if chat else model.read_text([line]).ids[0].tolist()
    return greedy(model, ids, count)


def language_model_offered() -> str | None:
    """The first model this server offers that reads a text and writes its next token (SmolLM2 where it is
    installed), or None: what the explorer suggests to a user on a model that predicts nothing."""
    return next((m for m in available() if open_model(m).can(Cap.TEXT, Cap.UNEMBEDDING)), None)


def step_label(gen: Generation, t: int) -> str:
    return f"{t + 1}: {gen.tokens[gen.context + t]}"


def generated_overview_figure(gen: Generation, layer: int, step: int, style: F.FigureStyle) -> go.Figure:
    """Every generated token (a row) over every token before it (columns), the layer's
    mean over heads; the chosen step's row outlined."""
    z = gen.rows[:, layer].mean(1).numpy().astype(np.float32)  # (n, T)
    keys = F.axis_labels(gen.tokens[:-1])
    rows = F.axis_labels([step_label(gen, t) for t in range(gen.count)])
    fig = F.heatmap_figure(F.HeatmapData(z, keys, rows, _("generated tokens: what chose each (layer {layer}, mean "
                                                        "over heads)").format(layer=layer)), style)
    fig.add_shape(type="rect", xref="paper", yref="y", x0=0, x1=1, y0=step - 0.5, y1=step + 0.5,
                  line={"color": "#ff2d55", "width": 2})
    fig.update_yaxes(title_text=_("generated token"))
    fig.update_xaxes(title_text=_("earlier token (context, then generated)"))
    return fig


def step_figure(gen: Generation, layer: int, step: int, style: F.FigureStyle) -> go.Figure:
    """One generated token's query row per head over the tokens it saw."""
    seen = gen.context + step  # keys 0 .. context-1+step
    z = gen.rows[step, layer, :, :seen].numpy().astype(np.float32)  # (H, seen)
    keys = F.axis_labels(gen.tokens[:seen])
    heads = [_("head {h}").format(h=h) for h in range(z.shape[0])]
    fig = F.heatmap_figure(F.HeatmapData(z, keys, heads, _("what chose “{token}” (p = {p:.3f}), per head").format(
        token=F.escape_label(gen.tokens[seen]), p=gen.probs[step])), style)
    fig.update_yaxes(title_text=_("head"))
    return fig
