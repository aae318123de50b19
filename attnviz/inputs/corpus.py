"""A corpus of sentences for the Q/K map: the shipped default, or lines a user gives.

``default_corpus()`` reads ``corpus.txt`` beside this module: a few hundred short sentences
written from templates by ``scripts/make_corpus.py`` (English statements, questions,
names and numbers, repeated-word sentences, Chinese, Japanese and Korean). ``read_corpus``
checks pasted text or an uploaded .txt (one sentence a line) against the bounds in
``attnviz.limits`` and refuses beyond them with a one-line message.
"""

from __future__ import annotations

import hashlib
import unicodedata
from functools import cache
from pathlib import Path

from attnviz.i18n import _
from attnviz.limits import MAX_CORPUS_BYTES, MAX_CORPUS_LINE_CHARS, MAX_CORPUS_LINES

CORPUS_FILE = Path(__file__).resolve().parent / "corpus.txt"


@cache
def _default() -> tuple[str, ...]:
    return tuple(read_corpus(CORPUS_FILE.read_text(encoding="utf-8")))


def default_corpus() -> list[str]:
    """The shipped sentences, in file order."""
    return list(_default())


def read_corpus(text: str | bytes) -> list[str]:
    """The non-blank lines of ``text`` (a .txt's bytes must be UTF-8), NFC-normalised and
    stripped, each a sentence; ``ValueError`` naming the bound that is passed."""
    if isinstance(text, bytes):
        if len(text) > MAX_CORPUS_BYTES:
            raise ValueError(_("The file has {kb:,.0f} KB; the corpus limit is {limit:,.0f} KB.").format(
                kb=len(text) / 1024, limit=MAX_CORPUS_BYTES / 1024))
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError(_("The file is not UTF-8 text: save it as UTF-8, one sentence a line.")) from None
    if len(text.encode("utf-8")) > MAX_CORPUS_BYTES:
        raise ValueError(_("The corpus has {kb:,.0f} KB of text; the limit is {limit:,.0f} KB.").format(
            kb=len(text.encode("utf-8")) / 1024, limit=MAX_CORPUS_BYTES / 1024))
    lines = []
    for raw in text.splitlines():
        line = " ".join(unicodedata.normalize("NFC", raw).split())  # control characters act as spaces
        if line:
            lines.append(line)
    if not lines:
        raise ValueError(_("The corpus is empty: give at least one sentence, one a line."))
    if len(lines) > MAX_CORPUS_LINES:
        raise ValueError(_("The corpus has {n} sentences; the limit is {limit}.").format(
            n=len(lines), limit=MAX_CORPUS_LINES))
    for i, line in enumerate(lines, 1):
        if len(line) > MAX_CORPUS_LINE_CHARS:
            raise ValueError(_("Sentence {i} has {n} characters; the limit is {limit} per sentence.").format(
                i=i, n=len(line), limit=MAX_CORPUS_LINE_CHARS))
    return lines


def corpus_digest(lines: list[str] | tuple[str, ...]) -> str:
    """A short name for these sentences (a cache key that does not hold the text)."""
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]
