"""The generic text alternative of a chart: its title, and its largest value where it can be named."""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz.analysis.describe import MAX_NAMED_SERIES, describe_figure


def lines(n: int) -> go.Figure:
    return go.Figure([go.Scatter(x=["a", "b", "c"], y=[k, 2 * k, k], name=f"line {k}") for k in range(n)]
                     ).update_layout(title="Lines")


def test_a_few_series_name_the_highest_and_many_are_described_by_the_title_alone():
    assert describe_figure(lines(2)) == "Lines. 2 series; the highest value is 2, for line 1 at “b”."
    assert describe_figure(lines(MAX_NAMED_SERIES + 1)) == "Lines."
    heat = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.3, 0.2]], x=["k0", "k1"], y=["q0", "q1"])).update_layout(
        title="One head")
    assert describe_figure(heat) == ("One head. A heatmap of 2 × 2 cells; the largest value is 0.9 at row “q0”, "
                                     "column “k1”.")
