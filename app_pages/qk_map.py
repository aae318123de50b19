"""Q/K map: one head's queries and keys over a hundred sentences at once, in one 2-D map
(AttentionViz's idea), or every head of a layer as small multiples."""

import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.limits import MAX_CORPUS_BYTES, MAX_CORPUS_LINE_CHARS, MAX_CORPUS_LINES, MAX_CORPUS_TOKENS
from attnviz.views import qkmap as V
from attnviz.views.selection import style_for
from ui import compute, picks, session, widgets
from ui.controls import control, row
from ui.loading import ready

s = session.current()
NOTE = (_(
    "Every real token's query and key of one head, over many sentences, projected together into one map: a query "
    "lands near the keys it attends to, so clusters show what the head does (Yeh et al., AttentionViz, 2023). Before "
    "projecting, the vectors are normalised in a way that keeps each query's order of its keys: either each key "
    "gets one more coordinate, √(M² − ‖k‖²), so that a nearer key is one of a larger dot product (the "
    "max-inner-product reduction), or, as in AttentionViz, queries and keys are scaled to one mean norm and the "
    "keys moved to the queries' centre. Click a point to open its sentence in the explorer at this head, with that "
    "token as the query."))
# On a projector the sentences, the normalisation and the notes fold under the title, and the measured agreement
# goes under the map (its subtitle says it too): the map starts high on the first screen.
about = widgets.header_folding(_("Q/K map"), NOTE, _("Sentences, normalisation, and what this page shows"))
t = fixed()
SOURCES = {"default": _("the shipped sentences"), "own": _("your own lines")}
source = about.segmented_control(_("Sentences"), list(SOURCES), format_func=SOURCES.get, default="default",
                              required=True, key="qk_source")
lines = None
if source == "own":
    pasted = about.text_area(_("One sentence a line"), key="qk_lines", height=140, max_chars=MAX_CORPUS_BYTES,
                          help=_("Up to {lines} sentences of {chars} characters, {tokens} tokens in all. Not part of "
                                 "the link.").format(lines=MAX_CORPUS_LINES, chars=MAX_CORPUS_LINE_CHARS,
                                                     tokens=f"{MAX_CORPUS_TOKENS:,}"))
    with about:
        upload = widgets.uploaded_bytes(_("…or upload a .txt"), ["txt"], key="qk_upload",
                                        help=_("UTF-8, one sentence a line; it wins over the pasted lines."))
    raw = upload[0] if upload is not None else pasted
    if not (raw.strip() if isinstance(raw, str) else raw):
        about.info(_("Paste sentences or upload a .txt to map them; the shipped sentences are mapped until then."),
                icon=":material/edit_note:")
    else:
        lines = compute.guard(lambda: V.read_corpus(raw))
corpus = V.default_corpus() if lines is None else lines

ready(s.model)
crun = compute.guard(lambda: compute.cached(V.Q.run_key(s.config, corpus),
                                            lambda: V.Q.cached_corpus_run(s.config, corpus)))
bar = row()
control("qk_part", bar, kind="segmented", format_func=lambda v: t(V.PART_LABELS[v]))
control("qk_norm", about if s.present else bar, format_func=lambda v: t(V.NORM_LABELS[v]))
s = session.current()
if s.qk_map.qk_part == "map":
    if not 0 <= int(st.session_state.get("head", 0)) < crun.heads:
        st.session_state["head"] = 0
    control("head", bar, options=range(crun.heads))
    control("qk_method", bar, format_func=lambda v: t(V.METHOD_LABELS[v]))
    control("qk_color", bar, format_func=lambda v: t(V.COLOR_LABELS[v]))
s = session.current()
about.caption(_("{model}, layer {layer}: {n} sentences, {tokens} tokens, so {points} points per head.").format(
    model=s.model, layer=s.layer, n=len(corpus), tokens=f"{len(crun.tokens):,}", points=f"{2 * len(crun.tokens):,}"))
style = style_for(s)  # a map under 680 px leaves its plot a strip under its two-line titles
run_key = V.Q.run_key(s.config, corpus)

if s.qk_map.qk_part == "map":
    key = ("qk-map", run_key, s.head, s.qk_map.qk_method, s.qk_map.qk_norm, s.seed)
    with st.spinner(_("Projecting {points} points…").format(points=f"{2 * len(crun.tokens):,}")):
        record = compute.guard(lambda: compute.cached(key, lambda: V.Q.head_map(
            crun, s.head, method=s.qk_map.qk_method, seed=s.seed, normalisation=s.qk_map.qk_norm)))
    opened = picks.opened_point()
    if opened is not None:
        picks.open_in_explorer(compute.guard(lambda: V.explorer_values(record, opened, s)))
    agreement = (_(
        "**Neighbourhood agreement: {a:.1%}** of queries have their most-attended key (in the real attention of their "
        "own sentence) among their **k = {k}** nearest keys of that sentence in this map. Random placement, measured "
        "the same way: **{b:.1%}** (expected {e:.1%}).").format(a=record["agreement"], k=record["k"],
                                                                b=record["baseline"], e=record["baseline_expected"]))
    if not s.present:  # on a projector, under the map
        st.markdown(agreement)
    if record["explained"]:
        about.caption(_("PCA keeps {v:.0%} of the variance of the normalised queries and keys in these two "
                        "axes.").format(v=sum(record["explained"])))
    if (warning := V.trust_warning(record)) is not None:
        st.warning(warning, icon=":material/warning:")
    fig = compute.cached_figure(("qk-fig", key, s.qk_map.qk_color, compute.style_key(style)),
                         lambda: V.map_figure(record, s.qk_map.qk_color, style))
    event = st.plotly_chart(fig, key="qk_chart", theme=None, width="stretch", on_select="rerun",
                            selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
    points = getattr(getattr(event, "selection", None), "points", None) or []
    if points and isinstance(points[0].get("customdata"), (int, float)):
        picks.open_point(int(points[0]["customdata"]), ("qk", key, int(points[0]["customdata"])))
    elif not points:  # no selection held: the same point clicked again opens it again
        picks.forget_pick()
    if s.present:
        st.markdown(agreement)
else:
    job = compute.guard(lambda: V.overview_job(s, corpus))  # the server may be busy: it says so
    if not job.done.is_set():
        st.progress(job.fraction, text=_("Mapping every head of layer {layer}: {p:.0%}").format(layer=s.layer,
                                                                                              p=job.fraction))
        st.caption(_("It is computed once for this server and shared by everyone who opens the same model, layer "
                     "and sentences."))

        @st.fragment(run_every=0.5)
        def _poll() -> None:
            if V.overview_job(s, corpus).done.is_set():
                st.rerun()

        _poll()
        st.stop()
    if job.error:
        st.error(job.error, icon=":material/error:")
        st.stop()
    fig = compute.cached_figure(("qk-overview-fig", V.overview_key_of(s, corpus), compute.style_key(style)),
                         lambda: V.overview_figure(job.value, style, layer=s.layer))
    st.caption(_("Each head's PCA map in its own cell, with its agreement (k = {k}) and the random baseline. "
                 "Pick a head under “one head” to see it large.").format(k=V.K_NEIGHBOURS))
    if (warning := V.untrusted_line(job.value)) is not None:
        st.warning(warning, icon=":material/warning:")
    compute.chart(fig, key="qk_overview", filename=f"attnviz-qk-overview-layer{s.layer}")
