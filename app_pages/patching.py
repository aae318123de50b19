"""Patching: which heads cause the answer. Two prompts that differ in a token or two, an answer,
every head patched from the clean run into the corrupted one (the entry "patching" of the table
of views, drawn by ui.rendering), on the compute workers with a progress bar."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views import patching as P
from ui import compute, rendering, session, widgets
from ui.controls import control, row

s = session.current()
NOTE = _(
    "Activation patching (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024): run the model on a clean "
    "prompt and on a corrupted one that differs in a token or two, then put one head's output from the clean run into "
    "the corrupted one and measure how much of the clean answer comes back.")
# On a projector the chart is the first screen: the prompts, the answer, the head chosen (a click on the chart
# chooses it) and the notes fold away above it.
inputs = widgets.header_folding(_("Which heads cause the answer: activation patching"), NOTE,
                                _("Prompts, answer, and what this page shows"))
with inputs:
    s = widgets.prompt_pair("patching", P.example_for)


def _picked(source: str, target: str) -> None:
    value = st.session_state.get(source)
    if value:
        st.session_state[target] = value


choosers = row(inputs)
for prompt, source, target, label in ((s.pair.clean, "answer_pick", "answer", _("…or pick the answer")),
                                      (s.pair.corrupted, "wrong_pick", "wrong", _("…or pick the wrong token"))):
    top = compute.guard(lambda prompt=prompt: compute.cached(("patch-top", *P.model_identity(s.model), prompt),
                                                             lambda: P.top_next(s.model, prompt)))
    choosers.selectbox(label, [t for t, _p in top], index=None, key=source, on_change=_picked, args=(source, target),
                        format_func=lambda t, top=dict(top): f"{t}  ({top[t]:.3f})",
                        help=_("The most likely next tokens after that prompt, with their probabilities."))
# (a pick sets the answer before this run: ``s`` is the pair read above, or the model's example where it cannot be)

job = compute.guard(lambda: P.sweep_job(s, compute.on_worker))  # the server may be busy: it says so
sweep = widgets.job_value(
    job, _("Patching every head and every position: {p:.0%}").format(p=job.fraction),
    _("It runs once for this server and is shared by everyone who opens the same model and prompts."))
control("patched", inputs if s.present else None)
rendering.render("patching", sweep, s, run_key=P.sweep_key(s))
