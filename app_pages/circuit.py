"""Circuit: how heads work together. Patching's two prompts and answer; every edge of the model scored at
once by EAP or EAP-IG (``attnviz.views.attribution``, a background job): the graph of the top edges, the
faithfulness curve beside it, the top edges' exact effects, an edge opened by a click. Then, where the
model is small enough, every head patched and every path into every later head through its queries,
keys and values (``attnviz.views.circuit``, a background job on the compute workers); the circuit as a
graph; an edge opened (the receiver's attention with and without that path) and a cell of it opened
(its score in parts)."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _
from attnviz.views import attribution as A
from attnviz.views import circuit as C
from attnviz.views.markdown import md
from attnviz.views.patching import example_for
from attnviz.views.selection import style_for
from ui import compute, picks, session, widgets
from ui.controls import control, label_of, row

s = session.current()
widgets.header(_("How heads work together: the circuit"), "" if s.present else _(
    "A later head can read what an earlier head wrote, through its queries, keys or values (Elhage et al. 2021). "
    "Path patching (Wang et al. 2022) measures each such path: the earlier head's clean output goes into the later "
    "head's one input only, everything else runs on the corrupted prompt. The model is the sidebar's: SmolLM2-135M, a "
    "causal language model folder or GGUF file, or the tiny model Watch it learn trains."))
# On a projector the graph is the first screen: the prompts, the definitions and the graph's settings fold
# away above it.
inputs = st.expander(_("Prompts, answer, definitions and threshold")) if s.present else st.container()
with inputs:
    s = widgets.prompt_pair(C.PAGE, lambda state: example_for(state, C.EXAMPLE), C.EXAMPLE)

prompts = s.pair  # the prompts and the answer, shared with Patching
# Folded on a laptop too: drawn open, the definitions pushed the graph below the first screen. In presenter
# mode they sit in the inputs' expander (one expander cannot hold another).
with inputs if s.present else st.expander(_("Definitions: edge attribution, faithfulness, exact effect, path "
                                             "patching, composition score, score attribution")):
    for name, words in C.DEFINITIONS.items():
        st.markdown(f"**{_(C.DEFINITION_NAMES[name])}**")
        st.latex(C.FORMULAS[name])
        st.caption(md(words))

# --- every edge, scored at once ------------------------------------------------------------------------
with inputs if s.present else st.container():
    settings = row()
    control("circuit_method", settings)
    control("circuit_steps", settings)
    control("circuit_top", settings)
s = session.current()
style = style_for(s)
c = s.circuit
akey = A.attribution_key(s.model, prompts.clean, prompts.corrupted, prompts.answer, prompts.wrong, c.method, c.steps)
ajob = compute.guard(lambda: A.attribution_job(s.model, prompts.clean, prompts.corrupted, prompts.answer,
                                               prompts.wrong, c.method, c.steps))
arun = widgets.job_value(
    ajob, _("Scoring every edge, then the faithfulness curve and the top edges' exact effects: {p:.0%}").format(
        p=ajob.fraction), _("It runs once for this server and is shared by everyone who opens the same model, prompts "
                            "and method."))
link = compute.fallback(lambda: A.picked(arun, c.link), lambda: A.picked(arun, ""), label_of("circuit_link"))
graph = compute.guard(lambda: compute.cached_figure(
    (*akey, "graph", c.top, link, compute.style_key(style)), lambda: A.draw_graph(arun, c.top, style, link)))
curve = compute.guard(lambda: compute.cached_figure((*akey, "curve", compute.style_key(style)),
                                                    lambda: A.draw_curve(arun, style)))
# On a laptop the curve sits beside the graph; on a projector each takes the width, the graph first.
where_graph, where_curve = (st.container(), st.container()) if s.present else st.columns([3, 2])
with where_graph:
    for point in compute.clicked_points(graph, key="circuit_edges", filename="circuit-edges"):
        picked = A.clicked_edge_name(point)
        if picked and picked != c.link:
            picks.pick({"circuit_link": picked}, ("circuit_link", picked))
with where_curve:
    compute.chart(curve, key="circuit_faithfulness", filename="circuit-faithfulness")
    if not s.present:
        st.caption(_("Each point: the clean run with only the top n edges carrying the clean activations, every other "
                     "edge its sender's corrupted one, as a share of the clean − corrupted difference."))
effect = compute.guard(lambda: compute.cached(
    (*akey, "effect", link), lambda: A.edge_effect(s.model, prompts.clean, prompts.corrupted, prompts.answer,
                                                   prompts.wrong, arun, link)))
st.markdown(_("**{edge}**: score {score:+.4g}, exact effect {effect:+.4g} (the clean run with this one edge "
              "corrupted, minus the clean run's metric). A click on an edge's diamond opens it.").format(
    edge=md(link), score=arun.attribution[link], effect=effect))
control("circuit_link", placeholder=link)  # empty, it shows the top edge
with st.expander(_("The top {n} edges: score and exact effect").format(n=A.EXACT_TOP), expanded=not s.present):
    rho = arun.agreement
    st.caption(_("Rank agreement of the two (Spearman's ρ): {rho}").format(
        rho="—" if rho != rho else f"{rho:.2f}"))
    st.dataframe(pd.DataFrame(A.top_rows(arun)), hide_index=True)

# --- every head-to-head path, exactly, where the model is small enough ---------------------------------
too_large = compute.guard(lambda: C.exact_too_large(s.model, prompts.clean))
if too_large is not None:
    st.info(md(too_large), icon=":material/account_tree:")
    st.stop()
st.subheader(_("Head to head, exactly: the circuit by path patching"))
job = compute.guard(lambda: C.circuit_job(s.model, prompts.clean, prompts.corrupted, prompts.answer, prompts.wrong,
                                          compute.on_worker))
run = widgets.job_value(
    job, _("Patching every head, then every path through queries, keys and values: {p:.0%}").format(p=job.fraction),
    _("It runs once for this server and is shared by everyone who opens the same model and prompts."))
if run.found.receiver is None or not s.present:  # on a projector, the sentence goes under its graph
    st.info(md(run.found.message), icon=":material/account_tree:")
if run.found.receiver is None:  # one layer: no later head to compose with
    st.stop()

with inputs if s.present else st.container():
    pair = row()
    control("circuit_threshold", pair, step=0.01)
    control("circuit_composition", pair)
s = session.current()
key = C.circuit_key(s.model, s.pair.clean, s.pair.corrupted, s.pair.answer, s.pair.wrong)
fig = compute.guard(lambda: compute.cached_figure(
    (*key, "graph", s.circuit.threshold, s.circuit.composition, compute.style_key(style)),
    lambda: C.draw(run, s.circuit.threshold, C.composition_mode(s.circuit), style)))
legend = _("Heads sized and coloured by what each brings back patched alone; a path's colour is the input it "
           "reaches, its width the share it brings back. A click on an edge's diamond opens it below.")
if not s.present:
    st.caption(legend)
for point in compute.clicked_points(fig, key="circuit_graph", filename="circuit"):
    picked = C.clicked_edge(point)
    if picked and picked != s.circuit.edge:
        picks.pick({"circuit_edge": picked, "circuit_cell": ""}, ("circuit_edge", picked))
if s.present:
    st.info(md(run.found.message), icon=":material/account_tree:")
    st.caption(legend)

edge = compute.fallback(lambda: C.edge_of(run, s.circuit), lambda: C.edge_of(run, C.without_edge(s.circuit)),
                        label_of("circuit_edge"))
st.subheader(_("One path: {edge}").format(edge=edge.words()))
control("circuit_edge", placeholder=edge.name)  # empty, it shows the edge drawn
view = compute.guard(lambda: compute.cached(
    (*key, "edge", edge.name), lambda: C.edge_view(s.model, prompts.clean, prompts.corrupted, prompts.answer,
                                                    prompts.wrong, edge)))
cell = compute.fallback(lambda: C.cell_of(view, s.circuit), lambda: C.cell_of(view, C.without_cell(s.circuit)),
                        label_of("circuit_cell"))
st.caption(_("The receiver's attention on the corrupted prompt, as it is and with only this path patched (a value's "
             "path leaves the weights as they are). A click on a cell splits its score into parts below."))
for patched in (False, True):  # one above the other: side by side, a projector's width cuts their labels
    fig = compute.guard(lambda patched=patched: compute.cached_figure(
        (*key, "edge-figure", edge.name, cell[0], patched, compute.style_key(style)),
        lambda: C.edge_figure(view, style, cell, patched=patched)))
    points = compute.clicked_points(fig, key=f"circuit_attention_{int(patched)}",
                                    filename=f"circuit-{edge.name.replace(':', '-')}-{int(patched)}")
    for point in points:
        picked = C.clicked_cell(point)
        if picked and picked != s.circuit.cell:
            picks.pick({"circuit_cell": picked}, ("circuit_cell", int(patched), picked))

st.subheader(_("Why it attends there: query {q} · key {k}, split into parts").format(q=cell[0], k=cell[1]))
control("circuit_cell", placeholder=f"{cell[0]}.{cell[1]}")
r, g = edge.receiver
attribution = compute.guard(lambda: compute.cached(
    (*key, "cell", r, g, *cell), lambda: C.cell_attribution(s.model, s.pair.clean, r, g, *cell)))
st.markdown("\n".join(f"- {md(line)}" for line in attribution.words(5)))
fig = compute.guard(lambda: compute.cached_figure(
    (*key, "cell-figure", r, g, *cell, compute.style_key(style)), lambda: C.terms_figure(attribution, style)))
compute.chart(fig, key="circuit_cell_terms", filename=f"circuit-L{r}H{g}-{cell[0]}-{cell[1]}")
