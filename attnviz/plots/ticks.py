"""Tick labels as the tokens read: the plain text of each (no invisible suffix), every one up to
``EVERY_TICK_UP_TO``, past it one in k, and a figure's title that says which axis labels one in k.
"""

from __future__ import annotations

import math

from attnviz.i18n import N_, _
from attnviz.plots.style import plain_label

# Up to this many categories, every one gets its tick label (Plotly thins them otherwise).
EVERY_TICK_UP_TO = 48


def every_tick(labels: list[str], name: str = "", every: int | None = None) -> dict:
    """An axis's ticks, written as the tokens read: the plain text without the invisible suffix that keeps two
    copies of a token apart as categories (copy, search and screen readers meet what is seen). Every label up to
    ``EVERY_TICK_UP_TO``; past it one in k (``_every``; ``every``: a builder's own k, from the pixels it has),
    which the figure's title says (``labelled``)."""
    kept = labels[::every or _every(labels)]
    out = {"tickmode": "array", "tickvals": kept, "ticktext": [plain_label(t) for t in kept]}
    if name:
        out["title"] = {"text": name}
    return out


def _every(labels: list[str]) -> int:
    return max(1, math.ceil(len(labels) / EVERY_TICK_UP_TO))


def every_fitting(labels: list[str], font_size: int, px: float) -> int:
    """k for ``labels`` along ``px`` pixels: one in k, so that each kept label has 1.4 × its font of room."""
    return max(_every(labels), math.ceil(len(labels) * 1.4 * font_size / max(1.0, px)))


def labelled(title: str, x: list[str] | None = None, y: list[str] | None = None, *, words=("key", "query"),
             every: tuple[int | None, int | None] = (None, None)) -> str:
    """``title``, and under it which labels an axis thinned ("one key in 2 labelled"), where one did: said on
    the chart, in the title's lines (an axis title of a short plot has no room for it at a projector's font)."""
    says = {"key": N_("one key in {k}"), "query": N_("one query in {k}"), "column": N_("one column in {k}"),
            "row": N_("one row in {k}"), "token": N_("one token in {k}"), "head": N_("one head in {k}"),
            "position": N_("one position in {k}")}
    ks = [k or (_every(labels) if labels is not None else 1) for k, labels in zip(every, (x, y), strict=True)]
    notes = [_(says[word]).format(k=k) for word, labels, k in zip(words, (x, y), ks, strict=True)
             if labels is not None and k > 1]
    return title if not notes else f"{title}<br>" + _("({which} labelled)").format(which=", ".join(notes))
