"""A model loads in a background thread, never in a page's own run: the first visitor who
picks it (and everyone who picks it meanwhile) sees one shared progress bar, polled by a
fragment, and the page reruns when the model is ready."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import _
from attnviz.jobs import Busy
from attnviz.learn.train import LearnSettings, start_defaults
from attnviz.learn.worker import TRAININGS, key_of
from attnviz.models.base import ModelError
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model

POLL_S = 0.5


def ready(model: str) -> None:
    """Return once ``model`` is loaded. Until then, show its progress and stop this run;
    a failed load is shown as its message."""
    handle = open_model(model)
    if handle.problem:  # a name that opens nothing (a folder gone, a GGUF file cut short): its one sentence
        st.error(handle.problem, icon=":material/error:")
        st.stop()
    if not handle.can(Cap.LOADS):  # the random layer; a model trained here; a vision-language model (its page's job)
        if handle.can(Cap.TRAINED_HERE, Cap.UNEMBEDDING):  # the model Watch it learn's launcher trains
            trained_ready(model)
        return
    try:
        status = handle.load_in_background()
    except (ModelError, Busy) as e:  # a model that cannot load, or a server loading as many as it takes
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
    status = open_model(model).load_in_background()
    if status is None or status.done.is_set() or status.words != phase:
        st.rerun()


def trained_ready(model: str) -> None:
    """Return once the model Watch it learn's default training trains is on disk (the server's
    launcher trains it at start). Until then start that training in its worker, where no one has,
    show its progress and stop this run."""
    settings = LearnSettings()
    key = key_of(settings)
    if TRAININGS.weights_file(key) is not None:
        return
    start_defaults(TRAININGS)
    p = TRAININGS.progress(key)
    if p.done:  # a failed or stopped training leaves no weights
        st.error(_("The training of {model} stopped: {status}.").format(model=model, status=p.status),
                 icon=":material/error:")
        st.stop()
    step = p.checkpoints[-1]["step"] if p.checkpoints else 0
    st.progress(min(1.0, step / settings.steps), text=_("Training {model}: step {step} of {steps}…").format(
        model=model, step=step, steps=settings.steps))
    st.caption(_("It is trained once for this server and shared by every session."))
    _poll_training(key)
    st.stop()


@st.fragment(run_every=POLL_S)
def _poll_training(key: str) -> None:
    if TRAININGS.progress(key).done:
        st.rerun()
