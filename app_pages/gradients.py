"""Gradients: the backward view of one query's output."""

import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views.gradients import GRADIENT_OF, gradient_figures, gradients_of
from attnviz.views.markdown import md, quoted
from attnviz.views.selection import style_for
from ui import compute, session, widgets
from ui.controls import control, row

s = session.current()
st.title(_("Gradients"))
result = compute.result(s.config)
seq = min(s.seq, len(result.tokens) - 1)
tokens = result.tokens[seq]
# On a projector the two choices share a row and the sentence of numbers folds: the first chart whole on the
# first screen.
controls = row() if s.present else None
_head, query = widgets.head_and_query(result, seq, with_head=False, into=controls)
control("grad_of", controls, format_func=lambda k, t=fixed(): t(GRADIENT_OF[k]),
        **({"width": 420} if s.present else {}))
s = session.current()
g = compute.guard(lambda: compute.cached(("gradients", s.config, seq, query, s.gradients.grad_of),
                                         lambda: gradients_of(s.config, seq, query, s.gradients.grad_of)))
tok = g.tokens[query]
style = style_for(s)
said = st.expander(_("What autograd differentiated")) if s.present else st.container()
said.markdown(_(
    "Autograd differentiates the **{scalar}** of the output of {token} (value {value}) with respect to every input, "
    "on **{device}**. {token} may attend to {visible} of {keys} keys. Hooks registered on Q, K and V saw gradients "
    "of total norm Q {q}, K {k}, V {v}.").format(
    scalar=_(GRADIENT_OF[s.gradients.grad_of]), token=quoted(tok), value=f"{g.value:.4f}", device=md(result.device),
    visible=result.visible_keys(seq, query), keys=len(g.keys), q=f"{g.hooked.get('Q', 0):.3f}",
    k=f"{g.hooked.get('K', 0):.3f}", v=f"{g.hooked.get('V', 0):.3f}"))
kv, qx = gradient_figures(g, tok, style)
compute.chart(kv, key="grad_kv", filename="attnviz-gradients-kv")
compute.chart(qx, key="grad_qx", filename="attnviz-gradients-qx")
st.info(_(
    "What this means: the gradient reaches a value vector v_j in proportion to how much {token} attends to token j — "
    "a key it ignores (weight ≈ 0, or masked) gets no gradient through V, so training could not change what that "
    "token contributes here. Only the query of {token} has a gradient in Q. Keys get gradient where changing the "
    "match would move the weights. X collects all three paths, plus the positions it feeds as a key and value.").format(
    token=quoted(tok)), icon=":material/lightbulb:")
