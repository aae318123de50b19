"""Gradients: the backward view of one query's output."""

import streamlit as st

from attnviz.gradients import SCALAR_LABELS, SCALARS, token_gradients
from attnviz.views import gradient_figures, style_for
from ui import compute, widgets
from ui import state as ui_state
from ui.safe import md, quoted

s = ui_state.current()
st.title("Gradients")
result = compute.run(s.config())
seq = min(s.seq, len(result.tokens) - 1)
tokens = result.tokens[seq]
_, query = widgets.head_and_query(result, seq, query_label="Query token", with_head=False)
st.selectbox("Differentiate", SCALARS, key="grad_of", format_func=SCALAR_LABELS.get,
             help="Which scalar of the query's output vector autograd differentiates.")
s = ui_state.current()
g = compute.guard(lambda: compute.cached(("gradients", s.config(), seq, query, s.grad_of),
                                         lambda: token_gradients(s.config(), seq, query, s.grad_of)))
tok = g.tokens[query]
style = style_for(s)
visible = int((result.mask_matrix(seq)[query]).sum())
st.markdown(
    f"Autograd differentiates the **{SCALAR_LABELS[s.grad_of]}** of the output of {quoted(tok)} "
    f"(value {g.value:.4f}) with respect to every input, on **{md(result.device)}**. {quoted(tok)} may attend to "
    f"{visible} of {len(g.keys)} keys. Hooks registered on Q, K and V saw gradients of total norm "
    f"Q {g.hooked.get('Q', 0):.3f}, K {g.hooked.get('K', 0):.3f}, V {g.hooked.get('V', 0):.3f}.")
kv, qx = gradient_figures(g, tok, style)
compute.chart(kv, key="grad_kv", filename="attnviz-gradients-kv")
compute.chart(qx, key="grad_qx", filename="attnviz-gradients-qx")
st.info(
    f"What this means: the gradient reaches a value vector v_j in proportion to how much {quoted(tok)} attends to "
    "token j — a key it ignores (weight ≈ 0, or masked) gets no gradient through V, so training could not "
    f"change what that token contributes here. Only the query of {quoted(tok)} has a gradient in Q. Keys get "
    "gradient where changing the match would move the weights. X collects all three paths, plus the positions "
    "it feeds as a key and value.", icon=":material/lightbulb:")
