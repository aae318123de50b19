"""The floor: the smallest Streamlit page that draws one Plotly heatmap of the same
size as the explorer's (one cell per token pair of the URL's text)."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

n = max(1, len(st.query_params.get("text", "a b c").split()))
z = np.random.default_rng(n).random((n, n), dtype=np.float32)
st.plotly_chart(go.Figure(go.Heatmap(z=z)), theme=None)
