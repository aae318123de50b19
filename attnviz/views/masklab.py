"""The Mask lab page: one head's weights under several masks side by side, each mask at work
(the mask, the scores before and after it, the weights), and why a blocked score is −∞.

A page module: its own settings (``Settings``), its run, and its figure for the CLI (``figure``).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.walkthrough import blocked_row_demo
from attnviz.core.masks import MASK_KINDS
from attnviz.i18n import N_, _
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute
from attnviz.settings.spec import OWN, Reason, setting
from attnviz.views.selection import check_selection

MASK_CHOICES = MASK_KINDS  # the Mask lab's masks, in order
# A mask at work, in order: the mask, the scores before and after it, the weights (``mask_lab_figure``).
STAGES = ("mask", "before", "after", "weights")
STAGE_NAMES = {"mask": N_("the mask"), "before": N_("scores before"), "after": N_("scores after"),
               "weights": N_("weights")}


def _masks(raw: str, taken: dict) -> str:
    kinds = [k.strip() for k in raw.split(",") if k.strip()]
    if [k for k in kinds if k not in MASK_KINDS] or not kinds:
        raise Reason(_("must be a comma-separated list of {kinds}").format(kinds=", ".join(MASK_KINDS)))
    return ",".join(dict.fromkeys(kinds))


@dataclass(frozen=True)
class Settings:
    """The Mask lab's own settings (the head is shared with the pages that follow one)."""

    masks: str = setting("causal,window,causal+window", convert=_masks, pages=OWN,
                         label=N_("Masks to compare"), help=N_("Each with the same text, heads and seed."))
    stage: str = setting("weights", pages=OWN, choices=STAGES, label=N_("Show"),
                         help=N_("In presenter mode, one picture of each mask at a time: the mask, the scores "
                                 "before and after it, or the weights."))


def mask_kinds(state) -> list[str]:
    """The mask lab's comparison, in order, without repeats."""
    return [k for k in dict.fromkeys(state.mask_lab.masks.split(",")) if k in MASK_KINDS]


def mask_comparison_figure(results: dict[str, AttentionResult], state,
                           style: F.FigureStyle) -> go.Figure:
    """Head ``state.head``'s weights under each mask, side by side on one 0–1 scale."""
    data = []
    for kind, r in results.items():
        d = F.head_data(r, state.seq, state.head)
        d.title = _("mask: {kind}").format(kind=kind)
        data.append(d)
    return F.grid_figure(data, style, title=_("weights of head {h} under each mask").format(h=state.head))


def blocked_rows() -> dict:
    """Why −∞ and not −1e9: a partly and a fully blocked row, softmaxed both ways and by attnviz."""
    return blocked_row_demo()


def mask_lab_figure(result: AttentionResult, part: str, n: int, h: int, style: F.FigureStyle) -> go.Figure:
    """One of the mask lab's four pictures of a mask at work on head ``h``: the mask, the
    scores before masking, after masking (−∞ blank), and the weights after softmax."""
    if part == "mask":
        return F.mask_figure(result, n, style, key_axis_top=False)
    a = result.steps.attention
    toks, keys = result.tokens[n], result.source_tokens[n]
    if part == "before":
        return F.matrix_figure(a.scaled[n, h].numpy(), toks, keys,
                               _("scores before masking — head {h}").format(h=h), style)
    if part == "after":
        return F.matrix_figure(a.masked[n, h].numpy(), toks, keys, _("after masking (blank = −∞)"), style)
    return F.matrix_figure(a.weights[n, h].numpy(), toks, keys, _("weights after softmax"), style, zero_one=True)


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    results = {k: compute(state.config.with_(mask=k)) for k in mask_kinds(state)}
    return mask_comparison_figure(results, check_selection(next(iter(results.values())), state), style)
