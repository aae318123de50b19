"""Mask lab: masks side by side, what they change, and fully masked rows."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _, fixed
from attnviz.views.markdown import md
from attnviz.views.masklab import MASK_CHOICES, STAGE_NAMES, blocked_rows, mask_kinds, mask_lab_figure
from attnviz.views.selection import first_chart_style
from ui import compute, session, widgets
from ui.controls import MASK_NAMES, control, row

s = session.current()
NOTE = _("Every mask adds 0 where a query may look and −∞ where it may not; softmax turns −∞ into exactly 0. "
         "Every mask but 'none' also blocks [PAD] keys.")
# On a projector the masks to compare (chosen before the class) fold under the title with the note, and the head
# and the picture shown share a row: the first mask's picture whole on the first screen.
where = widgets.header_folding(_("Mask lab"), NOTE, _("Masks to compare, and what this page shows"))
if isinstance(st.session_state.get("masks"), str):  # URL form "a,b" -> the multiselect's list
    st.session_state["masks"] = mask_kinds(session.current())
kinds = control("masks", where, kind="multiselect", options=MASK_CHOICES,
                format_func=lambda k, t=fixed(): t(MASK_NAMES[k]))
if not kinds:
    st.info(_("Choose at least one mask to compare."), icon=":material/info:")
    st.stop()
if s.model != "random":
    st.info(_("The mask lab runs on the random model: a pretrained encoder was trained without these masks, so "
              "swapping them in would not show what it learned."), icon=":material/info:")
    s = s.with_(model="random", layer=0)
base = compute.result(s.config)
compute.guard(base.require_complete)
seq = min(s.seq, len(base.tokens) - 1)
controls = row() if s.present else None
head, _query = widgets.head_and_query(base, seq, with_query=False, into=controls)
stage = (control("stage", controls, kind="segmented", format_func=lambda k, t=fixed(): t(STAGE_NAMES[k]))
         if s.present else None)
s = session.current().with_(model="random", layer=0)
style = first_chart_style(s)


def chart(name: str, kind: str, build) -> None:
    key = ("mask-lab", name, s.config.with_(mask=kind), seq, head, compute.style_key(style))
    compute.chart(compute.cached_figure(key, build), key=f"{name}_{kind}", filename=f"attnviz-masklab-{kind}-{name}")


def draw(kind: str) -> None:
    r = compute.result(s.config.with_(mask=kind))
    compute.guard(r.require_complete)
    st.subheader(_("mask = {kind}").format(kind=_(MASK_NAMES[kind])))
    toks, keys = r.tokens[seq], r.source_tokens[seq]
    # Two figures per row: wide enough for a label on every token of the default sentence. On a projector
    # one picture a screen, the one chosen above (in the page itself: no container per chart).
    if s.present:
        chart(stage, kind, lambda: mask_lab_figure(r, stage, seq, head, style))
    for pair in () if s.present else (("mask", "before"), ("after", "weights")):
        for column, part in zip(st.columns(2), pair, strict=True):
            with column:
                chart(part, kind, lambda part=part: mask_lab_figure(r, part, seq, head, style))
    full = [f"{i}: {toks[i]}" for i in r.fully_masked_rows(seq)]
    st.caption(_("{blocked} of {total} query–key pairs blocked: they are the dark cells of the mask and the blank "
                 "cells after masking (changed to −∞), and their weights are exactly 0.").format(
        blocked=r.blocked(seq), total=len(toks) * len(keys)))
    if full:
        st.warning(_("Fully masked rows — these queries may see no key at all: {rows}. softmax of a row of −∞ is "
                     "0/0 = NaN; attnviz defines such a row as all-zero weights and a zero output.").format(
            rows=md(", ".join(full))), icon=":material/block:")


for kind in kinds:
    draw(kind)

st.subheader(_("Why a large negative number stands in for −∞"))
demo = blocked_rows()
st.markdown(_(
    "For a row where **some** keys are blocked, −∞ and −1e9 give the same weights: exp(−1e9) underflows to "
    "exactly 0. For a row where **every** key is blocked they differ, and both are wrong: −∞ gives NaN "
    "(0/0), which then poisons every number it touches, and −1e9 silently spreads the weight evenly over "
    "keys that should be invisible. attnviz uses −∞ and defines such a row as zeros (the last column is "
    "computed by attnviz's own attention)."))
as_text = lambda xs: ["NaN" if x != x else f"{x:.4g}" for x in xs]  # noqa: E731 - NaN is the point here
st.dataframe(pd.DataFrame({_("score"): demo["scores"], _("softmax with −∞ everywhere"): as_text(demo["-inf"]),
                           _("softmax with −1e9 everywhere"): demo["-1e9"], "attnviz": demo["attnviz"]}),
             hide_index=True)
