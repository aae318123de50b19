"""attnviz.plots.charts: the stacked lines of close series (Long sequences' output changes per pattern), and
line charts on a projector."""


def test_stacked_lines_keep_close_series_apart_on_one_scale():
    from attnviz.plots.charts import stacked_lines_figure

    series = {"a": [1.0, 1.2, 1.1], "b": [1.05, 1.15, 1.2], "c": [0.0, 2.0, 1.0]}
    fig = stacked_lines_figure([0, 1, 2], series, "t", x_title="query", y_title="change")
    assert [t.name for t in fig.data] == ["a", "b", "c"] and [t.yaxis for t in fig.data] == ["y", "y2", "y3"]
    domains = [fig.layout[f"yaxis{s}"].domain for s in ("", "2", "3")]
    assert all(d0[0] > d1[1] for d0, d1 in zip(domains, domains[1:], strict=False))  # rows do not overlap
    assert {tuple(fig.layout[f"yaxis{s}"].range) for s in ("", "2", "3")} == {(0, 2.0 * 1.05)}  # one scale
    assert [a.text for a in fig.layout.annotations] == ["a", "b", "c"]  # each row named


def test_a_line_chart_on_a_projector_keeps_its_data_range_and_its_legend_below():
    from attnviz.plots.charts import lines_figure
    from attnviz.plots.style import FigureStyle
    from attnviz.views.selection import PRESENTER_FONT

    steps, series = [0, 500, 1000, 2000], {"loss on the repeat": [3.5, 3, 1, 0.9], "loss elsewhere": [3.5] * 4}
    mark = (700, "phase change: step 700 (27.0 s), a label wider than the plot")
    big = lines_figure(steps, series, "loss", FigureStyle(font_size=PRESENTER_FONT), log_x=False, mark=mark,
                       x_title="step")
    lo, hi = big.layout.xaxis.range
    assert lo < 0 < 2000 < hi and hi - lo < 2000 * 1.1  # the data's range, padded; not widened for the label
    assert big.layout.legend.orientation == "h" and big.layout.legend.y < 0  # under the plot, not beside it
    assert big.layout.margin.b > lines_figure(steps, series, "loss", FigureStyle(font_size=PRESENTER_FONT),
                                              log_x=False).layout.margin.b - 1
    small = lines_figure(steps, series, "loss", FigureStyle(), log_x=False, mark=mark)
    assert small.layout.legend.orientation is None  # a laptop keeps Plotly's legend beside the plot
    logged = lines_figure([1, 10, 100], {"a": [1, 2, 3]}, "t", FigureStyle(), mark=(10, "m"))
    assert logged.layout.xaxis.range[0] < 0 < 2 < logged.layout.xaxis.range[1] < 2.2  # log10 units on a log axis
