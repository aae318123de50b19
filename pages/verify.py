"""Verify against PyTorch: the same weights through nn.MultiheadAttention and F.sdpa."""

import pandas as pd
import streamlit as st

from attnviz.verify import verify
from ui import state as ui_state

s = ui_state.current()
st.title("Verify against PyTorch")
st.caption("The current settings run through torch.nn.MultiheadAttention (with this run's weights copied in) "
           "and torch.nn.functional.scaled_dot_product_attention (with this run's per-head Q, K, V). "
           "Pass: every max |difference| ≤ 1e-5 in float32.")
st.toggle("Also check in float64", key="float64", help="Runs both implementations in double precision too.")
s = ui_state.current()
dtypes = [False, True] if s.float64 else [False]
for f64 in dtypes:
    try:
        v = verify(s.config(), float64=f64)
    except ValueError as e:
        st.error(str(e), icon="⚠️")
        st.stop()
    label = f"{v.dtype} on {v.device}"
    if v.passed:
        st.success(f"PASS — {label}: attnviz matches PyTorch.", icon="✅")
    else:
        st.error(f"FAIL — {label}: attnviz differs from PyTorch beyond the threshold.", icon="❌")
    st.dataframe(pd.DataFrame({
        "check": [c.name for c in v.checks],
        "max |difference|": [f"{c.max_abs_diff:.3e}" for c in v.checks],
        "threshold": [f"{c.threshold:.0e}" for c in v.checks],
        "result": ["pass" if c.passed else "FAIL" for c in v.checks],
    }), hide_index=True)
    for note in v.notes:
        st.info(note)
