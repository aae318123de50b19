"""Graph nodes: a graph's nodes are a set of vectors too; its adjacency can be the mask."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views.modality import followed, graph_run, input_figure, input_view_figure
from attnviz.views.selection import first_chart_style
from ui import compute, session, widgets
from ui.controls import control, row

s = session.current()
NOTE = _("Each node is a token: a seeded embedding plus its degree. With the adjacency matrix (plus "
         "self-loops) as the mask, a node attends only to its neighbours and itself — graph attention. With "
         "no mask it attends to every node, for contrast.")
# On a projector the graph (chosen before the class) and the notes fold under the title, the mask and the node
# followed share a row and the counts go under the chart: the graph whole on the first screen.
about = widgets.header_folding(_("Graph nodes"), NOTE, _("The graph, and what this page shows"))
c1, c2 = about.columns([1, 2])
control("graph", c1, disabled=bool(str(st.session_state.get("edges", "")).strip()))
control("edges", c2, placeholder="0-1, 1-2, 2-0")
with about:
    widgets.projections_toggle()
c1, c2 = (row(), None) if s.present else st.columns([1, 2])
c2 = c2 or c1
control("graph_mask", c1)
s = session.current()
g = s.graph_nodes
inp, result = compute.guard(lambda: compute.cached(("graph-run", s.config, s.input_projections, g.graph, g.edges,
                                                    s.graph_nodes.graph_mask), lambda: graph_run(s)))
for note in inp.notes:
    st.info(note, icon=":material/info:")
labels = inp.labels
st.session_state["node"] = min(int(st.session_state.get("node", 0)), len(labels) - 1)
control("node", c2, options=range(len(labels)))
s = session.current()
at = followed(s, inp)
counts = _("{n} nodes, {e} edges · weights {shape} · {blocked} of {pairs} node pairs blocked by the mask").format(
    n=inp.meta["n"], e=len(inp.meta["edges"]), shape=tuple(result.weights.shape), blocked=result.blocked(0),
    pairs=len(labels) ** 2)
if not s.present:
    st.caption(counts)
style = first_chart_style(s)
key = ("graph", s.config, s.input_projections, s.graph_nodes.graph, s.graph_nodes.edges, s.graph_nodes.graph_mask)
compute.chart(compute.cached_figure(("graph-draw", *key, at, compute.style_key(style)),
                             lambda: input_figure(inp, result, s, style)),
              key="graph_draw", filename="attnviz-graph-nodes")
if s.present:
    st.caption(counts)
widgets.input_results(key, result, style, "graph-nodes",
                      lambda view: input_view_figure(inp, result, s.with_(view=view), style))
