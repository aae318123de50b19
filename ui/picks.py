"""Clicks on a chart or a table row that set widgets (a head, a patch, a layer)."""

from __future__ import annotations

import streamlit as st

from attnviz.views.catalogue import HOME
from ui.navigation import app_pages

_PICKED = "_attnviz_picked"  # the pick already acted on (a selection persists across reruns)
_PENDING = "_attnviz_pending"  # widget values picked on a chart, applied at the next run's start
_TOASTS = "_attnviz_toasts"  # this run's toasts: a pick's rerun cuts the run short, and its toasts with it
_REPLAY = "_attnviz_replay"  # the toasts of a run a pick cut short, shown again as the next run starts


def toast(body: str, icon: str) -> None:
    """``st.toast``, kept until the run ends: a pick later in the same run (a page adopting its model's example)
    reruns the script, and the toast would go with the run it was shown in."""
    st.toast(body, icon=icon)
    st.session_state.setdefault(_TOASTS, []).append((body, icon))


def pick(values: dict, token: object) -> None:
    """Set widgets from a click. Those widgets are drawn already in this run, so the values
    are applied at the start of the next one (``apply_pending``); ``token`` names the pick,
    so a selection that persists across reruns acts once."""
    ss = st.session_state
    if ss.get(_PICKED) == token:
        return
    ss[_PICKED] = token
    ss.setdefault(_PENDING, {}).update(values)
    ss[_REPLAY] = ss.pop(_TOASTS, [])
    st.rerun()


def apply_pending() -> None:
    """At a run's start: the values picked in the run before, and the toasts of a run a pick cut short."""
    ss = st.session_state
    for key, value in ss.pop(_PENDING, {}).items():
        ss[key] = value
    ss.pop(_TOASTS, None)
    for body, icon in ss.pop(_REPLAY, []):
        toast(body, icon)


def forget_pick() -> None:
    st.session_state.pop(_PICKED, None)


OPEN = "_attnviz_open_point"  # a chart's point to open on another page, picked in the run before


def open_point(index: int, token: object) -> None:
    """A click on a point that opens another page: remembered now (the chart is drawn already),
    acted on at the next run's start by the page (``opened_point``)."""
    pick({OPEN: int(index)}, token)


def opened_point() -> int | None:
    """The point a click picked in the run before (once), or None."""
    value = st.session_state.pop(OPEN, None)
    return None if value is None else int(value)


def open_in_explorer(values: dict) -> None:
    """Open the explorer (the home page) with ``values`` (settings by link name), applied as its run starts:
    the link that page then writes is ``attnviz.settings.url``'s for those settings."""
    st.session_state.setdefault(_PENDING, {}).update(values)
    st.switch_page(app_pages()[HOME])
