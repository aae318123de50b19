"""A model loads in a background thread, never in a page's own run: the first visitor who
picks it (and everyone who picks it meanwhile) sees one shared progress bar, polled by a
fragment, and the page reruns when the model is ready."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import _
from attnviz.models.base import ModelError
from attnviz.models.random import RANDOM
from attnviz.models.registry import load_in_background

POLL_S = 0.5


def ready(model: str) -> None:
    """Return once ``model`` is loaded. Until then, show its progress and stop this run;
    a failed load is shown as its message."""
    if model == RANDOM:
        return
    try:
        status = load_in_background(model)
    except ModelError as e:
        st.error(str(e), icon=":material/error:")
        st.stop()
    if status is None:
        return
    if status.done.wait(0.05) and not status.error:  # a small model: no flash of a progress bar
        return
    if status.error:
        st.error(status.error, icon=":material/error:")
        st.stop()
    st.progress(status.fraction, text=_("Loading {model}: {what}…").format(model=model, what=_(status.words)))
    st.caption(_("It is loaded once for this server and shared by every session."))
    _poll(model, status.words)
    st.stop()


@st.fragment(run_every=POLL_S)
def _poll(model: str, phase: str) -> None:
    """Rerun the page when the load moves on (a new phase, ready or failed)."""
    status = load_in_background(model)
    if status is None or status.done.is_set() or status.words != phase:
        st.rerun()
