"""The Verify page: attnviz's run of the text against ``torch.nn.MultiheadAttention`` with the same
weights, judged as ``torch.testing.assert_close`` judges (``attnviz.analysis.verify``).

A page module: its own settings (``Settings``), its run, and its figure for the CLI (``figure``).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.verify import verify
from attnviz.i18n import N_, _
from attnviz.settings.spec import OWN, setting


@dataclass(frozen=True)
class Settings:
    """The Verify page's own settings."""

    float64: bool = setting(False, pages=OWN, label=N_("Also check in float64"),
                            help=N_("Runs both implementations in double precision too."))


def verify_run(config, float64: bool = False):
    """The Verify page's comparison of ``config``'s run with PyTorch's (``attnviz.analysis.verify``)."""
    return verify(config, float64=float64)


def verify_figure(v, style: F.FigureStyle) -> go.Figure:
    """Where attnviz and nn.MultiheadAttention differ: max |Δ weight| ÷ tolerance per head and per query."""
    return F.difference_figure(v.head_diffs, v.row_diffs, v.row_tokens, v.threshold,
                               _("|difference| of the weights ÷ tolerance, {dtype} on {device}").format(
                                   dtype=v.dtype, device=v.device), style, value_name=_("|difference| ÷ tolerance"))


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    return verify_figure(verify_run(state.config, float64=state.verify.float64), style)
