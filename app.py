"""attnviz — see multi-head attention work. Entry point: `streamlit run app.py`."""

from pathlib import Path

import streamlit as st

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
    st.Page(HERE / "pages" / "explorer.py", title="Explorer", icon=":material/search:", default=True),
    st.Page(HERE / "pages" / "step_by_step.py", title="Step by step", icon=":material/stairs:", url_path="step-by-step"),
    st.Page(HERE / "pages" / "mask_lab.py", title="Mask lab", icon=":material/grid_on:", url_path="mask-lab"),
    st.Page(HERE / "pages" / "cross_attention.py", title="Cross-attention", icon=":material/swap_horiz:", url_path="cross-attention"),
    st.Page(HERE / "pages" / "verify.py", title="Verify against PyTorch", icon=":material/verified:", url_path="verify"),
    st.Page(HERE / "pages" / "gradients.py", title="Gradients", icon=":material/trending_down:", url_path="gradients"),
    st.Page(HERE / "pages" / "why_scale.py", title="Why scale by √d_k", icon=":material/straighten:", url_path="why-scale"),
]
page = st.navigation(PAGES)
state.sidebar()
state.write_url(state.current())
page.run()
