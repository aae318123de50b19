"""Streamlit glue shared by the pages: URL state, the sidebar, cached compute.

The only place besides ``app.py`` and ``app_pages/`` that imports Streamlit.

May import: every floor of attnviz (it sits above them all), streamlit.
"""
