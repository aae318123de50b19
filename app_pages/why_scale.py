"""Why scale by √d_k: the spread of dot products and softmax saturation."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views import whyscale
from attnviz.views.selection import style_for
from ui import compute, session, widgets
from ui.controls import control

s = session.current()
st.title(_("Why scale by √d_k"))
st.markdown(_(
    "For random q, k with unit-variance components, q·k is a sum of d_k products, so its variance is d_k: "
    "raw scores spread like √d_k. Fed to softmax, a wide spread makes one weight ≈ 1 and the rest ≈ 0 "
    "(saturation), where gradients vanish. Dividing by √d_k keeps the spread at 1 for every d_k."))
control("additive")
s = session.current()
additive = s.why_scale.additive
res = compute.cached(("why-scale", s.seed, additive), lambda: whyscale.scaling_sweep(s.seed, additive))
style = style_for(s)
compute.chart(whyscale.scaling_figure(res, style), key="scale_std", filename="attnviz-why-scale-std")
entropy, largest = whyscale.saturation_figures(res, style)
for column, (fig, key) in zip(widgets.chart_columns(2), ((entropy, "scale_entropy"), (largest, "scale_max")),
                              strict=True):
    with column:
        compute.chart(fig, key=key, filename=f"attnviz-why-{key.replace('_', '-')}")
st.caption(_("16 tokens, 8 random trials per d_k, seed {seed}. At d_k = {dk} the unscaled largest weight averages "
             "{raw}; scaled, {scaled}.").format(seed=s.seed, dk=res.d_k[-1], raw=f"{res.max_raw[-1]:.2f}",
                                               scaled=f"{res.max_scaled[-1]:.2f}"))
