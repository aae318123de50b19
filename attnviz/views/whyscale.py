"""The Why √d_k page: the spread of dot products and softmax saturation against d_k
(``attnviz.analysis.scaling``).

A page module: its own settings (``Settings``), its run, and its figure for the CLI (``figure``).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.scaling import sweep
from attnviz.i18n import N_, _
from attnviz.settings.spec import OWN, setting


@dataclass(frozen=True)
class Settings:
    """The Why √d_k page's own settings."""

    additive: bool = setting(
        False, pages=OWN, label=N_("Compare with additive attention"),
        help=N_("vᵀ tanh(W_q q + W_k k): tanh bounds the scores, so it does not saturate as d_k grows."))


def scaling_figure(res, style: F.FigureStyle) -> go.Figure:
    return F.lines_figure(res.d_k, {_("q·k (raw)"): res.std_raw, "q·k / √d_k": res.std_scaled},
                          _("spread (std) of the scores"), style, x_title="d_k", y_title=_("std"))


def scaling_sweep(seed: int, additive: bool):
    """Why √d_k's numbers (``attnviz.analysis.scaling.sweep``): 16 tokens, 8 random trials per d_k."""
    return sweep(seed=seed, additive=additive)


def saturation_figures(res, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    """(entropy of each weight row, largest weight in each row) against d_k, raw and scaled (and additive)."""
    # The same line in the same place of both charts' legends, so each keeps its colour across them.
    ent = {"softmax(q·k)": res.entropy_raw, "softmax(q·k / √d_k)": res.entropy_scaled}
    mx = {"softmax(q·k)": res.max_raw, "softmax(q·k / √d_k)": res.max_scaled}
    if res.entropy_additive:  # swept with the additive score too
        ent[_("additive")] = res.entropy_additive
        mx[_("additive")] = res.max_additive
    ent[_("uniform (log S)")] = [res.uniform_entropy] * len(res.d_k)
    return (F.lines_figure(res.d_k, ent, _("entropy of each weight row (nats)"), style, x_title="d_k",
                           y_title=_("entropy")),
            F.lines_figure(res.d_k, mx, _("largest weight in each row"), style, x_title="d_k",
                           y_title=_("max weight")))


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    return scaling_figure(scaling_sweep(state.seed, state.why_scale.additive), style)
