"""The Explorer, the default page: the text's run drawn by the chosen view of the table of views
(``attnviz.views.catalogue``), and a causal language model's generated tokens.

A page module: its own settings (``Settings``: the long text's close-up corner and the generation),
and its figure for the CLI (``figure``). The head, query and view are shared with the pages that
draw views.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import limits
from attnviz import plots as F
from attnviz.i18n import N_
from attnviz.run.run import compute
from attnviz.settings.spec import OWN, setting
from attnviz.views.catalogue import VIEWS, check_view
from attnviz.views.generation import generation, step_figure
from attnviz.views.selection import check_selection

PAGE = "explorer"


@dataclass(frozen=True)
class Settings:
    """The Explorer's own settings."""

    q0: int = setting(0, lo=0, hi=limits.MAX_TOKENS - 1, pages=OWN, label=N_("From query position"),
                      help=N_("First row of the close-up."))
    k0: int = setting(0, lo=0, hi=limits.MAX_TOKENS - 1, pages=OWN, label=N_("From key position"),
                      help=N_("First column of the close-up."))
    generate: int = setting(0, lo=0, hi=limits.MAX_GENERATE, pages=OWN, label=N_("Generate tokens"),
                            help=N_("A causal language model writes this many tokens after the sentence, greedily "
                                    "(0: none), each with the attention that chose it."))
    chat: bool = setting(False, pages=OWN, label=N_("As a question"),
                         help=N_("The sentence asked as a user's question in the model's own chat template (an "
                                 "instruction-tuned model such as SmolLM2 answers it), not continued."))
    step: int = setting(0, lo=0, hi=limits.MAX_GENERATE - 1, pages=OWN, label=N_("Generated token"),
                        help=N_("Which generated token's attention to show."))


def main_figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    check_view(PAGE, state)
    result = compute(state.config)
    state = check_selection(result, state)
    if state.explorer.generate:  # a causal LM's generated tokens: the chosen one's attention
        gen = generation(result, state.seq, state.explorer.generate, state.explorer.chat)
        if gen is None:
            raise ValueError(f"{result.model_name} is not a causal language model: it generates no tokens "
                             f"(generate works with GPT-2- and LLaMA-style models).")
        if state.explorer.step >= gen.count:
            raise ValueError(f"Generated token {state.explorer.step} does not exist: {result.model_name} wrote "
                             f"{gen.count} (0–{gen.count - 1}).")
        return step_figure(gen, result.layer, state.explorer.step, style)
    return VIEWS[state.view].figure(result, state, style)
