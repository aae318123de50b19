"""Does the head matter, and the neuron view, as sections of a page: the explorer's and the
image page's (a vision transformer's, or the random layer's, patches).

Each section reads one run (``attnviz.views.explorer`` draws it) and is built only when its
view is chosen; its figures and the knock-out are cached on plain values (the page's key).
"""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import N_, _
from attnviz.views.explorer import knockout, knockout_figure, view_description, view_figure, view_problem
from ui import compute
from ui.safe import md

NORMS_CAPTION = N_("Left of each pair, head h's weights A[i, j]; right, its weighted value norms ‖A[i, j] · v_j W_O^h‖ "
                   "(Kobayashi et al. 2020), where W_O^h is the part of the output projection that head h's output "
                   "multiplies. A large weight on a key whose transformed value is small moves little. Each row of "
                   "norms is drawn as its share of the row's total, on the weights' 0–1 scale.")
KNOCKOUT_TITLE = N_("Knock-out: remove one head")


def knockout_chart(result, n: int, style, *, key: tuple, chart_key: str, filename: str):
    """The knock-out bars of sequence ``n`` (each head of the followed layer zeroed before
    W_O), computed once per ``key`` (plain values naming the run); returns the knock-out."""
    ko = compute.guard(lambda: compute.cached(("knockout", *key, n), lambda: knockout(result, n)))
    fig = compute.figure(("knockout", *key, n, compute.style_key(style)),
                         lambda: knockout_figure(result, n, style, ko),
                         alt=lambda f: _("Knock-out, layer {layer}: the output moves by {moved} when each head "
                                         "0–{last} is removed.").format(layer=result.layer, last=result.heads - 1,
                                                                        moved=", ".join(f"{x:.3f}" for x in ko.moved)))
    compute.chart(fig, key=chart_key, filename=filename)
    return ko


def input_head_view(view: str, key: tuple, result, state, style, name: str) -> None:
    """An image page's ``view`` (norms or neurons) of its run (``key``: the run's plain
    values), for sequence 0; ``state``'s query is the followed token
    (``attnviz.views.modality.followed_state``). A run that cannot give it says why."""
    problem = view_problem(result, view)
    if problem:
        st.info(md(problem), icon=":material/info:")
        return
    selection = (state.head, state.query) if view == "neurons" else ()
    fig = compute.figure((name, view, key, *selection, compute.style_key(style)),
                         lambda: view_figure(result, state, view, style=style),
                         alt=lambda f: view_description(result, state, view, f), plain=True)
    if view == "neurons":
        st.caption(_("BertViz's neuron view, with the token the picture follows as the query ([CLS] or the patch "
                     "you follow): each key's k, the elementwise product q∘k (one column per dimension of the "
                     "head), their sum q·k (the row of q∘k sums to it), the score q·k × scale and the weight after "
                     "softmax."))
        compute.chart(fig, key=f"{name}_neurons",
                      filename=f"attnviz-{name}-neurons-head{state.head}-query{state.query}")
        return
    st.caption(_(NORMS_CAPTION))
    compute.chart(fig, key=f"{name}_norms", filename=f"attnviz-{name}-norms")
    st.subheader(_(KNOCKOUT_TITLE))
    st.caption(_("Each head's output is set to zero before W_O, one head at a time. The bars show how far the "
                 "layer's output moves: ‖output − output without the head‖ / ‖output‖, over every token of the "
                 "picture (its patches, and a vision transformer's [CLS])."))
    knockout_chart(result, 0, style, key=(name, key), chart_key=f"{name}_knockout",
                   filename=f"attnviz-{name}-knockout")
