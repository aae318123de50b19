"""The floor: the smallest Streamlit page that draws one Plotly heatmap of the same
size as the explorer's (one cell per token pair of the URL's text).

``labels=1`` names each row and column by its token, each token its own category (as the
explorer's heatmaps do: a repeated word gets an invisible suffix), the bare page the
explorer's first paint is held to. ``elements=N`` in the URL adds N one-word Markdown elements before the chart (at most
100): the floor with as many messages per run as another page, for the join table's row
that separates what a page's element count costs from what its own work does.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

n = max(1, len(st.query_params.get("text", "a b c").split()))
try:
    extra = min(100, max(0, int(st.query_params.get("elements", "0"))))
except ValueError:
    extra = 0
for i in range(extra):
    st.markdown(f"element {i}")
z = np.random.default_rng(n).random((n, n), dtype=np.float32)
if st.query_params.get("labels") == "1":
    words = st.query_params.get("text", "a b c").split()
    tokens = [w + "\u200b" * words[:i].count(w) for i, w in enumerate(words)]  # each its own category
    st.plotly_chart(go.Figure(go.Heatmap(z=z, x=tokens, y=tokens)), theme=None)
else:
    st.plotly_chart(go.Figure(go.Heatmap(z=z)), theme=None)
