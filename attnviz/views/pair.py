"""The prompt pair Patching and Circuit share: a clean prompt, a corrupted one, the answer and the wrong token.
One link opens both pages on the same pair, so the pair is shared state (``attnviz.views.state.SharedState.pair``),
read by the pages whose entry in the table names it (``catalogue.PAIR``). The defaults are the pair on the model
Watch it learn trains (``attnviz.analysis.examples``): a block repeated, the corrupted prompt swapping the answer
with an earlier token; another model's own pair replaces them on its page (``patching.example_for``)."""

from __future__ import annotations

from dataclasses import dataclass

from attnviz import limits
from attnviz.analysis.examples import DEFAULT_PAIR
from attnviz.i18n import N_, _
from attnviz.settings.spec import BY_ENTRY, Reason, setting


def _prompt(raw: str, taken: dict) -> str:
    text = " ".join(raw.split())  # one line: a prompt is one sequence
    if not text:
        raise Reason(_("is empty"))
    if len(text) > limits.MAX_PROMPT_CHARS:
        raise Reason(_("is longer than {n} characters").format(n=f"{limits.MAX_PROMPT_CHARS:,}"))
    return text


def _token_text(raw: str, taken: dict) -> str:
    if len(raw) > limits.MAX_TOKEN_CHARS or "\n" in raw:
        raise Reason(_("must be one token, at most {n} characters").format(n=limits.MAX_TOKEN_CHARS))
    return raw


@dataclass(frozen=True)
class PromptPair:
    clean: str = setting(DEFAULT_PAIR["clean"], convert=_prompt, pages=BY_ENTRY, label=N_("Clean prompt"),
                         help=N_("A prompt whose next token the model gets right: the answer."))
    corrupted: str = setting(DEFAULT_PAIR["corrupted"], convert=_prompt, pages=BY_ENTRY, label=N_("Corrupted prompt"),
                             help=N_("The same number of tokens, one or two changed so that the answer changes."))
    answer: str = setting(DEFAULT_PAIR["answer"], convert=_token_text, pages=BY_ENTRY, label=N_("Answer"),
                          help=N_("One token, as the model's tokenizer spells it (GPT-2: ĠParis for “ Paris”)."))
    wrong: str = setting(DEFAULT_PAIR["wrong"], convert=_token_text, pages=BY_ENTRY, label=N_("Wrong token"),
                         help=N_("The corrupted prompt's answer. Empty: the metric is the answer's log-probability."))
