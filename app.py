"""attnviz — see multi-head attention work. Entry point: `streamlit run app.py`."""

from pathlib import Path

import streamlit as st

from attnviz.i18n import N_, _
from ui import state

_present = st.query_params.get("present", "0") in ("1", "true") or bool(st.session_state.get("present"))
st.set_page_config(
    page_title="attnviz",
    page_icon=":material/search:",
    layout="wide",
    initial_sidebar_state="collapsed" if _present else "expanded",
)

state.load()
HERE = Path(__file__).resolve().parent
PAGES = [
    st.Page(HERE / "pages" / "explorer.py", title=_("Explorer"), icon=":material/search:", default=True),
    *(
        st.Page(HERE / "pages" / f"{name}.py", title=_(title), icon=f":material/{icon}:", url_path=path)
        for name, title, icon, path in (
            ("step_by_step", N_("Step by step"), "stairs", "step-by-step"),
            ("mask_lab", N_("Mask lab"), "grid_on", "mask-lab"),
            ("cross_attention", N_("Cross-attention"), "swap_horiz", "cross-attention"),
            ("verify", N_("Verify against PyTorch"), "verified", "verify"),
            ("gradients", N_("Gradients"), "trending_down", "gradients"),
            ("why_scale", N_("Why scale by √d_k"), "straighten", "why-scale"),
            ("image_patches", N_("Image patches"), "image", "image-patches"),
            ("audio_frames", N_("Audio frames"), "graphic_eq", "audio-frames"),
            ("graph_nodes", N_("Graph nodes"), "hub", "graph-nodes"),
        )
    ),
]
page = st.navigation(PAGES)
state.sidebar(text_page=page.url_path not in ("image-patches", "audio-frames", "graph-nodes"))
state.write_url(state.current())
state.show_url_warnings()
state.presenter_hint()
page.run()
