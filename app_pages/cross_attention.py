"""Cross-attention: queries from the target, keys and values from the source."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views.cross import CROSS_MASK, cross_config, cross_grid_figure, cross_head_figure, cross_query_figure
from attnviz.views.selection import file_stem, style_for
from ui import compute, session, widgets
from ui.controls import control

s = session.current()
NOTE = _("Queries come from the target (the decoder side, the sidebar's text); keys and values from the source "
         "(the encoder side). Weights have shape L_target × S_source per head.")
# On a projector the source text and the notes fold under the title (the source chosen before the class): the grid
# of heads whole on the first screen.
about = widgets.header_folding(_("Cross-attention"), NOTE, _("The source text, and what this page shows"))
control("source", about, kind="text_area", height=80)
s = session.current()
if s.model != "random" and cross_config(s).model == "random":
    st.info(_("Cross-attention runs on the random model here: {model} attends within one text. Choose an "
              "encoder–decoder (T5, BART) to see a real model's.").format(model=s.model), icon=":material/info:")
result = compute.result(cross_config(s))
seq = min(s.seq, len(result.tokens) - 1)
about.info(_("Every target token may look at every real source token: causal and window masks compare positions within "
          "one sentence, and target position i has no relation to source position i. So here only padded source keys "
          "are blocked (mask: {mask}); the sidebar draws no mask here.").format(mask=CROSS_MASK),
        icon=":material/info:")
about.caption(_("weights {shape} = (N, H, L_target, S_source) · target {target} tokens, source {source} tokens").format(
    shape=tuple(result.weights.shape), target=result.lengths[seq], source=result.source_lengths[seq]))
for note in result.notes:
    st.info(note, icon=":material/info:")
head, query = widgets.head_and_query(result, seq, query_label=_("Target token"))
s = session.current().with_(seq=seq)
style = style_for(s)
key = (cross_config(s), seq, compute.style_key(style))
compute.chart(compute.cached_figure(("cross-grid", *key), lambda: cross_grid_figure(result, s, style)),
              key="cross_grid", filename=file_stem(s, "cross-grid", result))
c1, c2 = widgets.chart_columns(2)
with c1:
    compute.chart(compute.cached_figure(("cross-head", *key, head),
                                 lambda: cross_head_figure(result, seq, head, style)),
                  key="cross_head", filename=file_stem(s, "cross-head", result))
with c2:
    compute.chart(compute.cached_figure(("cross-query", *key, query),
                                        lambda: cross_query_figure(result, seq, query, style)),
                  key="cross_query", filename=file_stem(s, "cross-query", result))
