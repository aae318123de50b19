"""Step by step: softmax(QKᵀ/√d_k + M)V and the multi-head split, one step at a time."""

import pandas as pd
import streamlit as st

from attnviz.i18n import _
from attnviz.views.markdown import md, quoted
from attnviz.views.selection import first_chart_style
from attnviz.views.stepbystep import output_terms, walk_step_figure, walk_steps
from ui import compute, session, widgets
from ui.controls import control, row

FORMULA = (r"\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_H)\,W_O^\top,\quad"
           r"\mathrm{head}_h = \mathrm{softmax}\!\left(\frac{Q_h K_h^\top}{\sqrt{d_k}} + M\right) V_h")

s = session.current()
st.title(_("Step by step"))
# On a projector the formula and the note fold under the title, and the step's chooser joins the head's row: the
# step's matrix whole on the first screen.
about = st.expander(_("The formula, and the token followed")) if s.present else st.container()
about.latex(FORMULA)
result = compute.result(s.config)
compute.guard(result.require_complete)
seq = min(s.seq, len(result.tokens) - 1)
controls = row() if s.present else None
head, query = widgets.head_and_query(result, seq, query_label=_("Follow this token"), into=controls)
tok = result.tokens[seq][query]
style = first_chart_style(s)
about.caption(_("Following **{token}** (position {q}) through head {h}: its row is outlined in each heatmap and "
                "listed in the table beside it. Every number is the one the computation used.").format(
    token=md(tok), q=query, h=head))

steps = walk_steps(result, seq, head, query)
if s.present:  # on a projector, one step a screen
    titles = {step.number: f"{step.number}. {step.title}" for step in steps}  # the chooser names each step
    control("walk_step", controls, options=list(titles), format_func=titles.get, width=360)
    steps = steps[session.current().step_by_step.step - 1:][:1]
for step in steps:
    explained = step.explain + "  " + _("Shape of the whole tensor: `{shape}`.").format(shape=step.shape)
    if s.present:  # its formula beside its name, its words under its matrix
        st.markdown(f"### {step.number}. {step.title} &nbsp; ${step.latex}$")
    else:
        st.subheader(f"{step.number}. {step.title}")
    left, right = widgets.chart_columns([3, 2])
    with left:
        if not s.present:
            st.latex(step.latex)
            st.caption(explained)
        compute.chart(walk_step_figure(step, head, query, style), key=f"step{step.number}",
                      filename=f"attnviz-step{step.number}")
        if s.present:
            st.caption(explained)
    with right:
        row_of = _("Row of {token}") if step.query_side else _("Row of {token} as a key")
        st.markdown("**" + row_of.format(token=quoted(tok)) + "** " + _("({n} numbers)").format(n=len(step.row)))
        row = pd.DataFrame({_("column"): step.cols[: len(step.row)],
                            _("value"): [("−∞" if v == float("-inf") else f"{v:.5f}") for v in step.row]})
        # Every entry of the row in sight (a causal row's −∞ entries come last), up to a long sentence's.
        st.dataframe(row, hide_index=True, height=40 + 35 * min(len(row), 32))
        if step.key == "Head output":
            terms = output_terms(result, seq, head, query)
            st.markdown(_("Its output is") + " " + " + ".join(f"{w:.3f}·v({md(k)})" for k, w in terms[:4])
                        + (" + …" if len(terms) > 4 else ""))
