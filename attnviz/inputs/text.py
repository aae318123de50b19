"""Text as the input of attention: lines -> tokenizer-free tokens -> embeddings X (N, L, E).

Several lines form a padded batch: each sequence is padded with ``[PAD]`` (a zero
vector) to the longest line, or to ``pad_to`` when that is longer. Positions are added
after padding, as in a Transformer.
"""

from __future__ import annotations

import time

import torch

from attnviz.i18n import N_, _
from attnviz.inputs.embeddings import embed_padded
from attnviz.inputs.record import PAD, Input
from attnviz.inputs.tokens import tokenize
from attnviz.limits import MAX_LINES, MAX_TEXT_CHARS, MAX_TOKENS
from attnviz.settings.spec import Reason

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
_WHAT = (N_("text"), N_("source text"))  # what lines_of() calls its input, marked for translation


def lines_of(text: str, what: str = "text") -> list[str]:
    """The non-blank lines of ``text`` (a padded batch), bounded; ``ValueError`` if none."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError(_("The {what} is empty: type at least one word.").format(what=_(what)))
    if len(lines) > MAX_LINES:
        raise ValueError(_("The {what} has {n} lines; the limit is {limit} (one padded batch).").format(
            what=_(what), n=len(lines), limit=MAX_LINES))
    return lines


def check_text(raw: str, mode: str) -> str:
    """A text as a link or a flag gives it: bounded in characters, lines and tokens
    (``Reason`` worded to follow the setting's name)."""
    if len(raw) > MAX_TEXT_CHARS:
        raise Reason(_("is longer than {n} characters").format(n=f"{MAX_TEXT_CHARS:,}"))
    text = raw.replace("\r\n", "\n")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise Reason(_("is empty"))
    if len(lines) > MAX_LINES:
        raise Reason(_("has {n} lines; the limit is {limit}").format(n=len(lines), limit=MAX_LINES))
    for ln in lines:
        tokenize(ln, mode)  # raises a readable ValueError over the cap
    return text


def tokenize_lines(lines: list[str], mode: str, max_tokens: int = MAX_TOKENS) -> list[list[str]]:
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(tokenize(line, mode, max_tokens=max_tokens))
        except ValueError as e:
            raise ValueError(_("Line {n}: {error}").format(n=i + 1, error=e) if len(lines) > 1 else str(e)) from None
    return out


def pad_tokens(seqs: list[list[str]], L: int) -> list[list[str]]:
    return [t + [PAD] * (L - len(t)) for t in seqs]


def text_input(seqs: list[list[str]], *, d_model: int, positional: bool, pad_to: int = 0,
               kind: str = "text") -> Input:
    """Tokenised lines as one padded batch of embeddings."""
    lengths = [len(t) for t in seqs]
    L = max(max(lengths), pad_to)
    inp = Input(kind, pad_tokens(seqs, L), lengths, None)

    def make_x() -> torch.Tensor:  # after the run's memory plan: nothing of size L is made before it
        t0 = time.perf_counter()
        x = embed_padded(seqs, L, d_model, positional)  # (N, L, E)
        inp.timings_ms["embed"] = (time.perf_counter() - t0) * 1e3
        return x

    inp.embed = make_x
    return inp
