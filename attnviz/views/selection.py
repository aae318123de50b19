"""The selection a view shows (sentence, head, query) checked against the run, the style a
state asks for, and download names. Bounds that depend on the run come from the run.

They read a ``ViewState`` (``attnviz.views.state``) through what it has (``Selection``): the
views below the state, and the table of views that the state's ``view`` setting lists, read
the same, so nothing here imports the state.
"""

from __future__ import annotations

import re
from typing import Protocol

from attnviz import plots as F
from attnviz.i18n import _
from attnviz.plots.style import PROJECTOR_FIRST_CHART_PX
from attnviz.run.result import AttentionResult


class Selection(Protocol):
    """What the views read of a state (a ``ViewState`` has it all)."""

    seq: int
    head: int
    query: int
    view: str

    def with_(self, **changes) -> Selection: ...

PRESENTER_FONT = 24


def style_for(state: Selection, *, theme: str = "light", width=None, height=None) -> F.FigureStyle:
    """Presenter mode: fonts and ticks large enough for the back of a room."""
    return F.FigureStyle(colors=state.colors, theme=theme, width=width, height=height,
                         font_size=PRESENTER_FONT if state.present else 12, lang=state.lang)


def first_chart_style(state: Selection, more_px: int = 0) -> F.FigureStyle:
    """``style_for(state)``, and in presenter mode a page's first chart's height (``PROJECTOR_FIRST_CHART_PX``,
    ``more_px`` more for a chart with a legend or two plots): under the title and one row of controls, whole on a
    1024 × 768 projector's first screen."""
    return style_for(state, height=PROJECTOR_FIRST_CHART_PX + more_px if state.present else None)


def selection_problems(result: AttentionResult, state: Selection) -> dict[str, str]:
    """Which of seq/head/query do not exist in this result, and why (empty when all do)."""
    N, H, L, _S = result.weights.shape
    problems = {}
    if state.seq >= N:
        problems["seq"] = _("Sentence {n} does not exist (the text has {count})").format(n=state.seq + 1, count=N)
    if state.head >= H:
        problems["head"] = _("Head {h} does not exist ({count} heads)").format(h=state.head, count=H)
    if state.query >= L:
        problems["query"] = _("Query position {q} is past the last token ({last})").format(q=state.query, last=L - 1)
    return problems


def fallbacks(result: AttentionResult, state: Selection,
              names: tuple[str, ...] = ("seq", "head", "query")) -> tuple[dict[str, int], list[str]]:
    """Which of ``names`` (seq/head/query) this result does not have, as the values they fall back to
    (sentence 1, head 0, the query -1 that follows the last token) and a sentence each saying so."""
    problems = {k: text for k, text in selection_problems(result, state).items() if k in names}
    shown = {"seq": _("showing sentence 1"), "head": _("showing head 0"), "query": _("showing the last token")}
    return ({k: (-1 if k == "query" else 0) for k in problems},
            [f"{text}; {shown[k]}." for k, text in problems.items()])


def clamp_selection(result: AttentionResult, state: Selection) -> tuple[Selection, list[str]]:
    """Keep seq/head/query inside this result, saying what was changed (the app's way);
    query -1 becomes the last real token of the sentence."""
    fallen, notes = fallbacks(result, state)
    return resolve_query(result, state.with_(**fallen)), notes


def resolve_query(result: AttentionResult, state: Selection) -> Selection:
    """``query = -1`` (the default) is the last real token: under a causal mask it sees
    every key, where token 0 sees only itself."""
    if state.query >= 0:
        return state
    seq = min(state.seq, len(result.lengths) - 1)
    return state.with_(query=result.lengths[seq] - 1)


def file_stem(state: Selection, view: str, result: AttentionResult) -> str:
    """A meaningful, filesystem-safe download name: attnviz-grid-causal-4h-64d-seed0 for the
    random layer; for a model of its own what ran (its name, its mask, heads and width, no
    seed): attnviz-grid-minilm-l6-layer0-padding-12h-384d."""
    if not isinstance(result, AttentionResult):  # another record (the Patching page's): its model and the head shown
        model = str(state.model).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]  # a folder: its name
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"attnviz-{view}-{model}-head-{state.patching.patched}")
    query = f"-query{state.query}" if state.query >= 0 else "-last"
    extra = {"head": f"-head{state.head}", "query": query}.get(view, "")
    ran = result.settings
    if result.pretrained:
        width = f"-{ran['d_model']}d" if ran.get("d_model") else ""
        stem = (f"attnviz-{view}{extra}-{result.model_name}-layer{result.layer}-{ran.get('mask', result.mask_name)}"
                f"-{result.heads}h{width}")
    else:
        stem = f"attnviz-{view}{extra}-{state.mask}-{result.heads}h-{result.width}d-seed{state.seed}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem)


def check_selection(result: AttentionResult, state: Selection) -> Selection:
    """A build stops on a selection that does not exist (the app shows another instead);
    returns ``state`` with its query resolved."""
    problems = selection_problems(result, state)
    if problems:
        raise ValueError(next(iter(problems.values())) + ".")
    return resolve_query(result, state)
