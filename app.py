"""attnviz — see multi-head attention work. Entry point: `streamlit run app.py`."""

from pathlib import Path

import streamlit as st

from ui import state

_present = st.query_params.get("present", "0") in ("1", "true") or bool(st.session_state.get("present"))
st.set_page_config(
    page_title="attnviz",
    page_icon="🔍",
    layout="wide",
    initial_sidebar_state="collapsed" if _present else "expanded",
)

state.load()
HERE = Path(__file__).resolve().parent
PAGES = [
    st.Page(HERE / "pages" / "explorer.py", title="Explorer", icon="🔍", default=True),
]
page = st.navigation(PAGES)
state.sidebar()
state.write_url(state.current())
page.run()
