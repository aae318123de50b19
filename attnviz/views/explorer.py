"""The explorer's views of one run: every head, one head, a query's focus, the mean,
the mask, the output, the model view and the head analysis; long texts as images with a
close-up; each view's cache key and text alternative.
"""

from __future__ import annotations

import functools

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.i18n import _
from attnviz.run.result import AttentionResult
from attnviz.views.neurons import describe_neurons, neuron_figure
from attnviz.views.registry import FIGURE_VIEWS
from attnviz.views.selection import style_for
from attnviz.views.state import ViewState


def view_figure(result: AttentionResult, state: ViewState, view: str | None = None, *,
                style: F.FigureStyle | None = None, max_cells: int | None = F.DEFAULT_MAX_CELLS) -> go.Figure:
    """The figure of ``view`` (default: ``state.view``) for the selected sentence/head/query."""
    view = view or state.view
    style = style or style_for(state)
    n, h, q = state.seq, state.head, state.query
    if view == "grid":
        return F.grid_figure(F.grid_data(result, n, max_cells=max_cells), style)
    if view in ("head", "table", "mean", "mask") and is_long(result):
        return long_figure(result, state, view, style)
    if view in ("head", "table"):
        return F.heatmap_figure(F.head_data(result, n, h), style)
    if view == "mean":
        return F.heatmap_figure(F.mean_data(result, n), style)
    if view == "mask":
        return F.mask_figure(result, n, style)
    if view == "output":
        return F.output_figure(result, n, style)
    if view == "query":
        return F.query_figure(result, n, q, style)
    if view == "model":
        return model_figure(result, n, style)
    if view == "analysis":
        return rollout_figure(result, n, style)
    if view == "norms":
        return norms_figure(result, n, style)
    if view == "neurons":
        return neuron_figure(result, n, h, q, style)
    if view == "roles":
        return roles_figure(result, n, style)
    if view == "flow":
        return flow_figure(result, n, style)
    raise ValueError(f"Unknown view {view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")


def model_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Every layer × head as small multiples (a row per layer), pooled like the grid."""
    from attnviz.analysis.roles import head_roles, head_scores
    from attnviz.views.roles import head_title

    lw = result.layer_weights  # (layers, N, H, L, S)
    layers, _N, H = lw.shape[:3]
    k = result.lengths[n]
    roles = head_roles(head_scores(lw[:, n, :, :k, :k].numpy(), result.tokens[n][:k]), probe_scores(result))
    data = []
    for layer in range(layers):
        for h in range(H):
            d = F.matrix_data(lw[layer, n, h].numpy(), result.tokens[n], result.source_tokens[n],
                               head_title(layer, h, roles[layer, h], stacked=True),
                               F.DEFAULT_MAX_CELLS // 2)
            data.append(d)
    name = result.model_name
    return F.grid_figure(data, style, title=_("model view: {layers} layer(s) × {H} heads of {name}").format(
        layers=layers, H=H, name=name), cols=H, ticks=False, clickable=True,
        row_names=[f"L{layer}" for layer in range(layers)])


def head_table(result: AttentionResult, n: int) -> list[dict]:
    """The head analysis of sequence ``n``: a row per layer × head."""
    from attnviz.analysis.heads import head_stats

    return [s.row() for s in head_stats(result.layer_weights, n, result.lengths[n], result.tokens[n])]


def rollout_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Attention rollout across every layer (Abnar & Zuidema 2020), over the real tokens."""
    from attnviz.analysis.heads import rollout

    k = result.lengths[n]
    r = rollout(result.layer_weights[:, n, :, :k, :k]).numpy()  # (k, k)
    toks = result.tokens[n][:k]
    return F.matrix_figure(r, toks, toks, _("attention rollout over {layers} layer(s): how much each token draws on "
                                            "each input token").format(layers=result.layers), style,
                           value_name=_("share"), zero_one=True)


def norms_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Each head's weights beside its weighted value norms ‖A[i, j] · v_j W_O^h‖ (Kobayashi
    et al. 2020), the norms drawn as each query row's share so both read on one 0–1 scale."""
    from attnviz.analysis.contributions import parts_of, row_share, value_norms

    vn = value_norms(parts_of(result))[n]  # (H, S): ‖v_j W_O^h‖
    data = []
    for h, d in enumerate(F.grid_data(result, n)):
        d.title = _("head {h}: weights").format(h=h)
        share = row_share(result.weights[n, h] * vn[h])  # (L, S), one head at a time (a long text)
        z, _block = F.max_pool(share.numpy(), F.DEFAULT_MAX_CELLS)
        data.extend([d, F.HeatmapData(z, d.x, d.y, _("head {h}: norms").format(h=h), pooled=d.pooled,
                                      notes=list(d.notes))])
    return F.grid_figure(data, style, cols=4 if len(data) > 2 else 2, value_name=_("weight or share"),
                         title=_("layer {layer}: weights A beside weighted value norms ‖A·v W_O^h‖ (each row's share)"
                                 ).format(layer=result.layer))


def knockout(result: AttentionResult, n: int):
    """Each head of the followed layer knocked out in turn (``attnviz.analysis.contributions``)."""
    from attnviz.analysis.contributions import knock_out, parts_of

    return knock_out(parts_of(result), n, result.lengths[n])


def knockout_figure(result: AttentionResult, n: int, style: F.FigureStyle, ko=None) -> go.Figure:
    from attnviz.plots.contributions import knockout_figure as bars

    ko = ko or knockout(result, n)
    return bars(ko.moved, _("layer {layer}: each head's output set to zero before W_O").format(layer=result.layer),
                style, top_p_without=ko.top_p_without, top_p=ko.top_p, top_token=F.escape_label(ko.top_token or ""))


def view_problem(result: AttentionResult, view: str) -> str | None:
    """Why this run cannot draw ``view`` (norms, neurons), in words; None when it can."""
    from attnviz.analysis.contributions import neuron_parts, parts_of

    try:
        {"norms": parts_of, "neurons": neuron_parts}.get(view, lambda r: None)(result)
    except ValueError as e:
        return str(e)
    return None


def view_record(result: AttentionResult, state: ViewState, view: str) -> dict | None:
    """The numbers a view draws, as plain data for the JSON export (None for a view whose
    numbers are the run's weights)."""
    n = state.seq
    if view == "norms":
        from attnviz.analysis.contributions import parts_of, weighted_norms

        norms = weighted_norms(parts_of(result), result.weights[n:n + 1])[0]  # (H, L, S)
        return {"view": "norms", "sequence": n, "layer": result.layer,
                "definition": "‖A[i, j] · v_j W_O^h‖ per head (Kobayashi et al. 2020)",
                "norms": norms.tolist(), "knock_out": knockout(result, n).to_dict()}
    if view == "neurons":
        from attnviz.analysis.contributions import neuron_row

        return {"view": "neurons", "sequence": n, "layer": result.layer, "head": state.head, "query": state.query,
                **neuron_row(result, n, state.head, state.query).to_dict()}
    return None


def roles_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Every head's scores on this sentence (a row per layer × head); the probe-only scores are left out."""
    from attnviz.analysis.roles import PROBE_ROLES, SCORES, head_scores

    k = result.lengths[n]
    s = head_scores(result.layer_weights[:, n, :, :k, :k].numpy(), result.tokens[n][:k])
    names = [c for c in SCORES if c not in PROBE_ROLES]
    layers, H = s[names[0]].shape
    import numpy as np

    m = np.stack([s[c].reshape(-1) for c in names], axis=1)  # (layers·H, scores)
    rows = [f"L{layer} H{h}" for layer in range(layers) for h in range(H)]
    return F.matrix_figure(m, rows, names, _("head scores on this sentence (induction and duplicate-token need "
                                             "a repeated probe)"), style, value_name=_("score"), zero_one=True)


def roles_table(result: AttentionResult, n: int) -> list[dict]:
    """A row per layer × head: its scores on sentence ``n``, the probe-only scores on the probe
    (where the run can be repeated on one: ``probe_scores``) and its role."""
    from attnviz.analysis.roles import PROBE_ROLES, SCORES, head_roles, head_scores
    from attnviz.views.roles import table

    k = result.lengths[n]
    s = head_scores(result.layer_weights[:, n, :, :k, :k].numpy(), result.tokens[n][:k])
    probe = probe_scores(result)
    return table({**{c: s[c] for c in SCORES if c not in PROBE_ROLES},
                  **({f"{c} (probe)": probe[c] for c in PROBE_ROLES} if probe else {})}, head_roles(s, probe))


def probe_text_of(result: AttentionResult) -> str | None:
    """The probe this run's model is scored on for induction and duplicate-token: seeded
    random whole words of its own vocabulary, repeated once; None where the run cannot be
    repeated on other text (weights from a file, an image, a sound, a graph)."""
    if result.config is None or result.kind != "text":
        return None
    from attnviz.models.base import ModelError
    from attnviz.models.registry import RANDOM, model_key

    model = result.config.model
    try:  # a folder's path and its config's time: another folder of that name is another probe
        where = None if model == RANDOM else model_key(model)
    except ModelError:
        return None
    return _probe_text(model, where)


@functools.lru_cache(maxsize=32)
def _probe_text(model: str, where) -> str | None:
    """Once per model: reading a tokenizer's vocabulary (30k entries for MiniLM) took 25 ms, on
    every rerun of the roles view."""
    from attnviz.analysis.roles import probe_text
    from attnviz.models.registry import probe_vocabulary

    try:
        return probe_text(probe_vocabulary(model))
    except ValueError:  # a vocabulary with no whole words, a model that cannot load: no probe
        return None


def probe_scores(result: AttentionResult) -> dict | None:
    """``head_scores`` of the same model and settings on its probe (``probe_text_of``), every
    layer; None without a probe."""
    text = probe_text_of(result)
    return None if text is None else _probe_scores(result.config.with_(text=text, source="", pad_to=0))


@functools.lru_cache(maxsize=32)
def _probe_scores(config) -> dict | None:
    from attnviz.analysis.roles import head_scores
    from attnviz.run.run import compute

    try:
        r = compute(config)
    except ValueError:
        return None
    k = r.lengths[0]
    return head_scores(r.layer_weights[:, 0, :, :k, :k].numpy(), r.tokens[0][:k])  # {score: (layers, H)}


def flow_problem(result: AttentionResult, n: int) -> str | None:
    """Why the flow view cannot draw sentence ``n`` (too long), or None."""
    from attnviz.limits import MAX_FLOW_TOKENS

    k = result.lengths[n]
    if k > MAX_FLOW_TOKENS:
        return _("Attention flow is limited to {bound} tokens; this sentence has {k}. Shorten it, or use the "
                 "rollout (Head analysis).").format(bound=MAX_FLOW_TOKENS, k=k)
    return None


def flow_figure(result: AttentionResult, n: int, style: F.FigureStyle) -> go.Figure:
    """Attention flow (max-flow through ½A + ½I per layer, each row divided by its sum, as Abnar & Zuidema's
    code does) over the real tokens; refused past MAX_FLOW_TOKENS."""
    from attnviz.analysis.roles import attention_flow

    k = result.lengths[n]
    f = attention_flow(result.layer_weights[:, n, :, :k, :k].numpy())[0]  # (k, k)
    toks = result.tokens[n][:k]
    return F.matrix_figure(f, toks, toks, _("attention flow over {layers} layer(s): each last-layer position's share "
                                            "of the flow from each input token").format(layers=result.layers),
                           style, value_name=_("share of the flow"), zero_one=True, bar_title=_("share of the flow"))


def is_long(result: AttentionResult) -> bool:
    """Too many cells for a hoverable heatmap of one head: drawn as an image instead."""
    L, S = result.weights.shape[-2:]
    return L * S > F.IMAGE_ABOVE_CELLS


def long_figure(result: AttentionResult, state: ViewState, view: str, style: F.FigureStyle) -> go.Figure:
    """A full-detail view of a long text: every cell as one pixel of an image."""
    n = state.seq
    if view == "mask":
        return F.image_figure(F.mask_data(result, n), style, scale=F.MASK_COLORS)
    d = F.mean_data(result, n) if view == "mean" else F.head_data(result, n, state.head)
    return F.image_figure(d, style)


def region_figure(result: AttentionResult, state: ViewState, style: F.FigureStyle | None = None) -> go.Figure:
    """The exact numbers of a long view: a REGION × REGION close-up from (q0, k0)."""
    h = None if state.view == "mean" else state.head
    return F.region_figure(F.region_data(result, state.seq, h, state.q0, state.k0), style or style_for(state))


def view_key(state: ViewState, view: str | None = None) -> tuple:
    """The plain values that ``view_figure`` reads for ``view``: a cache key for its figure.

    Only the selection a view shows is included, so changing the head leaves the
    cached grid, mean and mask figures valid.
    """
    view = view or state.view
    selection = {"head": (state.head,), "table": (state.head,), "query": (state.query,),
                 "neurons": (state.head, state.query),
                 "region": (state.view, state.head, state.q0, state.k0)}.get(view, ())
    return (state.config, view, state.seq, *selection, style_for(state))


def view_description(result: AttentionResult, state: ViewState, view: str, fig: go.Figure | None = None) -> str:
    """The text alternative of ``view``: what the weights do, or (other views) what the figure plots."""
    from attnviz.analysis.describe import describe_figure, describe_grid, describe_head, describe_query

    n = state.seq
    if view == "grid":
        return describe_grid(result, n)
    if view in ("head", "table"):
        return describe_head(result, n, state.head)
    if view == "query":
        return describe_query(result, n, state.query)
    if view == "norms":
        return describe_norms(result, n)
    if view == "neurons":
        return describe_neurons(result, n, state.head, state.query)
    return describe_figure(fig if fig is not None else view_figure(result, state, view))


def describe_norms(result: AttentionResult, n: int, ko=None) -> str:
    """Per head: where its weight goes and where its weighted value norms go (over the real
    rows), then which head's knock-out moves the output most."""
    from attnviz.analysis.contributions import parts_of, value_norms

    k, s = result.lengths[n], result.source_lengths[n]
    weights = result.weights[n, :, :k, :s].sum(1)  # (H, S): each key's weight over the real rows
    norms = weights * value_norms(parts_of(result))[n, :, :s]  # (H, S): Σ_i A[i, j] ‖v_j W_O^h‖
    keys = result.source_tokens[n]
    parts = []
    for h in range(result.heads):
        jw, jn = int(weights[h].argmax()), int(norms[h].argmax())
        parts.append(_("head {h}: most weight on “{a}”, most weighted norm on “{b}”").format(h=h, a=keys[jw],
                                                                                             b=keys[jn]))
    from attnviz.analysis.contributions import knock_out

    ko = ko or knock_out(parts_of(result), n, k, rerun=False)
    worst = max(range(len(ko.moved)), key=ko.moved.__getitem__)
    return (_("Weights beside weighted value norms, layer {layer}.").format(layer=result.layer) + " " + "; ".join(parts)
            + ". " + _("Knocking out head {h} (its output set to zero before W_O) moves the layer's output most: "
                       "{x} of its norm.").format(h=worst, x=f"{ko.moved[worst]:.3f}"))


def pooled_note(result: AttentionResult, max_cells: int = F.DEFAULT_MAX_CELLS) -> str | None:
    """What the grid overview says when it max-pools a long text (None when it doesn't)."""
    L, S = result.weights.shape[-2:]
    block = F.pool_block(L, S, max_cells)
    return F.pooling_note(L, S, block) if block > 1 else None


def output_table(result: AttentionResult, n: int) -> dict:
    """The output vectors of sequence ``n`` as a table: a row per token (data, index)."""
    return {"data": result.output[n].numpy(), "index": [f"{i}: {t}" for i, t in enumerate(result.tokens[n])]}


def weights_table(result: AttentionResult, state: ViewState, long: bool) -> dict:
    """One head's weights as a table: every cell, or (a long text) the close-up's window."""
    n, L, S = state.seq, *result.weights.shape[2:]
    q0, k0 = (state.q0, state.k0) if long else (0, 0)
    q1, k1 = (min(q0 + F.REGION, L), min(k0 + F.REGION, S)) if long else (L, S)
    tokens, keys = result.tokens[n], result.source_tokens[n]
    return {"data": result.weights[n, state.head, q0:q1, k0:k1].numpy(),  # (rows, cols)
            "index": [f"{i}: {t}" for i, t in enumerate(tokens[q0:q1], q0)],
            "columns": [f"{j}: {t}" for j, t in enumerate(keys[k0:k1], k0)],
            "window": {"q0": q0, "q1": q1 - 1, "k0": k0, "k1": k1 - 1}}


def next_tokens(result: AttentionResult, n: int) -> list[tuple[str, float]] | None:
    """A causal language model's ten most likely next tokens after sentence ``n``, from the
    run's own forward pass (None for a model that predicts none: the random layer, an
    encoder, weights from a file)."""
    return None if result.next_tokens is None else result.next_tokens[n]
