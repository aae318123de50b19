"""Why scale by √d_k: the spread of dot products and softmax saturation."""

import streamlit as st

from attnviz.analysis.scaling import sweep
from attnviz.i18n import _
from attnviz.plots import lines_figure
from attnviz.views.pages import scaling_figure
from attnviz.views.selection import style_for
from ui import compute, session
from ui.controls import control

s = session.current()
st.title(_("Why scale by √d_k"))
st.markdown(_(
    "For random q, k with unit-variance components, q·k is a sum of d_k products, so its variance is d_k: "
    "raw scores spread like √d_k. Fed to softmax, a wide spread makes one weight ≈ 1 and the rest ≈ 0 "
    "(saturation), where gradients vanish. Dividing by √d_k keeps the spread at 1 for every d_k."))
control("additive")
s = session.current()
res = sweep(seed=s.seed, additive=s.additive)
style = style_for(s)
compute.chart(scaling_figure(res, style), key="scale_std", filename="attnviz-why-scale-std")
# The same line in the same place of both charts' legends, so each keeps its colour across them.
ent = {"softmax(q·k)": res.entropy_raw, "softmax(q·k / √d_k)": res.entropy_scaled}
mx = {"softmax(q·k)": res.max_raw, "softmax(q·k / √d_k)": res.max_scaled}
if s.additive:
    ent[_("additive")] = res.entropy_additive
    mx[_("additive")] = res.max_additive
ent[_("uniform (log S)")] = [res.uniform_entropy] * len(res.d_k)
c1, c2 = st.columns(2)
with c1:
    compute.chart(lines_figure(res.d_k, ent, _("entropy of each weight row (nats)"), style, x_title="d_k",
                               y_title=_("entropy")), key="scale_entropy", filename="attnviz-why-scale-entropy")
with c2:
    compute.chart(lines_figure(res.d_k, mx, _("largest weight in each row"), style, x_title="d_k",
                               y_title=_("max weight")), key="scale_max", filename="attnviz-why-scale-max")
st.caption(_("16 tokens, 8 random trials per d_k, seed {seed}. At d_k = {dk} the unscaled largest weight averages "
             "{raw}; scaled, {scaled}.").format(seed=s.seed, dk=res.d_k[-1], raw=f"{res.max_raw[-1]:.2f}",
                                               scaled=f"{res.max_scaled[-1]:.2f}"))
