"""Cross-attention: queries from the target, keys and values from the source."""

import streamlit as st

from attnviz import figures as F
from attnviz.views import file_stem, style_for
from ui import compute, widgets
from ui import state as ui_state

s = ui_state.current()
st.title("Cross-attention")
st.caption("Queries come from the target (the decoder side, the sidebar's text); keys and values from the "
           "source (the encoder side). Weights have shape L_target × S_source per head.")
st.text_area("Source — keys and values (one line, or one per target line)", key="source", height=80,
             help="Several lines form a padded batch; padded source keys are blocked by every mask but 'none'.")
s = ui_state.current()
result = compute.run(s.config(cross=True))
seq = min(s.seq, len(result.tokens) - 1)
N, H, L, S = result.weights.shape
st.caption(f"weights {tuple(result.weights.shape)} = (N, H, L_target, S_source) · "
           f"target {result.lengths[seq]} tokens, source {result.source_lengths[seq]} tokens")
for note in result.notes:
    st.info(note)
head, query = widgets.head_and_query(result, seq, query_label="Target token")
style = style_for(s)
compute.chart(F.grid_figure(F.grid_data(result, seq), style, title="cross-attention weights per head"),
              key="cross_grid", filename=file_stem(s, "cross-grid"))
c1, c2 = st.columns(2)
with c1:
    compute.chart(F.heatmap_figure(F.head_data(result, seq, head), style), key="cross_head",
                  filename=file_stem(s, "cross-head"))
with c2:
    compute.chart(F.query_figure(result, seq, query, style), key="cross_query",
                  filename=file_stem(s, "cross-query"))
