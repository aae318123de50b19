"""The Gradients page: how one query's output vector depends on every token's Q, K, V and input,
by autograd (``attnviz.analysis.gradients``).

A page module: its own settings (``Settings``), its run, and its figure for the CLI (``figure``).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.gradients import SCALAR_LABELS, SCALARS, token_gradients
from attnviz.i18n import N_, _
from attnviz.run.run import compute
from attnviz.settings.spec import OWN, setting
from attnviz.views.selection import check_selection

GRADIENT_OF = SCALAR_LABELS  # the scalar of a query's output that the page differentiates, in words


@dataclass(frozen=True)
class Settings:
    """The Gradients page's own settings (the followed query is shared with the pages that follow one)."""

    grad_of: str = setting("sum", choices=SCALARS, pages=OWN, label=N_("Differentiate"),
                           help=N_("Which scalar of the query's output vector autograd differentiates."))


def gradients_of(config, seq: int, query: int, of: str):
    """The gradients of one query's output (``attnviz.analysis.gradients.token_gradients``)."""
    return token_gradients(config, seq, query, of)


def gradient_figures(grads, tok: str, style: F.FigureStyle) -> tuple[go.Figure, go.Figure]:
    """(per key: ‖∂/∂V‖, ‖∂/∂K‖; per query-side token: ‖∂/∂Q‖, ‖∂/∂X‖)."""
    label = F.escape_label(tok)
    kv = F.token_bars(grads.keys, {"‖∂/∂V‖": grads.norms["V"], "‖∂/∂K‖": grads.norms["K"]},
                      _("gradient per key token, for the output of “{token}”").format(token=label), style,
                      y_title=_("gradient norm"))
    qx = F.token_bars(grads.tokens, {"‖∂/∂Q‖": grads.norms["Q"], "‖∂/∂X‖": grads.norms["X"]},
                      _("gradient per query-side token"), style, y_title=_("gradient norm"))
    return kv, qx


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    state = check_selection(compute(state.config), state)
    grads = gradients_of(state.config, state.seq, state.query, state.gradients.grad_of)
    return gradient_figures(grads, grads.tokens[state.query], style)[0]
