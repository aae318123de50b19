"""attnviz.plots.charts: the stacked lines of close series (Long sequences' output changes per pattern)."""


def test_stacked_lines_keep_close_series_apart_on_one_scale():
    from attnviz.plots.charts import stacked_lines_figure

    series = {"a": [1.0, 1.2, 1.1], "b": [1.05, 1.15, 1.2], "c": [0.0, 2.0, 1.0]}
    fig = stacked_lines_figure([0, 1, 2], series, "t", x_title="query", y_title="change")
    assert [t.name for t in fig.data] == ["a", "b", "c"] and [t.yaxis for t in fig.data] == ["y", "y2", "y3"]
    domains = [fig.layout[f"yaxis{s}"].domain for s in ("", "2", "3")]
    assert all(d0[0] > d1[1] for d0, d1 in zip(domains, domains[1:], strict=False))  # rows do not overlap
    assert {tuple(fig.layout[f"yaxis{s}"].range) for s in ("", "2", "3")} == {(0, 2.0 * 1.05)}  # one scale
    assert [a.text for a in fig.layout.annotations] == ["a", "b", "c"]  # each row named
