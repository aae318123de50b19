"""Vision-language: where a vision-language model's text looks in its picture (``attnviz.views.visionlang``). It
opens on the tiny model that learns to look, trained in a worker process (the class watches its answers improve and
its look sharpen, checkpoint by checkpoint); a vision-language folder the server offers answers in a background job.
Then any text token's attention over the picture, a layer's heads, the layer × head map of the share on the
picture with its localization heads, visual sinks and the vision tower's own attention."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views import visionlang as V
from attnviz.views.markdown import md
from attnviz.views.selection import style_for
from ui import compute, loading, picks, session, widgets
from ui.controls import control, row

s = session.current()
widgets.header(_("Where it looks: vision-language"), _(
    "A picture's patches enter the language model as tokens, so every text token's attention has a row over "
    "them: drawn over the picture, it shows where the model looked as it read or answered. The model is the "
    "sidebar's: the tiny one that learns to look here, or a vision-language folder ({reads}); the question is the "
    "sidebar's text.").format(reads=V.READS))
loading.ready(s.model)  # a folder loads in the background (the tiny model trains below, in sight)
looking = V.is_looking(s.model)

# On a projector the picture and its overlay are the first screen: the choices fold away above them.
if s.present:
    where_picture = where_layer = where_sinks = st.expander(_("Picture, layer and sinks"))
else:
    where_picture, where_layer, where_sinks = st.columns([2, 3, 2], vertical_alignment="center")
uploaded = None
with where_picture:
    control("vl_picture", format_func=lambda v: _("your own (upload)") if v == V.UPLOAD else v)
    if not looking:
        control("vl_generate")
    if st.session_state.get("vl_picture") == V.UPLOAD:
        uploaded = widgets.uploaded_bytes(_("Your picture (PNG or JPEG)"), ["png", "jpg", "jpeg"], key="vl_upload",
                                          help=_("Not part of the link: a link opens the built-in picture."))
        st.caption(_("An uploaded picture cannot travel in a link: whoever opens this page's link sees the first "
                     "built-in picture."))
s = session.current()
example = compute.guard(lambda: V.example_text(s))
if example is not None:  # the built-in picture's own question, in the sidebar's box (drawn already: next run)
    picks.pick({"text": example}, ("vl-example", s.vl.picture))
if s.vl.picture == V.UPLOAD and uploaded is None:
    st.info(_("Upload a picture above to read it (or choose a built-in one)."), icon=":material/image:")
    st.stop()
picture = compute.guard(lambda: V.picture_for(s.model, s.vl, None if uploaded is None else uploaded[0]))
question = V.question_of(s)
style = style_for(s)



@st.fragment(run_every=2.0)
def _retry() -> None:
    """Every worker was training: try again in a moment."""
    if V.TRAININGS.free():
        st.rerun()


reading_area = st.container()
if looking:
    trainings = V.trainings_of(s)
    keys = [V.key_of(x) for x in trainings]
    if V.TRAININGS.progress(keys[0]).status == "not started":  # the first visitor starts it
        try:
            for x in trainings:
                V.TRAININGS.start(x)
        except ValueError as e:  # every worker trains already: it starts when one is free
            st.info(md(str(e)), icon=":material/hourglass_top:")
            _retry()
            st.stop()
    running = not V.TRAININGS.progress(keys[0]).done
    # While it learns, the training is the page's first part; once it has, the reading is, the training below it.
    training_area = st.container()
    if running:
        reading_area, training_area = training_area, reading_area

    @st.fragment(run_every=1.0 if running else None)
    def live() -> None:
        """Redrawn every second while the training runs: the checkpoints the worker wrote."""
        p = V.TRAININGS.progress(keys[0])
        pc = V.TRAININGS.progress(keys[1]) if len(keys) > 1 else None
        st.subheader(_("How it learns to look"))
        b1, b2, _spacer = st.columns([1, 1, 4])
        if b1.button(_("Train again"), icon=":material/play_arrow:", key="vl_train",
                     help=_("Runs this training again, live, from step 0: the same numbers, since it is seeded.")):
            compute.guard(lambda: [V.TRAININGS.start(x, again=True) for x in trainings])
            st.rerun()
        if b2.button(_("Stop"), icon=":material/stop:", key="vl_stop"):
            for k in keys:
                V.TRAININGS.stop(k)
        if not p.checkpoints:
            st.progress(0.0, text=_("step 0 of {steps} · starting the worker (it loads PyTorch: a few "
                                    "seconds)…").format(steps=s.look.steps))
            return
        last = p.checkpoints[-1]
        words = _("step {step} of {steps} · {t} s · {status} · correct answers {acc} · best head's look at the "
                  "shape {share}").format(step=last["step"], steps=s.look.steps, t=f"{last['seconds']:.1f}",
                                          status=p.status, acc=f"{last['accuracy']:.0%}",
                                          share=f"{last['best']['share']:.2f}")
        if p.done:
            st.caption(words)
        else:
            st.progress(min(1.0, last["step"] / s.look.steps), text=words)
        if p.status.startswith(("diverged", "failed")):
            st.error(_("The training stopped: {status}.").format(status=p.status), icon=":material/error:")
        n = len(p.checkpoints)
        fig = compute.cached_figure(("vl-training", keys[0], n, len(pc.checkpoints) if pc else 0,
                                     compute.style_key(style)),
                                    lambda: V.training_figure(p.checkpoints, pc.checkpoints if pc else None, style))
        compute.chart(fig, key="vl_training_chart", filename="vision-language-training")
        at = int(st.session_state.get("vl_checkpoint", -1))
        st.session_state["vl_checkpoint"] = -1 if at >= n else at
        control("vl_checkpoint", kind="slider", bounds=(-1, max(0, n - 1)))
        # A move of the slider reruns this fragment alone, not app.py, which writes the link: written here
        session.write_url(session.current(), "vision-language")
        chosen = p.checkpoints[int(st.session_state["vl_checkpoint"])]
        record = p.record or {"checkpoints": p.checkpoints, "probe": V.probe_record(s.look.seed)}
        fig = compute.cached_figure(("vl-probe", keys[0], n, chosen["step"], compute.style_key(style)),
                                    lambda: V.probe_figure(record, chosen, style))
        compute.chart(fig, key="vl_probe_chart", filename="vision-language-probe")
        if p.done and running:
            st.rerun()  # it just finished: one full run reads the trained model

    with training_area:
        trio = row()
        control("look_seed", trio)
        control("look_steps", trio)
        control("vl_control", trio)
        live()
    model = compute.cached(("vl-model", keys[0]), lambda: V.looking_model_of(s.look), limited=False)
    if model is None:
        reading_area.info(_("The model is learning: its reading of your picture comes at the training's last step."),
                          icon=":material/hourglass_top:")
        st.stop()
    key = V.vl_key(s.model, picture, question, s.vl, s.look)
    r = compute.guard(lambda: compute.cached(key, lambda: V.read_tiny(model, picture, question)))
else:
    key = compute.guard(lambda: V.vl_key(s.model, picture, question, s.vl, s.look))
    job = compute.guard(lambda: V.reading_job(s.model, picture, question, s.vl, key, compute.on_worker))
    r = widgets.job_value(job, _("{model}: {what} ({p:.0%})").format(model=s.model, what=_(job.words),
                                                                    p=job.fraction),
                          _("It runs once for this server and is shared by everyone who asks the same."))

with reading_area:
    asked = _("{question} → {answer}").format(question=question, answer=r.answer_text)
    if not s.present:  # (on a projector the token picker's label says it: one line less above the picture)
        st.markdown(f"**{md(question)}** → {md(r.answer_text)}")
    shown, warning = V.token_shown(r, int(st.session_state.get("token", -1)))
    if warning:
        st.warning(warning, icon=":material/warning:")
    st.session_state["token"] = shown  # the segmented control's options are the reading's tokens
    control("token", options=V.token_options(r), kind=V.token_picker(r, s.present),
            format_func=lambda i: r.tokens[i] or "␣", **({"label": asked} if s.present else {}))
    s = session.current()
    try:
        t, layer, head = V.opened(r, s.vl)
    except ValueError as e:
        st.error(md(str(e)), icon=":material/error:")
        st.stop()
    control("vl_layer", where_layer, kind="slider", bounds=(-1, r.layers - 1),
            label=_("Layer (−1: its first localization head's, {layer})").format(layer=layer))
    control("vl_sinks", where_sinks)
    base = (*key, t, layer, head, s.vl.sinks, compute.style_key(style))
    fig = compute.guard(lambda: compute.cached_figure((*base, "overlay"), lambda: V.look_overlay(r, picture, s.vl,
                                                                                                     style)))
    compute.chart(fig, key="vl_overlay", filename=f"vision-language-token-{t}")
    st.caption(md(V.vl_definition("overlay")) + " " + md(V.sinks_words(r, layer)) + " " + md(V.vl_definition("sinks")))
    share = compute.cached_figure((*base, "share"), lambda: V.share_figure(r, s.vl, style))
    points = compute.clicked_points(share, key="vl_share", filename="vision-language-share")
    st.caption(md(V.vl_definition("share")) + " " + md(V.vl_definition("localization")) + " " +
               _("A click on a head opens its overlay."))
    for point in points:
        picked = V.clicked_grid_cell(point, r.heads)
        if picked is not None and picked != (layer, head):
            picks.pick({"vl_layer": picked[0], "vl_head": picked[1]}, ("vl_share", picked))
    if head is not None:
        fig = compute.cached_figure((*base, "head"), lambda: V.opened_head_overlay(r, picture, s.vl, style))
        compute.chart(fig, key="vl_head_chart", filename=f"vision-language-head-{layer}-{head}")
        if st.button(_("Close head L{layer} H{head}").format(layer=layer, head=head), key="vl_close"):
            picks.pick({"vl_head": -1}, ("vl_close", layer, head))
    tower = V.tower_figure(r, picture, style)
    if tower is not None:
        compute.chart(compute.cached_figure((*key, "tower", compute.style_key(style)), lambda: tower),
                      key="vl_tower", filename="vision-language-tower")
        st.caption(md(V.vl_definition("tower")))
    else:
        st.caption(md(V.tower_words(r)))
