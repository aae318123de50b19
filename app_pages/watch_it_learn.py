"""Watch it learn: a two-layer attention-only model forms an induction head in seconds."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views import learn as V
from attnviz.views.markdown import md
from attnviz.views.roles import roles_legend
from attnviz.views.roles import thresholds as roles_thresholds
from attnviz.views.selection import first_chart_style, style_for
from ui import compute, picks, session, widgets
from ui.controls import control

s = session.current()
NOTE = _("An attention-only transformer (embeddings, causal attention layers, no MLP) learns to continue "
         "random tokens in which a block repeats. With two layers it forms an induction head — \"I saw this "
         "token before: predict what followed it\" — suddenly, at a phase change in the loss (Olsson et al., "
         "2022). One layer cannot. Training runs in a worker process shared by everyone who opens the same "
         "settings.")
# On a projector the training's settings (chosen before the class) fold under the title with the notes, and the
# replay's note goes under the loss: Train, Stop, the progress and the loss whole on the first screen.
about = widgets.header_folding(_("Watch it learn"), NOTE, _("The training's settings, and what this page shows"))
cols = about.columns(4)
for col, name in zip(cols, ("learn_layers", "learn_heads", "learn_width", "learn_task"), strict=True):
    control(name, col)
cols = about.columns(4)
for col, name in zip(cols[:3], ("learn_steps", "learn_lr", "learn_seed"), strict=True):
    control(name, col, **({"format": "%.4f", "step": 1e-3} if name == "learn_lr" else {}))
with cols[3]:
    control("control")
s = session.current()
settings = compute.guard(lambda: s.learn.validate() or s.learn)
control_settings = V.control_of(settings) if s.watch.control else None
keys = [V.key_of(settings)] + ([V.key_of(control_settings)] if control_settings else [])

b1, b2, _spacer = st.columns([1, 1, 4])
if b1.button(_("Train"), icon=":material/play_arrow:", type="primary", key="learn_train",
             help=_("Runs this training live. A training that already ran (the replay) runs again from step 0: "
                    "the same numbers, since it is seeded.")):
    compute.guard(lambda: [V.TRAININGS.start(x, again=True) for x in (settings, control_settings) if x is not None])
if b2.button(_("Stop"), icon=":material/stop:", key="learn_stop"):
    for k in keys:
        V.TRAININGS.stop(k)

defaults = V.default_trainings()
if (settings, control_settings) == defaults and V.TRAININGS.progress(keys[0]).status == "not started":
    V.start_defaults(V.TRAININGS)  # the launcher starts these at server start; a server started otherwise, here
progress = V.TRAININGS.progress(keys[0])
running = not progress.done and progress.status == "running"


@st.fragment(run_every=1.0 if running else None)
def live() -> None:
    """Redrawn every second while the training runs: reads the checkpoints the worker wrote."""
    p = V.TRAININGS.progress(keys[0])
    pc = V.TRAININGS.progress(keys[1]) if len(keys) > 1 else None
    if not p.checkpoints:
        if p.status == "not started":
            st.info(_("Press Train to start. Everyone who opens this link watches the same training."),
                    icon=":material/school:")
        else:  # the worker loads PyTorch for a few seconds before its first checkpoint: say so at once
            st.progress(0.0, text=_("step 0 of {steps} · starting the worker (it loads PyTorch: a few "
                                    "seconds)…").format(steps=settings.steps))
        return
    last = p.checkpoints[-1]
    said = (_(":material/replay: **A replay** of exactly this training, which ran on this server: drag the "
              "checkpoint slider (or Play) to walk through it, or press Train to watch it run again live.") if p.done
            else _(":material/play_circle: **Live:** training now; the charts are redrawn every second."))
    if not s.present:
        st.caption(said)
    st.progress(min(1.0, last["step"] / settings.steps),
                text=_("step {step} of {steps} · {t} s · {status}").format(step=last["step"], steps=settings.steps,
                                                                          t=f"{last['seconds']:.1f}", status=p.status))
    if p.status.startswith(("diverged", "failed")):
        st.error(_("The training stopped: {status}. Nothing after that is drawn.").format(status=p.status),
                 icon=":material/error:")
    n = len(p.checkpoints)
    first = first_chart_style(s, 40)  # the loss, whole on a projector
    fig = compute.cached_figure(("learn-loss", keys[0], n, len(pc.checkpoints) if pc else 0, compute.style_key(first)),
                                lambda: V.loss_figure(p.checkpoints, pc.checkpoints if pc else None, first))
    compute.chart(fig, key="learn_loss", filename="attnviz-learn-loss")
    if s.present:
        st.caption(said)
    style = style_for(s)
    score_cols = widgets.chart_columns(3)
    for col, score in zip(score_cols, V.CHECKPOINT_SCORES, strict=True):
        with col:
            compute.chart(compute.cached_figure(("learn-score", keys[0], n, score, compute.style_key(style)),
                                         lambda score=score: V.scores_figure(p.checkpoints, score, style)),
                          key=f"learn_{score}", filename=f"attnviz-learn-{score}")
    change = V.phase_change(p.checkpoints)
    st.caption(V.summary(p.checkpoints, pc.checkpoints if pc else None, change, settings.layers))
    # The checkpoint to show: the latest while it runs, or the one chosen (play walks through them).
    if st.session_state.get("_learn_play"):
        st.session_state["checkpoint"] = (int(st.session_state.get("checkpoint", -1)) + 1) % n
    at = int(st.session_state.get("checkpoint", -1))
    st.session_state["checkpoint"] = -1 if at >= n else at
    c1, c2 = st.columns([4, 1])
    shown = int(st.session_state["checkpoint"])
    control("checkpoint", c1, kind="slider", bounds=(-1, max(0, n - 1)), label=_("Checkpoint ({which})").format(
        which=_("−1: the last, step {step}").format(step=p.checkpoints[-1]["step"]) if shown < 0 else
        _("step {step}").format(step=p.checkpoints[shown]["step"])))
    c2.toggle(_("Play"), key="_learn_play", help=_("Step through the checkpoints, one a second."))
    chosen = p.checkpoints[int(st.session_state["checkpoint"])]
    roles = V.roles_at(chosen)
    compute.chart(compute.cached_figure(("learn-heads", keys[0], chosen["step"], compute.style_key(style)),
                                 lambda: V.heads_figure(chosen, p.record["probe"]["tokens"] if p.record else
                                                        V.probe_tokens(settings), style, roles=roles)),
                  key="learn_probe", filename="attnviz-learn-heads")
    st.caption((_("Each head is titled with its role at this checkpoint, where its mean weight on the roles probe "
                  "passes the threshold: {legend}.").format(legend=roles_legend()) if roles is not None else
                _("This training was recorded before roles were: its heads are not titled with roles here (the "
                  "trained model's are, below).")) + " " +
               _("The roles probe is BOS, then {n} random tokens (seed {seed}) repeated once; the figure draws the "
                 "task's probe sequence.").format(n=V.PROBE_LENGTH, seed=V.PROBE_SEED))
    if not p.done and not running:
        st.rerun()  # the training started in this rerun: poll from the next one
    if p.done and running:
        st.rerun()  # it just finished: one full run draws the trained model's part


live()

if progress.done and V.TRAININGS.weights_file(keys[0]) is not None:
    st.subheader(_("The trained model"))
    model = compute.cached(("learn-model", keys[0]),
                           lambda: V.load_trained(settings, V.TRAININGS.weights_file(keys[0])), limited=False)
    control("sequence")
    ids = compute.guard(lambda: V.parse_sequence(session.current().watch.sequence, V.LENGTH))
    top, weights = V.predict(model, ids)
    c1, c2 = widgets.chart_columns([1, 3])
    c1.dataframe(pd.DataFrame({_("next token"): [t for t, _p in top], _("probability"): [p for _t, p in top]}),
                 hide_index=True, column_config={_("probability"): st.column_config.NumberColumn(format="%.3f")})
    scores = compute.cached(("learn-roles", keys[0]), lambda: V.tiny_model_scores(model), limited=False)
    roles = V.tiny_roles(scores)
    with c2:
        compute.chart(V.heads_figure({"step": progress.checkpoints[-1]["step"], "weights": weights.tolist()}, ids,
                                     style_for(s), title=_("every head on your sequence"), roles=roles),
                      key="learn_yours", filename="attnviz-learn-yours")
    st.subheader(_("Head roles"))
    st.caption(_("Every head's scores on the roles probe ({probe}), for the final model: its mean weight on the "
                 "previous token, the first token, itself, earlier copies of its token (duplicate_token) and the "
                 "token after an earlier copy (induction); entropy divided by ln of the visible keys. A role is named "
                 "where its score passes its threshold ({thresholds}); the heads above are titled with it. Sort by "
                 "any column; select a row to open that head: it is drawn on your sequence and knocked out.").format(
        probe=V.probe_words(V.VOCAB), thresholds=roles_thresholds()))
    table = pd.DataFrame(V.trained_roles_table(scores))
    picked = widgets.picked_head(table, "learn_roles")
    if picked:
        picks.pick({"knockout": f"{picked[1]}.{picked[2]}"}, ("learn-roles", picked[0]))
    options = ["none"] + [f"{layer}.{h}" for layer in range(settings.layers) for h in range(settings.heads)]
    if st.session_state.get("knockout") not in options:
        st.session_state["knockout"] = "none"
    knocked = control("knockout", options=options, format_func=lambda o, t=fixed(): t("none") if o == "none" else
                      f"L{o.split('.')[0]} H{o.split('.')[1]}")
    if knocked != "none":
        layer, head = map(int, knocked.split("."))
        k = compute.cached(("learn-knockout", keys[0], layer, head),
                           lambda: V.knocked_out_loss(model, settings, layer, head), limited=False)
        st.markdown(_("Without head L{layer} H{head} the loss on the repeat goes from {a} to {b}, elsewhere from {c} "
                      "to {d}.").format(layer=layer, head=head, a=f"{k['loss_repeat']:.2f}",
                                        b=f"{k['knocked_repeat']:.2f}", c=f"{k['loss_other']:.2f}",
                                        d=f"{k['knocked_other']:.2f}"))
        compute.chart(V.opened_head_figure(weights.tolist(), ids, layer, head, roles[layer, head], style_for(s)),
                      key="learn_head", filename=f"attnviz-learn-L{layer}H{head}")
    st.caption(_("Best prefix-matching score in the last layer: {pm}; best previous-token score in layer 0: "
                 "{pt}.").format(
        pm=f"{V.best(progress.checkpoints[-1], 'prefix_matching', settings.layers - 1):.2f}",
        pt=f"{V.best(progress.checkpoints[-1], 'previous_token', 0):.2f}"))

    st.subheader(_("Which heads carry the repeat"))
    if settings.task != "induction":
        st.caption(_("This part patches the induction task's repeat: choose the induction task to see it."))
    else:
        pc = V.TRAININGS.progress(keys[1]) if len(keys) > 1 else None
        control_file = V.TRAININGS.weights_file(keys[1]) if pc is not None and pc.done else None
        control_model = None if control_file is None else compute.cached(
            ("learn-model", keys[1]), lambda: V.load_trained(control_settings, control_file), limited=False)
        trained = (keys[0], keys[1] if control_model is not None else None)  # the trainings patched: runs kept by them
        carry = compute.cached(("learn-carry", *trained), lambda: V.carry_repeat(model, control_model, trained),
                               limited=False)
        st.caption(_("Activation patching: the model runs on a repeat ({clean}) and on the same tokens with the "
                     "earlier copy of 8 followed by 28 instead of 12 ({corrupted}); each head's output is then "
                     "taken from the first run into the second, alone. A cell is the share of the logit difference "
                     "(12 against 28) that it brings back: (patched − corrupted) / (clean − corrupted), of the "
                     "two-layer model.").format(clean=V.REPEAT["clean"], corrupted=V.REPEAT["corrupted"]))
        cols = widgets.chart_columns(2 if control_model is not None else 1)
        for col, name in zip(cols, ("model", "control"), strict=False):
            with col:
                compute.chart(compute.cached_figure(("learn-carry", keys[0], name, compute.style_key(style_for(s))),
                                                    lambda name=name: V.carry_figure(carry, name, style_for(s))),
                              key=f"learn_carry_{name}", filename=f"attnviz-learn-carry-{name}")
        st.markdown(V.carry_summary(carry))
        st.caption(_("The Patching page patches this model (watch-it-learn, for the default settings) on any two "
                     "prompts."))

        st.subheader(_("The circuit, found by the numbers"))
        found = compute.cached(("learn-circuit", *trained),
                               lambda: V.learned_circuit(model, control_model, trained))  # on a compute worker
        pair = found["model"]
        st.caption(_("Every head patched, then every path from an earlier head into a later one through its queries, "
                     "keys or values (path patching), on the repeat ({clean}) against the earlier {a} replaced "
                     "({corrupted}); answer {answer} against {wrong}.").format(
            clean=pair.clean, corrupted=pair.corrupted, a=pair.clean.split()[-1], answer=pair.answer,
            wrong=pair.wrong))
        st.markdown(md(pair.message))
        if pair.receiver is not None:
            compute.chart(compute.cached_figure(("learn-circuit", keys[0], compute.style_key(style_for(s))),
                                                lambda: V.circuit_figure_of(pair, style_for(s))),
                          key="learn_circuit", filename="attnviz-learn-circuit")
            edges = compute.cached(("learn-edges", *trained), lambda: V.learned_edges(model, pair, trained[0]))
            st.markdown(md(V.edges_summary(edges)))
        if "control" in found:
            st.markdown(md(_("The one-layer control: {message}").format(message=found["control"].message)))
        st.caption(_("The Circuit page opens any path and any cell of this model (watch-it-learn, for the default "
                     "settings)."))
