"""The Cross-attention page: queries from the text (the target), keys and values from a second
text (the source), as in an encoder–decoder; an encoder–decoder model shows its own.

A page module: its own settings (``Settings``), its run (``cross_config``), and its figure for the
CLI (``figure``).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.i18n import N_, _
from attnviz.inputs.text import check_text
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.run.config import AttentionConfig
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute
from attnviz.settings.spec import OWN, setting
from attnviz.views.selection import check_selection

CROSS_MASK = "padding"  # cross-attention blocks padded source keys only
# The source, in the interface's language: a Latin-script sentence needs no CJK font.
CROSS_SOURCES = {"en": "Le chat était assis sur le tapis parce qu'il était fatigué.", "zh": "我爱人工智能"}


def _source(raw: str, taken: dict) -> str:
    return check_text(raw, taken.get("tokenize", AttentionConfig.tokenize_mode))


@dataclass(frozen=True)
class Settings:
    """The Cross-attention page's own settings (the target is the shared text)."""

    source: str = setting(CROSS_SOURCES["en"], convert=_source, pages=OWN,
                          follows=lambda v: CROSS_SOURCES.get(v["lang"], CROSS_SOURCES["en"]),
                          label=N_("Source — keys and values (one line, or one per target line)"),
                          help=N_("Several lines form a padded batch; padded source keys are always blocked."))


def cross_config(state) -> AttentionConfig:
    """Queries from ``text``, keys and values from ``source``. Causal and window masks compare
    positions of one sequence, so between two sequences only the source's padding is blocked (as in
    a Transformer's cross-attention). An encoder–decoder shows its own cross-attention; any other
    model leaves the page to the random one."""
    if open_model(state.model).can(Cap.STACKS):
        return state.config.with_(mask=CROSS_MASK, source=state.cross_attention.source, stack="cross")
    return state.config.with_(mask=CROSS_MASK, source=state.cross_attention.source, model="random", layer=0)


def page_result(name: str, state, data: bytes | None = None) -> tuple[AttentionResult, object]:
    """The run the page's downloads hold: the text's queries over the source's keys."""
    return compute(cross_config(state)), state


def cross_grid_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    return F.grid_figure(F.grid_data(result, state.seq), style, title=_("cross-attention weights per head"))


def cross_head_figure(result: AttentionResult, seq: int, head: int, style: F.FigureStyle) -> go.Figure:
    """One head's cross-attention weights: target tokens × source tokens."""
    return F.heatmap_figure(F.head_data(result, seq, head), style)


def cross_query_figure(result: AttentionResult, seq: int, query: int, style: F.FigureStyle) -> go.Figure:
    """One target token's weights over the source, every head."""
    return F.query_figure(result, seq, query, style)


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    result = compute(cross_config(state))
    return cross_grid_figure(result, check_selection(result, state), style)
