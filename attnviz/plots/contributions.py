"""Does a head matter: the knock-out bars, and BertViz's neuron view of one query."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import _
from attnviz.plots import margins
from attnviz.plots.style import DIVERGING, FigureStyle, axis_labels, colorscale, figure, layout_for, rows_down


def knockout_figure(moved: list[float], title: str, style: FigureStyle = FigureStyle(), *,
                    top_p_without: list[float] = (), top_p: float | None = None, top_token: str = "") -> go.Figure:
    """One bar per head: how far the layer's output moves when that head is zeroed; for a
    causal LM, beside it, the original top token's probability with that head zeroed, the
    probability with every head as a dashed line."""
    heads = [_("head {h}").format(h=h) for h in range(len(moved))]
    two = bool(top_p_without) and top_p is not None
    traces = [{"type": "bar", "x": heads, "y": np.asarray(moved, dtype=np.float64), "name": _("output moved"),
               "marker": {"color": "#2a9d8f"}, "xaxis": "x", "yaxis": "y",
               "hovertemplate": "%{x}<br>" + _("‖Δ output‖ / ‖output‖") + ": %{y:.4f}<extra></extra>"}]
    layout: dict = {"showlegend": False, "height": 380,
                    "xaxis": {"type": "category", "domain": [0, 0.45 if two else 1], "title": {"text": _("head")}},
                    "yaxis": {"title": {"text": _("‖Δ output‖ / ‖output‖")}, "rangemode": "tozero"}}
    if two:
        token = _("p(“{token}”)").format(token=top_token)
        traces.append({"type": "bar", "x": heads, "y": np.asarray(top_p_without, dtype=np.float64), "name": token,
                       "marker": {"color": "#e76f51"}, "xaxis": "x2", "yaxis": "y2",
                       "hovertemplate": "%{x}<br>" + token + ": %{y:.4f}<extra></extra>"})
        layout["xaxis2"] = {"type": "category", "domain": [0.55, 1], "anchor": "y2", "title": {"text": _("head")}}
        layout["yaxis2"] = {"anchor": "x2", "rangemode": "tozero",
                            "title": {"text": _("next-token probability of “{token}”").format(token=top_token)}}
        layout["shapes"] = [{"type": "line", "xref": "x2 domain", "x0": 0, "x1": 1, "yref": "y2", "y0": top_p,
                             "y1": top_p, "line": {"color": "#111111", "dash": "dash", "width": 2}}]
        layout["annotations"] = [{"text": _("with every head: {p}").format(p=f"{top_p:.3f}"), "xref": "x2 domain",
                                  "x": 1, "yref": "y2", "y": top_p, "xanchor": "right", "yanchor": "bottom",
                                  "showarrow": False}]
    return figure(traces, layout_for(layout, style, title))


def score_columns(dot: np.ndarray, scaled: np.ndarray, bias: np.ndarray | None) -> tuple[list[str], np.ndarray]:
    """The columns between q∘k and the weight, per key (S, C): Σ q∘k = q·k and the scaled score;
    with a position bias, q·k, the scaled score (left out when scaling changes nothing, as in
    T5), the bias and their sum, the score softmax reads."""
    if bias is None:
        return ["Σ q∘k = q·k", _("scaled")], np.stack([dot, scaled], 1)  # (S, 2)
    names, cols = ["Σ q∘k = q·k"], [dot]
    if not np.array_equal(scaled, dot):
        names, cols = [*names, _("scaled")], [*cols, scaled]
    return [*names, _("position bias"), _("score")], np.stack([*cols, bias, scaled + bias], 1)  # (S, C)


def neuron_figure(q: np.ndarray, k: np.ndarray, product: np.ndarray, dot: np.ndarray, scaled: np.ndarray,
                  weight: np.ndarray, visible: np.ndarray, keys: list[str], title: str,
                  style: FigureStyle = FigureStyle(), *, bias: np.ndarray | None = None) -> go.Figure:
    """BertViz's neuron view of one query: q (top), each key's k, the elementwise q∘k (one
    column per dimension of the head), then per key Σ q∘k = q·k, the scaled score (with a
    position bias ``bias`` (S,): the bias and the score, ``score_columns``) and the weight after
    softmax (blocked keys say "masked")."""
    S, D = k.shape
    names, scores = score_columns(dot, scaled, bias)  # (S, C)
    y = axis_labels(keys)
    dims = [str(d) for d in range(D)]
    lim = float(max(np.abs(k).max(initial=0), np.abs(q).max(initial=0))) or 1.0
    plim = float(np.abs(product).max(initial=0)) or 1.0
    slim = float(np.abs(scores).max(initial=0)) or 1.0
    div = colorscale(DIVERGING)
    cell = lambda name: f"{_('key')}: %{{y}}<br>{_('dimension')} %{{x}}<br>{name}: %{{z:.4f}}<extra></extra>"  # noqa: E731
    masked = _("masked")
    traces = [
        {"type": "heatmap", "z": q[None, :].astype(np.float64), "x": dims, "y": ["q"], "xaxis": "x", "yaxis": "y2",
         "colorscale": div, "zmin": -lim, "zmax": lim, "showscale": False,
         "hovertemplate": f"q, {_('dimension')} %{{x}}: %{{z:.4f}}<extra></extra>"},
        {"type": "heatmap", "z": k.astype(np.float64), "x": dims, "y": y, "xaxis": "x", "yaxis": "y",
         "colorscale": div, "zmin": -lim, "zmax": lim, "showscale": False, "hovertemplate": cell("k")},
        {"type": "heatmap", "z": product.astype(np.float64), "x": dims, "y": y, "xaxis": "x2", "yaxis": "y",
         "colorscale": div, "zmin": -plim, "zmax": plim, "showscale": False, "hovertemplate": cell("q∘k")},
        {"type": "heatmap", "z": scores.astype(np.float64), "x": names,
         "y": y, "xaxis": "x3", "yaxis": "y", "colorscale": div, "zmin": -slim, "zmax": slim, "showscale": False,
         "texttemplate": "%{z:.3f}", "hovertemplate": f"{_('key')}: %{{y}}<br>%{{x}}: %{{z:.4f}}<extra></extra>"},
        {"type": "heatmap", "z": weight[:, None].astype(np.float64), "x": [_("weight")], "y": y, "xaxis": "x4",
         "yaxis": "y", "colorscale": colorscale(style.colors), "zmin": 0.0, "zmax": 1.0, "showscale": False,
         "text": [[f"{w:.3f}" if v else masked] for w, v in zip(weight, visible, strict=True)],
         "texttemplate": "%{text}", "hovertemplate": f"{_('key')}: %{{y}}<br>{_('weight')}: %{{z:.4f}}<extra></extra>"},
    ]
    row = {"type": "category", "showgrid": False}
    wide = len(names) > 2  # the bias and the score take room from q∘k's block
    layout: dict = {
        "xaxis": {**row, "domain": [0, 0.33], "title": {"text": _("k, per dimension")}},
        "xaxis2": {**row, "domain": [0.36, 0.64 if wide else 0.69], "anchor": "y",
                   "title": {"text": _("q∘k, per dimension")}},
        "xaxis3": {**row, "domain": [0.67 if wide else 0.73, 0.9], "anchor": "y"},
        "xaxis4": {**row, "domain": [0.92, 1.0], "anchor": "y"},
        "yaxis": {**row, **rows_down(S), "domain": [0, 0.86]},
        "yaxis2": {**row, "domain": [0.9, 1.0], "anchor": "x"},
        "height": max(360, 26 * S + 200),
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    room = {"l": margins.left(y, style.font_size), "b": 60}
    return figure(traces, layout_for(layout, style, title, room=room))
