"""attnviz — see multi-head attention work. Entry point: `streamlit run app.py`."""

from pathlib import Path

import streamlit as st

from attnviz.i18n import _
from attnviz.views.registry import PAGES
from ui import session
from ui.sidebar import sidebar

_present = st.query_params.get("present", "0") in ("1", "true") or bool(st.session_state.get("present"))
st.set_page_config(
    page_title="attnviz",
    page_icon=":material/search:",
    layout="wide",
    initial_sidebar_state="collapsed" if _present else "expanded",
)

session.load()
HERE = Path(__file__).resolve().parent
# One st.Page per entry of the registry (attnviz.views.registry), the explorer first. The
# scripts live in app_pages/, not pages/: a folder named pages/ beside app.py makes
# Streamlit route a process's first run through its legacy folder router, which shows
# "Page not found" for /step-by-step and runs /gradients without app.py (a workaround of
# streamlit/streamlit#8860, still so in 1.67.0; see PagesManager.uses_pages_directory).
pages = {p.name: st.Page(HERE / "app_pages" / p.script, title=_(p.title), icon=f":material/{p.icon}:",
                         **({"default": True} if not p.path else {"url_path": p.path})) for p in PAGES}
current = st.navigation(list(pages.values()), expanded=True)  # every page listed, none behind "more"
page = next(p for p in PAGES if pages[p.name] is current or pages[p.name].url_path == current.url_path)
sidebar(page)
session.write_url(session.current())
session.show_url_warnings()
session.presenter_hint()
current.run()
