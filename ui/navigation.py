"""The app's ``st.Page`` objects: one per page of ``attnviz.views.catalogue``, the
explorer first.

``st.Page`` resolves its script's path on the file system each time it is made (a
``realpath`` and a ``stat`` per page, thirteen pages, every rerun of every session). The
pages are made once per language and each run gets its own shallow copies: a page
carries per-run state (whether ``st.navigation`` picked it), so runs never share one.

The scripts live in app_pages/, not pages/: a folder named pages/ beside app.py makes
Streamlit route a process's first run through its legacy folder router, which shows
"Page not found" for /step-by-step and runs /gradients without app.py (a workaround of
streamlit/streamlit#8860, still so in 1.67.0; see PagesManager.uses_pages_directory).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import streamlit as st

from attnviz.i18n import _, language
from attnviz.views.catalogue import PAGES, menus

SCRIPTS = Path(__file__).resolve().parent.parent / "app_pages"
_MADE: dict[str, dict[str, st.Page]] = {}
_LOCK = threading.Lock()


def _make() -> dict[str, st.Page]:
    return {p.name: st.Page(SCRIPTS / p.script, title=_(p.title), icon=f":material/{p.icon}:",
                            **({"default": True} if not p.path else {"url_path": p.path})) for p in PAGES}


def sections(pages: dict[str, st.Page]) -> dict[str, list[st.Page]]:
    """{menu title: its pages}, for ``st.navigation(..., position="top")`` (``catalogue.menus``)."""
    return {_(title): [pages[name] for name in names] for title, names in menus()}


def app_pages() -> dict[str, st.Page]:
    """{registry name: this run's own st.Page}, titled in the session's language."""
    lang = language()
    with _LOCK:
        made = _MADE.get(lang)
        if made is None:
            made = _MADE[lang] = _make()
    return {name: copy.copy(page) for name, page in made.items()}
