"""The explorer: one run of multi-head attention seen several ways (the views of the table,
``attnviz.views.catalogue``, drawn by ``ui.rendering``)."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views import generation as G
from attnviz.views.catalogue import VIEW_TITLES, VIEWS, views_on
from attnviz.views.markdown import md
from attnviz.views.selection import fallbacks, file_stem, resolve_query, style_for
from ui import compute, picks, rendering, session, widgets
from ui.controls import control, row

s = session.current()
result = compute.result(s.config)
# A head or query that this input lacks falls back (drawn below, so still assignable; seq is kept valid by the
# sidebar), the query to -1, which follows the last token and stays out of the link.
fallen, fixes = fallbacks(result, s, ("head", "query"))
if fallen:
    s = session.fall_back(fallen)
s = resolve_query(result, s)
for note in result.notes + fixes:
    st.info(note, icon=":material/info:")

if not s.present:
    shapes = " → ".join(f"{name} {tuple(shape)}" for name, shape in result.shapes().items())
    ms = sum(result.timings_ms.values())
    widgets.header(_("Attention explorer"),
                   _("softmax(QKᵀ/√d_k + M)·V, per head — hover a cell for its query, key and weight."),
                   _("**Shapes** {shapes} · device **{device}** · {ms} ms").format(
                       shapes=shapes, device=result.device, ms=f"{ms:.1f}"),
                   _("Each chart's toolbar (camera icon) saves it as PNG. The address bar holds every setting: "
                     "copy it to share this exact view."))

control("view", kind="segmented", options=views_on("explorer"), format_func=lambda v, t=fixed(): t(VIEW_TITLES[v]))
view = st.session_state.get("view") or "grid"
reads = VIEWS[view].picks  # only the head or query this view reads (the grid reads neither)
if reads:
    widgets.head_and_query(result, s.seq, with_head="head" in reads, with_query="query" in reads)
s = resolve_query(result, session.current())  # drawn at the last token while the query follows it

# The chosen view alone, right under its selector: where the user is looking (the grid is a view
# like the others; drawn above another view, it pushed that one off a laptop's screen).
if not VIEWS[view].opens_heads:
    picks.forget_pick()  # a pick acts once; a view whose blocks or rows open a head holds its own
rendering.render(view, result, s, run_key=(s.config,))

predicted = result.next_tokens[s.seq] if result.next_tokens is not None else None
if predicted and not s.present:
    st.subheader(_("Next token"))
    st.caption(_("What {model} predicts after this sentence (its ten most likely next tokens).").format(
        model=result.model_name))
    st.dataframe(pd.DataFrame({_("next token"): [t for t, _p in predicted],
                               _("probability"): [p for _t, p in predicted]}), hide_index=True,
                 column_config={_("probability"): st.column_config.NumberColumn(format="%.3f")})
    st.subheader(_("Generate"))
    pair = row()
    control("generate", pair)
    control("chat", pair)
    s = session.current()
    asked = (s.seq, s.explorer.generate, s.explorer.chat)
    gen = compute.guard(lambda: compute.cached(("generate", result.config, *asked),
                                               lambda: G.generation(result, *asked)))
    if gen is not None:
        if gen.count > 1:  # the step's bound comes from the run: how many tokens it wrote
            if not 0 <= st.session_state.get("step", 0) < gen.count:
                st.session_state["step"] = 0
            control("step", kind="slider", bounds=(0, gen.count - 1))
        s = session.current()
        step = min(s.explorer.step, gen.count - 1)
        st.caption(_("{model} wrote {n} tokens greedily (the most likely each time): **{text}**").format(
            model=result.model_name, n=gen.count, text=md(" ".join(gen.tokens[gen.context:]))))
        style = style_for(s)
        key = ("generate", result.config, *asked, result.layer, step, compute.style_key(style))
        compute.chart(compute.cached_figure(("gen-step", *key), lambda: G.step_figure(gen, result.layer, step, style)),
                      key="gen_step", filename=file_stem(s, "generated-step", result))
        compute.chart(compute.cached_figure(("gen-all", *key),
                                            lambda: G.generated_overview_figure(gen, result.layer, step, style)),
                      key="gen_all", filename=file_stem(s, "generated", result))

elif not s.present and (language_model := G.language_model_offered()):
    st.caption(_("Next token and generation: choose **{model}** as the sidebar's model to see what a language model "
                 "writes after this sentence, and the attention that chose each token.").format(model=language_model))

if not s.present:
    widgets.run_downloads(result, key="dl", csv_name=file_stem(s, "weights", result) + ".csv",
                          json_name=file_stem(s, "run", result) + ".json")
