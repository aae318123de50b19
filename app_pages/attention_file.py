"""Your attention: a file of attention weights (from attnviz.save_attention, in a notebook)
seen with every view of the table that weights alone can draw (``attnviz.views.catalogue``)."""

import hashlib

import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views.attention_file import file_run, sample_file
from attnviz.views.catalogue import VIEW_TITLES, views_on
from attnviz.views.selection import clamp_selection
from ui import compute, rendering, session, widgets
from ui.controls import control, row

OFFERED = views_on("attention-file")

s = session.current()
NOTE = _("Attention weights computed anywhere — a Hugging Face model with output_attentions=True, "
         "TransformerLens, your own code — saved with attnviz.save_attention(path, attention, tokens) as "
         ".safetensors or .npz, then seen here with every view of the explorer. Never a pickle: those run "
         "code when loaded.")
# On a projector the file (uploaded before the class) and the notes fold under the title, and the view, the head
# and the query share a row: the first chart whole on the first screen.
about = widgets.header_folding(_("Your attention"), NOTE, _("Your file, and what this page shows"))
with about:
    upload = widgets.uploaded_bytes(_("Attention file (.safetensors or .npz)"), ["safetensors", "npz"],
                                    key="attention_upload",
                                    help=_("Up to the server's upload limit. Not part of the link. A .pt, .bin or "
                                           ".pkl file is a pickle, which runs code when loaded: load it where you "
                                           "trust it and save it with attnviz.save_attention(path, attention, "
                                           "tokens)."))
if upload is None:
    about.info(_("No file yet: showing a sample made in code (the random model on the default sentence)."),
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
    control("layer", about, options=range(layers))
layer = int(st.session_state.get("layer", 0)) if layers > 1 else 0
result = compute.guard(lambda: compute.cached(("attention-file", digest, layer),
                                              lambda: file_run(data, name, layer), limited=False))
about.caption(_("{name}: {layers} layer(s) × {H} heads × {L} tokens").format(
    name=name, layers=result.layers, H=result.heads, L=result.weights.shape[-1]))
if st.session_state.get("view") not in OFFERED:
    st.session_state["view"] = "grid"
controls = row() if s.present else None
control("view", controls, kind="segmented", options=OFFERED, format_func=lambda v, t=fixed(): t(VIEW_TITLES[v]))
widgets.head_and_query(result, 0, into=controls)
s, fixes = clamp_selection(result, session.current().with_(seq=0))
for note in fixes:
    st.info(note, icon=":material/info:")
rendering.render(s.view, result, s, run_key=("attention-file", digest, layer))
widgets.run_downloads(result, key="file", csv_name="attnviz-attention-file.csv",
                      json_name="attnviz-attention-file.json")
