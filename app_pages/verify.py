"""Verify against PyTorch: the same weights through nn.MultiheadAttention and F.sdpa."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _
from attnviz.views.selection import first_chart_style
from attnviz.views.verify import verify_figure, verify_run
from ui import compute, session, widgets
from ui.controls import control

s = session.current()
widgets.header(_("Verify against PyTorch"),
               _("The current settings run through torch.nn.MultiheadAttention (with this run's weights copied in) "
                 "and torch.nn.functional.scaled_dot_product_attention (with this run's per-head Q, K, V). "
                 "Pass: every number within torch.testing.assert_close's tolerance for its dtype, |difference| ≤ "
                 "atol + rtol · |value| (float32: 1e-5 + 1.3e-6 · |value|)."))
# On a projector the float64 switch and each run's table fold under its chart, the chart a line taller than a
# first chart: whole on the first screen under its verdict, its log axis' ticks apart.
if not s.present:
    control("float64")
s = session.current()
style = first_chart_style(s, 80)
tables = []
for f64 in [False, True] if s.verify.float64 else [False]:
    v = compute.guard(lambda f64=f64: compute.cached(("verify", s.config, f64),
                                                     lambda: verify_run(s.config, float64=f64)))
    label = _("{dtype} on {device}").format(dtype=v.dtype, device=v.device)
    if v.passed:
        st.success(_("PASS — {label}: attnviz matches PyTorch.").format(label=label), icon=":material/check_circle:")
    else:
        st.error(_("FAIL — {label}: attnviz differs from PyTorch beyond the tolerance.").format(label=label),
                 icon=":material/cancel:")
    table = pd.DataFrame({
        _("check"): [_(c.name) for c in v.checks],
        _("max |difference|"): [f"{c.max_abs_diff:.3e}" for c in v.checks],
        _("tolerance (torch.testing.assert_close)"): [c.tolerance for c in v.checks],
        _("worst |difference| ÷ tolerance"): [f"{c.worst:.2f}" for c in v.checks],
        _("result"): [_("pass") if c.passed else _("FAIL") for c in v.checks],
    })
    if s.present:
        tables.append((label, table))
    else:
        st.dataframe(table, hide_index=True)
    compute.chart(verify_figure(v, style), key=f"verify_where_{v.dtype}", filename=f"attnviz-verify-{v.dtype}")
    st.caption(_("Where the weights differ, per head and per query token, as |difference| ÷ tolerance (log "
                 "scale; the dashed line is 1, the tolerance, a red bar is over it). A failing run shows here where "
                 "it fails."))
    for note in v.notes:
        st.info(note, icon=":material/info:")
if s.present:
    more = st.expander(_("Each check, number by number, and float64"))
    control("float64", more)
    for label, table in tables:
        more.markdown(f"**{label}**")
        more.dataframe(table, hide_index=True)
