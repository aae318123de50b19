"""Presenter mode prints a chart's text description under it only where it is a view's own sentence: the generic
one made from any figure ("24 series; the highest value is 1, for into keys at “0”") stays the chart's accessible
name, never a caption."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def script():
    import plotly.graph_objects as go
    import streamlit as st

    from ui import compute

    st.session_state["present"] = True
    lines = go.Figure([go.Scatter(x=list(range(5)), y=[i * k for i in range(5)], name=f"line {k}")
                       for k in range(24)]).update_layout(title="Twenty-four lines")
    compute.chart(lines, key="generic", filename="generic")
    own = go.Figure(go.Bar(y=[1, 3, 2])).update_layout(title="Bars")
    compute.chart(own, key="own", filename="own", alt="The second bar is the tallest, at 3.")


def test_presenter_mode_captions_only_a_views_own_sentence():
    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert captions == ["The second bar is the tallest, at 3."]
