"""Verify against PyTorch: the same weights through nn.MultiheadAttention and F.sdpa."""

import pandas as pd
import streamlit as st

from attnviz.verify import verify
from attnviz.views import style_for, verify_figure
from ui import compute
from ui import state as ui_state

s = ui_state.current()
st.title("Verify against PyTorch")
st.caption("The current settings run through torch.nn.MultiheadAttention (with this run's weights copied in) "
           "and torch.nn.functional.scaled_dot_product_attention (with this run's per-head Q, K, V). "
           "Pass: every max |difference| ≤ 1e-5 in float32.")
st.toggle("Also check in float64", key="float64", help="Runs both implementations in double precision too.")
s = ui_state.current()
style = style_for(s)
for f64 in [False, True] if s.float64 else [False]:
    v = compute.guard(lambda f64=f64: compute.cached(("verify", s.config(), f64),
                                                     lambda: verify(s.config(), float64=f64)))
    label = f"{v.dtype} on {v.device}"
    if v.passed:
        st.success(f"PASS — {label}: attnviz matches PyTorch.", icon=":material/check_circle:")
    else:
        st.error(f"FAIL — {label}: attnviz differs from PyTorch beyond the threshold.", icon=":material/cancel:")
    st.dataframe(pd.DataFrame({
        "check": [c.name for c in v.checks],
        "max |difference|": [f"{c.max_abs_diff:.3e}" for c in v.checks],
        "threshold": [f"{c.threshold:.0e}" for c in v.checks],
        "result": ["pass" if c.passed else "FAIL" for c in v.checks],
    }), hide_index=True)
    compute.chart(verify_figure(v, style), key=f"verify_where_{v.dtype}", filename=f"attnviz-verify-{v.dtype}")
    st.caption("Where the weights differ, per head and per query token (log scale; the dashed line is the "
               "threshold, a red bar is over it). A failing run shows here where it fails.")
    for note in v.notes:
        st.info(note, icon=":material/info:")
