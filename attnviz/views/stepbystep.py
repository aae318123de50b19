"""The Step by step page: one head's computation as the formulas write it, each step with its
formula, its matrix and the followed token's row (``attnviz.analysis.walkthrough``).

A page module: its own setting is the step presenter mode shows (the head and the query are shared with the
pages that follow one); its run is the text's, and its figure for the CLI is the chosen step (``main_figure``),
as presenter mode shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.walkthrough import STEP_KEYS, walkthrough, weighted_sum_terms
from attnviz.i18n import N_, _
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute
from attnviz.settings.spec import OWN, setting
from attnviz.views.selection import check_selection


@dataclass(frozen=True)
class Settings:
    step: int = setting(1, url="walk_step", lo=1, hi=len(STEP_KEYS), pages=OWN, label=N_("Step"),
                        help=N_("In presenter mode, the step shown: one a screen."))


def walk_steps(result: AttentionResult, seq: int, head: int, query: int):
    """The page's steps: each with its formula, its matrix and the followed token's row."""
    return walkthrough(result, seq, head, query)


def walk_step_figure(step, head: int, query: int, style: F.FigureStyle) -> go.Figure:
    """One step's matrix, for ``head`` where it is per head, the followed token's row outlined."""
    title = _("{step} — head {h}").format(step=step.title, h=head) if step.per_head else step.title
    return F.matrix_figure(step.matrix, step.rows, step.cols, title, style,
                           zero_one=step.key in ("Weights", "After dropout"),
                           highlight_row=query if step.query_side else None)


def output_terms(result: AttentionResult, seq: int, head: int, query: int) -> list[tuple[str, float]]:
    """The followed token's head output as a weighted sum: (key, weight), largest first."""
    return weighted_sum_terms(result, seq, head, query)


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The chosen step (``walk_step``, the one presenter mode shows: the first unless told) for the followed
    head, its token outlined."""
    result = compute(state.config)
    state = check_selection(result, state)
    steps = walk_steps(result, state.seq, state.head, state.query)
    return walk_step_figure(steps[state.step_by_step.step - 1], state.head, state.query, style)
