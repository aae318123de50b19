"""Any view of the table (``attnviz.views.catalogue.VIEWS``) on a page: its parts in order, each
figure and table built once per plain key (the run's, the view's, its selection, the style) and
long work on a compute worker. A page calls ``render`` with its run and keeps only its layout.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attnviz.views.catalogue import VIEWS, Part, View
from attnviz.views.markdown import md
from attnviz.views.selection import file_stem, style_for
from ui import compute, picks, widgets
from ui.controls import control

_TEXT = {"caption": st.caption, "subheader": st.subheader, "info": lambda t: st.info(t, icon=":material/info:")}


def render(name: str, result, state, *, run_key: tuple) -> None:
    """Draw view ``name`` of ``result`` as ``state`` reads it. ``run_key``: plain values naming
    the run (its config, a file's digest and layer, an image's settings), so that its figures
    and tables are built once for everyone who opens the same. A view that cannot draw this run
    says why instead (its entry's ``problem``)."""
    view = VIEWS[name]
    problem = view.problem(result, state) if view.problem is not None else None
    if problem:
        st.info(md(problem), icon=":material/info:")
        return
    for part in view.parts:
        state = _part(view, part, result, state, run_key)


def _part(view: View, part: Part, result, state, run_key: tuple):
    """Draw one part; returns the state the next parts read (the close-up's corner, once drawn)."""
    if part.when is not None and not part.when(result):
        return state
    if part.kind == "columns":
        for column, inner in zip(widgets.chart_columns(len(part.parts)), part.parts, strict=True):
            with column:
                _part(view, inner, result, state, run_key)
        return state
    if part.kind in _TEXT:
        text = part.build(result, state)
        if text:
            _TEXT[part.kind](text)
        return state
    if part.kind == "corner":  # its bounds come from the run; a link's corner past the end is pulled in
        L, S = result.weights.shape[-2:]
        c1, c2, _spacer = st.columns([1, 1, 2])
        for name, side, column in (("q0", L, c1), ("k0", S, c2)):
            st.session_state[name] = min(int(st.session_state.get(name, 0)), side - 1)
            control(name, column, bounds=(0, side - 1), step=16)
        return state.with_(q0=int(st.session_state["q0"]), k0=int(st.session_state["k0"]))
    key = (*run_key, *view.key(state, part))
    if part.kind == "table":
        rows = compute.guard(lambda: compute.cached(("view-table", *key), lambda: part.build(result, state),
                                                    limited=part.worker))
        if rows is not None:
            _table(view, part, rows, result)
        return state
    _figure(view, part, result, state, key)
    return state


def _table(view: View, part: Part, rows, result) -> None:
    """Rows as a table: records (a row per head: scores to 3 decimals, one row selectable where
    it opens that head) or a matrix with its row and column labels."""
    if isinstance(rows, dict):
        frame = pd.DataFrame(rows["data"], index=rows.get("index"), columns=rows.get("columns"))
        st.dataframe(frame, height=min(600, 40 + 35 * len(frame)))
        return
    frame = pd.DataFrame(rows)
    if part.selectable:
        picked = widgets.picked_head(frame, f"{view.name}_table")
        if picked:
            picks.pick(part.opens(picked[1], picked[2], result.pretrained), (view.name, picked[0]))
        return
    st.dataframe(frame, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.3f")
                                                        for c in frame.columns if frame[c].dtype.kind == "f"})


def _figure(view: View, part: Part, result, state, key: tuple) -> None:
    style = style_for(state)
    build = part.build or view.figure
    describe = part.describe if part.build is not None else view.describe

    def made():
        return build(result, state, style)

    fig = compute.guard(lambda: compute.cached_figure(
        (*key, compute.style_key(style)), (lambda: compute.on_worker(made)) if part.worker else made,
        alt=(lambda f: describe(result, state, f)) if describe is not None else None, plain=part.plain))
    if not part.selectable:
        compute.chart(fig, key=f"chart_{view.name}" + (f"_{part.name}" if part.name else ""),
                      filename=file_stem(state, part.name or view.name, result))
        return
    event = st.plotly_chart(fig, key=f"chart_{view.name}", theme=None, width="stretch", on_select="rerun",
                            selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
    points = getattr(getattr(event, "selection", None), "points", None) or []
    block = points[0].get("customdata") if points else None
    if isinstance(block, (int, float)) and block >= 0:  # a block of the model view: open that layer's head
        H = result.heads
        picks.pick(part.opens(int(block) // H, int(block) % H, result.pretrained), (view.name, int(block)))
