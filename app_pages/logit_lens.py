"""Logit lens: what each point of a causal LM's residual stream would predict if the model stopped there. The
sidebar's sentence read at every point (``attnviz.views.lens``): the grid of points × positions, each cell its
top token coloured by its probability (or the entropy, or the KL to the model's own); the answer's probability
and rank through the points; a click on a cell opens its step, in final-scale form the parts added between two
points as bars that sum to it. The lens is the logit lens in either form, a tuned lens folder the server
offers, or one trained here as a background job."""

from dataclasses import replace

import streamlit as st

from attnviz.i18n import _, language
from attnviz.views import lens as L
from attnviz.views import lenswarm as LW
from attnviz.views.markdown import md
from attnviz.views.selection import style_for
from ui import compute, loading, picks, session, widgets
from ui.controls import control, label_of, row

s = session.current()
widgets.header(_("What each layer would predict: the logit lens"), "" if s.present else _(
    "Every point of the residual stream (the embeddings, each layer's middle and end) read through the model's own "
    "final norm and unembedding, as if the model stopped there (nostalgebraist 2020; the tuned lens: Belrose et al. "
    "2023). The sentence is the sidebar's; the model SmolLM2-135M, a causal language model folder or GGUF file, or "
    "the tiny model Watch it learn trains."))
loading.ready(s.model)  # a folder loads, the trained model trains, in the background
example = compute.guard(lambda: L.lens_example(s))
if example and example["text"] != s.text:  # the model's own example where the text is the default (the sidebar
    picks.pick(example, ("lens-example", s.model))  # drew the text already: set before the next run draws it)

# On a projector the grid is the first screen: the answer, the lens and the definitions fold away above it.
inputs = st.expander(_("Answer, lens and definitions")) if s.present else st.container()
with inputs:
    pair = row()
    control("lens_answer", pair, placeholder=_("the model's own top token"))
    control("lens_wrong", pair)
    settings = row()
    control("lens_tuned", settings, format_func=lambda v: {L.NO_LENS: _("none (the logit lens)"),
                                                             L.TRAINED_HERE: _("trained here")}.get(v, v))
    tuned = st.session_state.get("lens_tuned") != L.NO_LENS
    control("lens_mode", settings, kind="segmented", disabled=tuned)
    control("lens_colour", settings, kind="segmented")
    control("lens_mid", settings, disabled=tuned)
    if st.session_state.get("lens_tuned") == L.TRAINED_HERE:
        control("lens_steps", width=220)
    if tuned:
        st.caption(_("A tuned lens reads per-layer and has no translator for a layer's middle."))
with inputs if s.present else st.expander(_("Definitions: the two forms, the tuned lens, the colours, the rank "
                                             "and a step")):
    for name, words in L.DEFINITIONS.items():
        st.markdown(f"**{_(L.DEFINITION_NAMES[name])}**")
        st.latex(L.FORMULAS[name])
        st.caption(_(words))

s = session.current()
settings, style = s.lens, style_for(s)
text = L.sentence_of(s)
lens = None
if settings.tuned == L.TRAINED_HERE:
    job = compute.guard(lambda: L.training_job(s.model, settings.steps))
    lens = widgets.job_value(job, _("Training a tuned lens for {model}: {p:.0%}").format(model=s.model, p=job.fraction),
                             _("It trains once for this server and is shared by everyone who asks for the same model "
                               "and steps."))
elif settings.tuned != L.NO_LENS:
    lens = compute.guard(lambda: L.folder_lens(s.model, settings.tuned))


def _reading(settings):
    return compute.cached(L.reading_key(s.model, text, settings), lambda: L.lens_reading(s.model, text, settings, lens))


reading = None
if settings.answer or settings.wrong:  # one the model cannot read: its own top token, the field as typed
    try:
        reading = _reading(settings)
    except ValueError as e:
        st.warning(_("{setting}: {why} Showing the model's own top token instead; mend it in its field.").format(
            setting=label_of("lens_answer"), why=md(str(e))), icon=":material/warning:")
        settings = replace(settings, answer="", wrong="")
if reading is None:
    reading = compute.guard(lambda: _reading(settings))
key = L.reading_key(s.model, text, settings)
r = reading.result

try:
    cell, problem = L.opened_cell(reading, settings), None
except ValueError as e:
    cell, problem = None, str(e)
grid = compute.guard(lambda: compute.cached_figure(
    (*key, "grid", settings.colour, cell, compute.style_key(style)),
    lambda: L.lens_grid_figure(reading, settings, style, cell)))
for point in compute.clicked_points(grid, key="lens_grid", filename="logit-lens"):
    picked = L.clicked_grid_cell(point, len(r.positions))
    if picked is not None and L.cell_name(reading, picked) != settings.cell:
        picks.pick({"lens_cell": L.cell_name(reading, picked)}, ("lens_cell", L.cell_name(reading, picked)))
arrived = L.arrival_words(r)  # where the answer arrives, said in words
if arrived is not None:
    st.caption(md(arrived))
for line in r.notes:  # a tuned lens's: the middles left out, another unembedding
    st.caption(md(line))
if lens is not None and lens.fit:
    st.caption(L.fit_words(lens))
if problem is not None:
    control("lens_cell")
    st.error(md(problem), icon=":material/error:")
    st.stop()
answer = _("“{answer}” (the model's own top token at the last position)") if not reading.chosen else "“{answer}”"
if not s.present:
    st.caption(_("Rows: the points, from the embeddings down to the last layer's end (the model's own prediction); "
                 "columns: the positions, as patch_heads counts them. A click on a cell opens its step below. "
                 "Answer: {answer}.").format(answer=md(answer.format(answer=r.answer))))

# One under another, each the page's width: side by side, half a laptop's width cut their titles.
chart = compute.guard(lambda: compute.cached_figure(
    (*key, "answer", cell, compute.style_key(style)), lambda: L.answer_figure(reading, cell, style)))
compute.chart(chart, key="lens_answer_chart", filename="logit-lens-answer")
control("lens_cell", placeholder=L.cell_name(reading, cell))  # empty, it shows the cell opened
note = L.additive_note(reading)
if note is not None:
    st.info(md(note), icon=":material/functions:")
else:
    step = compute.guard(lambda: compute.cached((*key, "step", cell), lambda: L.step_of(s.model, reading, cell)))
    bars = compute.guard(lambda: compute.cached_figure((*key, "step-figure", cell, compute.style_key(style)),
                                                       lambda: L.lens_step_figure(step, style)))
    compute.chart(bars, key="lens_step", filename=f"logit-lens-step-{L.cell_name(reading, cell)}")
# The class's other forms and cells, made ahead once this visitor's page is whole (started earlier, they took the
# cores from its own step).
LW.warm_job(s.model, text, settings, compute.keeper(), language())
