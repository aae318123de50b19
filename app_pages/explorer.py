"""The explorer: one run of multi-head attention seen several ways."""

import pandas as pd
import streamlit as st

from attnviz.analysis.roles import PROBE_LENGTH, PROBE_SEED
from attnviz.i18n import _, fixed
from attnviz.plots import REGION
from attnviz.views import generation as G
from attnviz.views.explorer import (
    flow_problem,
    head_table,
    is_long,
    next_tokens,
    output_table,
    pooled_note,
    probe_text_of,
    region_figure,
    roles_table,
    view_description,
    view_figure,
    view_key,
    view_problem,
    weights_table,
)
from attnviz.views.neurons import neuron_caption
from attnviz.views.registry import VIEW_PICKS, VIEW_TITLES
from attnviz.views.roles import legend as roles_legend
from attnviz.views.roles import thresholds as roles_thresholds
from attnviz.views.selection import clamp_selection, file_stem, style_for
from ui import compute, heads, picks, session, widgets
from ui.controls import control
from ui.safe import md

s = session.current()
result = compute.run(s.config)
clamped, fixes = clamp_selection(result, s)
for k in ("head", "query"):  # drawn below, so still assignable; seq is kept valid by the sidebar
    if getattr(clamped, k) != getattr(s, k):
        st.session_state[k] = getattr(clamped, k)
s = clamped
for note in result.notes + fixes:
    st.info(note, icon=":material/info:")

L = result.weights.shape[2]
tokens = result.tokens[s.seq]
if not s.present:
    shapes = " → ".join(f"{name} {tuple(shape)}" for name, shape in result.shapes().items())
    ms = sum(result.timings_ms.values())
    widgets.header(_("Attention explorer"),
                   _("softmax(QKᵀ/√d_k + M)·V, per head — hover a cell for its query, key and weight."),
                   _("**Shapes** {shapes} · device **{device}** · {ms} ms").format(
                       shapes=shapes, device=result.device, ms=f"{ms:.1f}"),
                   _("Each chart's toolbar (camera icon) saves it as PNG. The address bar holds every setting: "
                     "copy it to share this exact view."))

control("view", kind="segmented", format_func=lambda v, t=fixed(): t(VIEW_TITLES[v]))
view = st.session_state.get("view") or "grid"
reads = VIEW_PICKS.get(view, ())  # only the head or query this view reads (the grid reads neither)
if reads:
    widgets.head_and_query(result, s.seq, with_head="head" in reads, with_query="query" in reads)
s = session.current()


def show(v: str) -> None:
    fig = compute.figure(view_key(s, v), lambda: view_figure(result, s, v),
                         alt=lambda f: view_description(result, s, v, f), plain=True)
    compute.chart(fig, key=f"chart_{v}", filename=file_stem(s, v, result))


long = is_long(result)
S = result.weights.shape[3]
if long:  # a link's corner may lie past this text's end: keep the inputs in range
    st.session_state["q0"] = min(int(st.session_state.get("q0", 0)), L - 1)
    st.session_state["k0"] = min(int(st.session_state.get("k0", 0)), S - 1)


def close_up() -> None:
    """A long text's exact numbers: a REGION × REGION window of the view above."""
    st.subheader(_("Close-up: exact weights"))
    st.caption(_("The picture above has one pixel per weight. Pick the top-left corner of a {n} × {n} window to read "
                 "its exact values (hover a cell).").format(n=REGION))
    c1, c2, _spacer = st.columns([1, 1, 2])
    control("q0", c1, bounds=(0, L - 1), step=16)
    control("k0", c2, bounds=(0, S - 1), step=16)
    now = session.current()
    compute.chart(compute.figure(view_key(now, "region"), lambda: region_figure(result, now)), key="chart_region",
                  filename=file_stem(now, "region", result))


if view == "grid" or not s.present:
    show("grid")
    note = pooled_note(result)
    if note:
        st.caption(note + " " + _("The 'One head' view shows every cell."))

if view not in ("model", "analysis"):
    picks.forget_pick()
if view == "mask":
    left, right = st.columns(2)
    with left:
        show("mask")
    with right:
        show("head")
    if result.fully_masked_rows(s.seq):
        st.info(_("Some query rows are fully masked: their weights and output are all zero, by definition."),
                icon=":material/info:")
elif view == "output" and result.width == 0:
    st.info(_("{model} gives its attention weights only: there are no output vectors to show.").format(
        model=result.model_name), icon=":material/info:")
elif view == "output":
    show("output")
    st.dataframe(pd.DataFrame(**output_table(result, s.seq)), height=260)
elif view == "table":
    table = weights_table(result, s, long)
    st.subheader(_("Weights of head {h}").format(h=s.head) + (
        _(", queries {q0}–{q1} × keys {k0}–{k1}").format(**table["window"]) if long else ""))
    if long:
        c1, c2, _spacer = st.columns([1, 1, 2])
        control("q0", c1, bounds=(0, L - 1), step=16)
        control("k0", c2, bounds=(0, S - 1), step=16)
    st.dataframe(pd.DataFrame(table["data"], index=table["index"], columns=table["columns"]),
                 height=min(600, 40 + 35 * min(L, REGION)))
elif view == "model":
    fig = compute.figure(view_key(s, "model"), lambda: view_figure(result, s, "model"))
    event = st.plotly_chart(fig, key="chart_model", theme=None, width="stretch", on_select="rerun",
                            selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
    st.caption(_("Each block is one layer × head. Click a block to open it in the 'One head' view.") + " " + _(
        "Roles, where a head's mean weight passes the threshold: {legend}; dup and induction on a repeated random "
        "probe (Head roles says which).").format(legend=roles_legend()))
    points = getattr(getattr(event, "selection", None), "points", None) or []
    if points:
        block = points[0].get("customdata")
        if isinstance(block, (int, float)) and block >= 0:
            H = result.heads
            picks.open_head(int(block) // H, int(block) % H, ("model", int(block)), layered=result.pretrained)
elif view == "analysis":
    st.caption(_("Every layer × head of this sentence, from its weights alone: row entropy (nats; low = focused), "
                 "mean attention distance (tokens), and how much weight goes to the previous token, the next, "
                 "itself, the first token ([CLS]) and [SEP]. Sort by any column; select a row to open that head."))
    table = pd.DataFrame(compute.cached(("head-table", result.config, s.seq), lambda: head_table(result, s.seq),
                                        limited=False))
    picked = widgets.picked_head(table, "head_table", ("layer", "head"))
    if picked:
        picks.open_head(picked[1], picked[2], ("table", picked[0]), layered=result.pretrained)
    show("analysis")
elif view == "roles":
    probe = probe_text_of(result)
    st.caption(_("Each head's scores on this sentence (mean weight on the previous token, the first token, itself; "
                 "entropy divided by ln of the visible keys). A role is named where its score passes its threshold "
                 "({thresholds}). Select a row to open that head.").format(
                     thresholds=roles_thresholds()) + " " + (
        _("Induction (weight on the token after an earlier copy) and duplicate-token (weight on earlier copies) "
          "cannot be read from your sentence: they are scored on a probe, {n} random words of the model's own "
          "vocabulary repeated once (seed {seed}): “{probe}”.").format(n=PROBE_LENGTH, seed=PROBE_SEED, probe=md(probe))
        if probe else _("Induction and duplicate-token need a probe of repeated random tokens, which this run cannot "
                        "be repeated on: they are not scored.")))
    # On a compute worker (up to ~2 s at 2048 tokens × 16 heads, and a probe run), once per link.
    table = pd.DataFrame(compute.cached(("roles-table", result.config, s.seq), lambda: roles_table(result, s.seq)))
    picked = widgets.picked_head(table, "roles_table")
    if picked:
        picks.open_head(picked[1], picked[2], ("roles", picked[0]), layered=result.pretrained)
elif view == "flow" and flow_problem(result, s.seq):
    st.info(flow_problem(result, s.seq), icon=":material/info:")
elif view in ("norms", "neurons") and view_problem(result, view):
    st.info(md(view_problem(result, view)), icon=":material/info:")
elif view == "norms":
    st.caption(_(heads.NORMS_CAPTION))
    show("norms")
    st.subheader(_(heads.KNOCKOUT_TITLE))
    st.caption(_("Each head's output is set to zero before W_O, one head at a time. The bars show how far the "
                 "layer's output moves: ‖output − output without the head‖ / ‖output‖, over this sentence's real "
                 "tokens. For a language model that predicts the next token, the model is rerun with the head "
                 "removed: the second chart shows the probability of its original top next token."))
    ko = heads.knockout_chart(result, s.seq, style_for(s), key=(result.config,), chart_key="chart_knockout",
                              filename=file_stem(s, "knockout", result))
    if ko.top_token is not None:
        st.dataframe(pd.DataFrame({_("head"): list(range(result.heads)),
                                   _("p(top token) without the head"): ko.top_p_without,
                                   _("top-10 overlap"): ko.overlap}), hide_index=True,
                     column_config={_("p(top token) without the head"): st.column_config.NumberColumn(format="%.3f")})
        st.caption(_("With every head, the top next token is “{token}” (p = {p}). The top-10 overlap counts how many "
                     "of the original ten most likely tokens stay in the ten.").format(
            token=md(ko.top_token), p=f"{ko.top_p:.3f}"))
elif view == "neurons":
    st.caption(neuron_caption(result))
    show("neurons")
elif view != "grid":
    show(view)
    if long and view in ("head", "mean"):
        close_up()

predicted = next_tokens(result, s.seq)
if predicted and not s.present:
    st.subheader(_("Next token"))
    st.caption(_("What {model} predicts after this sentence (its ten most likely next tokens).").format(
        model=result.model_name))
    st.dataframe(pd.DataFrame({_("next token"): [t for t, _p in predicted],
                               _("probability"): [p for _t, p in predicted]}), hide_index=True,
                 column_config={_("probability"): st.column_config.NumberColumn(format="%.3f")})
    st.subheader(_("Generate"))
    control("generate")
    s = session.current()
    gen = compute.guard(lambda: compute.cached(("generate", result.config, s.seq, s.generate),
                                               lambda: G.generation(result, s.seq, s.generate)))
    if gen is not None:
        if gen.count > 1:  # the step's bound comes from the run: how many tokens it wrote
            if not 0 <= st.session_state.get("step", 0) < gen.count:
                st.session_state["step"] = 0
            control("step", kind="slider", bounds=(0, gen.count - 1))
        s = session.current()
        step = min(s.step, gen.count - 1)
        st.caption(_("{model} wrote {n} tokens greedily (the most likely each time): **{text}**").format(
            model=result.model_name, n=gen.count, text=md(" ".join(gen.tokens[gen.context:]))))
        style = style_for(s)
        key = ("generate", result.config, s.seq, s.generate, result.layer, step, compute.style_key(style))
        compute.chart(compute.figure(("gen-step", *key), lambda: G.step_figure(gen, result.layer, step, style)),
                      key="gen_step", filename=file_stem(s, "generated-step", result))
        compute.chart(compute.figure(("gen-all", *key), lambda: G.overview_figure(gen, result.layer, step, style)),
                      key="gen_all", filename=file_stem(s, "generated", result))

if not s.present:
    widgets.run_downloads(result, key="dl", csv_name=file_stem(s, "weights", result) + ".csv",
                          json_name=file_stem(s, "run", result) + ".json")
