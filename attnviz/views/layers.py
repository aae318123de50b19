"""The views across every layer of a run: the model view (every layer × head as small multiples,
each head named by its role), the head analysis with attention rollout, and attention flow. What
each view is, needs and draws is its entry in ``attnviz.views.catalogue``.
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.heads import head_stats, rollout
from attnviz.analysis.probe import probe_scores
from attnviz.analysis.roles import attention_flow, head_roles, head_scores
from attnviz.i18n import _
from attnviz.limits import MAX_FLOW_TOKENS
from attnviz.run.result import AttentionResult
from attnviz.views.roles import head_title, roles_legend


def model_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """Every layer × head as small multiples (a row per layer), pooled like the grid, each
    block titled with its head's role (the probe's roles where the run can be repeated on it)."""
    n = state.seq
    lw = result.layer_weights  # (layers, N, H, L, S)
    layers, _N, H = lw.shape[:3]
    k = result.lengths[n]
    roles = head_roles(head_scores(lw[:, n, :, :k, :k].numpy(), result.tokens[n][:k]), probe_scores(result))
    data = []
    for layer in range(layers):
        for h in range(H):
            data.append(F.matrix_data(lw[layer, n, h].numpy(), result.tokens[n], result.source_tokens[n],
                                      head_title(layer, h, roles[layer, h], stacked=True), F.DEFAULT_MAX_CELLS // 2))
    return F.grid_figure(data, style, title=_("model view: {layers} layer(s) × {H} heads of {name}").format(
        layers=layers, H=H, name=result.model_name), cols=H, ticks=False, clickable=True,
        row_names=[f"L{layer}" for layer in range(layers)])


def model_caption(result: AttentionResult, state) -> str:
    one = _("{model} has one layer, so its model view is the grid of its heads with their roles; a pretrained "
            "model (MiniLM, a model folder) shows a row per layer.").format(model=result.model_name) + " " \
        if len(result.layer_weights) == 1 else ""
    return one + _("Each block is one layer × head. Click a block to open it in the 'One head' view.") + " " + _(
        "Roles, where a head's mean weight passes the threshold: {legend}; dup and induction on a repeated random "
        "probe (Head roles says which).").format(legend=roles_legend())


def analysis_rows(result: AttentionResult, state) -> list[dict]:
    """The head analysis of the sentence: a row per layer × head."""
    n = state.seq
    return [s.row() for s in head_stats(result.layer_weights, n, result.lengths[n], result.tokens[n])]


def analysis_caption(result: AttentionResult, state) -> str:
    return _("Every layer × head of this sentence, from its weights alone: row entropy (nats; low = focused), "
             "mean attention distance (tokens), and how much weight goes to the previous token, the next, "
             "itself, the first token ([CLS]) and [SEP]. Sort by any column; select a row to open that head.")


def rollout_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """Attention rollout across every layer (Abnar & Zuidema 2020), over the real tokens."""
    n = state.seq
    k = result.lengths[n]
    r = rollout(result.layer_weights[:, n, :, :k, :k]).numpy()  # (k, k)
    toks = result.tokens[n][:k]
    return F.matrix_figure(r, toks, toks, _("attention rollout over {layers} layer(s): how much each token draws on "
                                            "each input token").format(layers=result.layers), style,
                           value_name=_("share"), zero_one=True)


def flow_problem(result: AttentionResult, state) -> str | None:
    """Why the flow view cannot draw the sentence (too long), or None."""
    k = result.lengths[state.seq]
    if k > MAX_FLOW_TOKENS:
        return _("Attention flow is limited to {bound} tokens; this sentence has {k}. Shorten it, or use the "
                 "rollout (Head analysis).").format(bound=MAX_FLOW_TOKENS, k=k)
    return None


def _flow(result: AttentionResult, seq: int):
    k = result.lengths[seq]
    return attention_flow(result.layer_weights[:, seq, :, :k, :k].numpy())[0], k  # (k, k)


def flow_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """Attention flow (max-flow through ½A + ½I per layer, each row divided by its sum, as Abnar & Zuidema's
    code does) over the real tokens; refused past MAX_FLOW_TOKENS."""
    f, k = _flow(result, state.seq)
    toks = result.tokens[state.seq][:k]
    return F.matrix_figure(f, toks, toks, _("attention flow over {layers} layer(s): each last-layer position's share "
                                            "of the flow from each input token").format(layers=result.layers),
                           style, value_name=_("share of the flow"), zero_one=True, bar_title=_("share of the flow"))


def flow_caption(result: AttentionResult, state) -> str:
    return _("Attention flow (Abnar & Zuidema 2020): the maximum flow from each last-layer position (row) to each "
             "input token (column) through every layer's ½·(mean over heads) + ½·I, each row divided by its sum: "
             "the share of the flow.")


def flow_record(result: AttentionResult, state) -> dict:
    seq = min(state.seq, len(result.lengths) - 1)
    return {"attention_flow": _flow(result, seq)[0].tolist()}  # (k, k)
