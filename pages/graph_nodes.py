"""Graph nodes: a graph's nodes are a set of vectors too; its adjacency can be the mask."""

import streamlit as st

from attnviz import inputs as I
from attnviz.i18n import _
from attnviz.views import followed, graph_run, input_figure, style_for
from ui import compute, widgets
from ui import state as ui_state

s = ui_state.current()
st.title(_("Graph nodes"))
st.caption(_("Each node is a token: a seeded embedding plus its degree. With the adjacency matrix (plus self-loops) "
             "as the mask, a node attends only to its neighbours and itself — graph attention. With no mask it "
             "attends to every node, for contrast."))
c1, c2 = st.columns([1, 2])
c1.selectbox(_("Graph"), I.GRAPH_PRESETS, key="graph",
             disabled=bool(str(st.session_state.get("edges", "")).strip()),
             help=_("path, star, 3 × 3 grid, or two communities joined by one edge."))
c2.text_input(_("…or type edges"), key="edges", placeholder="0-1, 1-2, 2-0",
              help=_("Pairs of node numbers (0 to 63), separated by commas or new lines. Overrides the preset."))
widgets.projections_toggle()
c1, c2 = st.columns([1, 2])
c1.selectbox(_("Mask"), I.GRAPH_MASKS, key="graph_mask", help=_("adjacency + self-loops (graph attention), or none."))
s = ui_state.current()
inp, result = compute.guard(lambda: compute.cached(("graph-run", s.config(), s.graph, s.edges, s.graph_mask),
                                                   lambda: graph_run(s)))
for note in inp.notes:
    st.info(note, icon=":material/info:")
labels = inp.labels
st.session_state["node"] = min(int(st.session_state.get("node", 0)), len(labels) - 1)
c2.selectbox(_("Follow node"), list(range(len(labels))), key="node")
s = ui_state.current()
at = followed(s, inp)
blocked = int((~result.mask_matrix(0)).sum()) if result.mask is not None else 0
st.caption(_("{n} nodes, {e} edges · weights {shape} · {blocked} of {pairs} node pairs blocked by the mask").format(
    n=inp.meta["n"], e=len(inp.meta["edges"]), shape=tuple(result.weights.shape), blocked=blocked,
    pairs=len(labels) ** 2))
style = style_for(s)
key = ("graph", s.config(), s.graph, s.edges, s.graph_mask)
compute.chart(compute.figure(("graph-draw", *key, at, compute.style_key(style)),
                             lambda: input_figure(inp, result, s, style)),
              key="graph_draw", filename="attnviz-graph-nodes")
widgets.input_results(key, inp, result, s, style, "graph-nodes")
