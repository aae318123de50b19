"""attnviz — see multi-head attention work. Entry point: `streamlit run app.py`."""

from pathlib import Path

import streamlit as st

from attnviz.views.catalogue import PAGES
from ui import admission, session
from ui.navigation import app_pages, sections
from ui.sidebar import sidebar

_present = st.query_params.get("present", "0") in ("1", "true") or bool(st.session_state.get("present"))
st.set_page_config(
    page_title="attnviz",
    page_icon=str(Path(__file__).parent / "ui" / "favicon.png"),  # a ":material/…:" icon is fetched from Google
    layout="wide",
    initial_sidebar_state="collapsed" if _present else "expanded",
)

# Runs take turns (a class joining at once is served in order; see ui/admission.py).
with admission.page_run():
    session.restore()
    pages = app_pages()
    # Menus across the top: the sidebar holds only the controls the page reads, the text box first.
    current = st.navigation(sections(pages), position="top")
    page = next(p for p in PAGES if pages[p.name] is current or pages[p.name].url_path == current.url_path)
    session.keep(page.name)
    sidebar(page)
    session.write_url(session.current(), page.name)
    session.show_url_warnings(page.name)
    session.presenter_hint()
    current.run()
