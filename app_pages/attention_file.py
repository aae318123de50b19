"""Your attention: a file of attention weights (from attnviz.save_attention, in a notebook)
seen with every view of the explorer."""

import hashlib

import pandas as pd
import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views.attention_file import VIEWS, file_run, sample_file
from attnviz.views.explorer import (
    flow_problem,
    head_table,
    is_long,
    roles_table,
    view_description,
    view_figure,
    view_key,
    view_problem,
    weights_table,
)
from attnviz.views.registry import VIEW_TITLES
from attnviz.views.selection import clamp_selection, file_stem
from ui import compute, session, widgets
from ui.controls import control
from ui.safe import md

PICKLES = ["pt", "pth", "bin", "pkl", "pickle"]  # accepted by the uploader only to be refused with a reason

s = session.current()
widgets.header(_("Your attention"),
               _("Attention weights computed anywhere — a Hugging Face model with output_attentions=True, "
                 "TransformerLens, your own code — saved with attnviz.save_attention(path, attention, tokens) as "
                 ".safetensors or .npz, then seen here with every view of the explorer. Never a pickle: those run "
                 "code when loaded."))
upload = widgets.uploaded_bytes(_("Attention file (.safetensors or .npz)"), ["safetensors", "npz", *PICKLES],
                                key="attention_upload",
                                help=_("Up to the server's upload limit. Not part of the link."))
if upload is None:
    st.info(_("No file yet: showing a sample made in code (the random model on the default sentence)."),
            icon=":material/upload_file:")
    data, name = compute.cached(("attention-sample",), sample_file, limited=False)
else:
    data, name = upload
digest = hashlib.sha256(data).hexdigest()
layers = compute.guard(lambda: compute.cached(("attention-file", digest, 0), lambda: file_run(data, name, 0),
                                               limited=False)).layers
if layers > 1:
    if not 0 <= int(st.session_state.get("layer", 0)) < layers:
        st.session_state["layer"] = 0
    control("layer", options=range(layers))
layer = int(st.session_state.get("layer", 0)) if layers > 1 else 0
result = compute.guard(lambda: compute.cached(("attention-file", digest, layer),
                                              lambda: file_run(data, name, layer), limited=False))
st.caption(_("{name}: {layers} layer(s) × {H} heads × {L} tokens").format(
    name=name, layers=result.layers, H=result.heads, L=result.weights.shape[-1]))
if st.session_state.get("view") not in VIEWS:
    st.session_state["view"] = "grid"
control("view", kind="segmented", options=VIEWS, format_func=lambda v, t=fixed(): t(VIEW_TITLES[v]))
widgets.head_and_query(result, 0)
s, fixes = clamp_selection(result, session.current().with_(seq=0))
for note in fixes:
    st.info(note, icon=":material/info:")
key = (digest, layer)
if view_problem(result, s.view):  # the norms and the neuron view need what a file does not hold
    st.info(md(view_problem(result, s.view)), icon=":material/info:")
elif s.view == "table":
    table = weights_table(result, s, is_long(result))
    st.dataframe(pd.DataFrame(table["data"], index=table["index"], columns=table["columns"]), height=500)
elif s.view == "flow" and flow_problem(result, 0):
    st.info(flow_problem(result, 0), icon=":material/info:")
else:
    if s.view == "roles":
        st.dataframe(pd.DataFrame(compute.cached(("attention-roles-table", digest, layer),
                                                 lambda: roles_table(result, 0), limited=False)), hide_index=True)
    if s.view == "analysis":
        st.dataframe(pd.DataFrame(compute.cached(("attention-head-table", digest), lambda: head_table(result, 0),
                                                 limited=False)), hide_index=True)
    fig = compute.figure(("attention-file-view", *key, *view_key(s)[1:]), lambda: view_figure(result, s, s.view),
                         alt=lambda f: view_description(result, s, s.view, f))
    compute.chart(fig, key=f"file_{s.view}", filename=file_stem(s, s.view, result))
widgets.run_downloads(result, key="file", csv_name="attnviz-attention-file.csv",
                      json_name="attnviz-attention-file.json")
