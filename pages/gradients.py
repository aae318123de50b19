"""Gradients: the backward view of one query's output."""

import streamlit as st

from attnviz.figures import token_bars
from attnviz.gradients import SCALAR_LABELS, SCALARS, token_gradients
from attnviz.views import style_for
from ui import compute, widgets
from ui import state as ui_state

s = ui_state.current()
st.title("Gradients")
result = compute.run(s.config())
seq = min(s.seq, len(result.tokens) - 1)
_, query = widgets.head_and_query(result, seq, query_label="Query token")
st.selectbox("Differentiate", SCALARS, key="grad_of", format_func=SCALAR_LABELS.get,
             help="Which scalar of the query's output vector autograd differentiates.")
s = ui_state.current()
try:
    g = token_gradients(s.config(), seq, query, s.grad_of)
except ValueError as e:
    st.error(str(e), icon="⚠️")
    st.stop()
tok = g.tokens[query]
style = style_for(s)
st.markdown(
    f"Autograd differentiates the **{SCALAR_LABELS[s.grad_of]}** of “{tok}”'s output "
    f"(value {g.value:.4f}) with respect to every input. Hooks registered on Q, K and V saw gradients of "
    f"total norm Q {g.hooked.get('Q', 0):.3f}, K {g.hooked.get('K', 0):.3f}, V {g.hooked.get('V', 0):.3f}.")
compute.chart(token_bars(g.keys, {"‖∂/∂V‖": g.norms["V"], "‖∂/∂K‖": g.norms["K"]},
                         f"gradient per key token, for the output of “{tok}”", style, y_title="gradient norm"),
              key="grad_kv", filename="attnviz-gradients-kv")
compute.chart(token_bars(g.tokens, {"‖∂/∂Q‖": g.norms["Q"], "‖∂/∂X‖": g.norms["X"]},
                         "gradient per query-side token", style, y_title="gradient norm"),
              key="grad_qx", filename="attnviz-gradients-qx")
st.info(
    f"What this means: the gradient reaches a value vector v_j in proportion to how much “{tok}” attends to "
    "token j — a key it ignores (weight ≈ 0, or masked) gets no gradient through V, so training could not "
    f"change what that token contributes here. Only “{tok}”'s own query has a gradient in Q. Keys get "
    "gradient where changing the match would move the weights. X collects all three paths, plus the positions "
    "it feeds as a key and value.", icon="💡")
