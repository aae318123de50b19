"""Does the head matter: each head's weights beside its weighted value norms ‖A·v W_O^h‖
(Kobayashi et al. 2020), and each head knocked out in turn. What the view is, needs and draws
is its entry in ``attnviz.views.catalogue``; the numbers are ``attnviz.analysis.contributions``'s.
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.contributions import (
    KnockOut,
    knock_out,
    neuron_parts,
    parts_of,
    row_share,
    value_norms,
    weighted_norms,
)
from attnviz.i18n import N_, _
from attnviz.plots.contributions import knockout_figure as knockout_bars_figure
from attnviz.run.result import AttentionResult
from attnviz.views.markdown import md

NORMS_CAPTION = N_("Left of each pair, head h's weights A[i, j]; right, its weighted value norms ‖A[i, j] · v_j W_O^h‖ "
                   "(Kobayashi et al. 2020), where W_O^h is the part of the output projection that head h's output "
                   "multiplies. A large weight on a key whose transformed value is small moves little. Each row of "
                   "norms is drawn as its share of the row's total, on the weights' 0–1 scale.")
KNOCKOUT_TITLE = N_("Knock-out: remove one head")


def parts_problem(result: AttentionResult, state=None) -> str | None:
    """Why this run cannot weigh its heads' values (weights from a file, a model attnviz cannot watch), or None."""
    try:
        parts_of(result)
    except ValueError as e:
        return str(e)
    return None


def qk_problem(result: AttentionResult, state=None) -> str | None:
    """Why this run cannot give the q and k its scores use, or None."""
    try:
        neuron_parts(result)
    except ValueError as e:
        return str(e)
    return None


def norms_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """Each head's weights beside its weighted value norms ‖A[i, j] · v_j W_O^h‖, the norms
    drawn as each query row's share so both read on one 0–1 scale."""
    n = state.seq
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


def norms_caption(result: AttentionResult, state) -> str:
    return _(NORMS_CAPTION)


def knockout_title(result: AttentionResult, state) -> str:
    return _(KNOCKOUT_TITLE)


def knockout_of(result: AttentionResult, state, *, rerun: bool = True) -> KnockOut:
    """Each head of the followed layer knocked out in turn (its output zeroed before W_O)."""
    n = state.seq
    return result.derived(("knock-out", n, rerun), lambda: knock_out(parts_of(result), n, result.lengths[n],
                                                                    rerun=rerun))


def knockout_bars(result: AttentionResult, state, style: F.FigureStyle, ko: KnockOut | None = None) -> go.Figure:
    ko = ko or knockout_of(result, state)
    return knockout_bars_figure(ko.moved, _("layer {layer}: each head's output set to zero before W_O").format(
        layer=result.layer), style, top_p_without=ko.top_p_without, top_p=ko.top_p,
        top_token=F.escape_label(ko.top_token or ""))


def knockout_caption(result: AttentionResult, state) -> str:
    if result.kind == "image":
        return _("Each head's output is set to zero before W_O, one head at a time. The bars show how far the "
                 "layer's output moves: ‖output − output without the head‖ / ‖output‖, over every token of the "
                 "picture (its patches, and a vision transformer's [CLS]).")
    return _("Each head's output is set to zero before W_O, one head at a time. The bars show how far the layer's "
             "output moves: ‖output − output without the head‖ / ‖output‖, over this sentence's real tokens. For a "
             "language model that predicts the next token, the model is rerun with the head removed: the second "
             "chart shows the probability of its original top next token.")


def describe_knockout(result: AttentionResult, state, fig=None) -> str:
    ko = knockout_of(result, state)
    return _("Knock-out, layer {layer}: the output moves by {moved} when each head 0–{last} is removed.").format(
        layer=result.layer, last=result.heads - 1, moved=", ".join(f"{x:.3f}" for x in ko.moved))


def next_token_rows(result: AttentionResult, state) -> list[dict] | None:
    """For a causal LM: each head's p(top token) without it and the top-10 overlap (None otherwise)."""
    ko = knockout_of(result, state)
    if ko.top_token is None:
        return None
    return [{_("head"): h, _("p(top token) without the head"): p, _("top-10 overlap"): o}
            for h, (p, o) in enumerate(zip(ko.top_p_without, ko.overlap, strict=True))]


def next_token_note(result: AttentionResult, state) -> str | None:
    ko = knockout_of(result, state)
    if ko.top_token is None:
        return None
    return _("With every head, the top next token is “{token}” (p = {p}). The top-10 overlap counts how many of the "
             "original ten most likely tokens stay in the ten.").format(token=md(ko.top_token), p=f"{ko.top_p:.3f}")


def describe_norms(result: AttentionResult, state, fig=None) -> str:
    """Per head: where its weight goes and where its weighted value norms go (over the real
    rows), then which head's knock-out moves the output most."""
    n = state.seq
    k, s = result.lengths[n], result.source_lengths[n]
    weights = result.weights[n, :, :k, :s].sum(1)  # (H, S): each key's weight over the real rows
    norms = weights * value_norms(parts_of(result))[n, :, :s]  # (H, S): Σ_i A[i, j] ‖v_j W_O^h‖
    keys = result.source_tokens[n]
    parts = []
    for h in range(result.heads):
        jw, jn = int(weights[h].argmax()), int(norms[h].argmax())
        parts.append(_("head {h}: most weight on “{a}”, most weighted norm on “{b}”").format(h=h, a=keys[jw],
                                                                                             b=keys[jn]))
    ko = knockout_of(result, state, rerun=False)
    worst = max(range(len(ko.moved)), key=ko.moved.__getitem__)
    return (_("Weights beside weighted value norms, layer {layer}.").format(layer=result.layer) + " " + "; ".join(parts)
            + ". " + _("Knocking out head {h} (its output set to zero before W_O) moves the layer's output most: "
                       "{x} of its norm.").format(h=worst, x=f"{ko.moved[worst]:.3f}"))


def norms_record(result: AttentionResult, state) -> dict:
    n = state.seq
    norms = weighted_norms(parts_of(result), result.weights[n:n + 1])[0]  # (H, L, S)
    return {"view": {"view": "norms", "sequence": n, "layer": result.layer,
                     "definition": "‖A[i, j] · v_j W_O^h‖ per head (Kobayashi et al. 2020)",
                     "norms": norms.tolist(), "knock_out": knockout_of(result, state).to_dict()}}
