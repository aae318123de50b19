"""Tokenizer-free segmentation: split text into the units attention runs over.

No vocabulary, no model download. Three modes:

- ``word``: runs of letters/digits are one token, each punctuation mark or symbol
  is its own token; whitespace separates.
- ``auto``: like ``word``, but every CJK ideograph, kana and hangul syllable is a
  token of its own (those scripts do not put spaces between words).
- ``char``: every visible character (grapheme) is a token.

In every mode an emoji with its skin-tone modifiers, variation selectors, keycap or
ZWJ sequence stays one token, and control/format characters are dropped.
"""

from __future__ import annotations

import re
import unicodedata

import regex

from attnviz import cache
from attnviz.i18n import _
from attnviz.limits import MAX_LINES, MAX_TOKENS

MODES = ("auto", "word", "char")

# Extended grapheme clusters (UAX #29) from the maintained `regex` module.
_GRAPHEME = regex.compile(r"\X")
# Scripts written without spaces between words: one character is one token in ``auto``.
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Bopomofo}]")
_ZWJ = "\u200d"
LOOKUPS = cache.named("lookups")  # the texts split, beside the embeddings' tables (limits.CACHE_SHARES)


def _is_cjk(ch: str) -> bool:
    return _CJK.match(ch) is not None


def _invisible(cluster: str) -> bool:
    """A cluster made only of format/control code points (zero-width space, BOM, ...)."""
    return all(unicodedata.category(c) in ("Cf", "Cc", "Cs", "Co", "Cn") for c in cluster)


def graphemes(text: str) -> list[str]:
    """Split into user-perceived characters: extended grapheme clusters (UAX #29).

    The text is NFC-normalised first, so decomposed and precomposed spellings give
    the same tokens. A control character (tab, NUL, ...) separates like a space;
    clusters of invisible format characters are dropped, so they never reach a
    label; a zero-width joiner that joins nothing (at the end of a cluster) is dropped.
    """
    if text.isascii():  # every ASCII character is its own cluster, but CR LF (one, a space)
        return [" " if c.isspace() or c < " " or c == "\x7f" else c for c in text.replace("\r\n", "\n")]
    return _clusters(text)


def _clusters(text: str) -> list[str]:
    """``graphemes`` by the UAX #29 rules, for any text."""
    out: list[str] = []
    for g in _GRAPHEME.findall(unicodedata.normalize("NFC", text)):
        if g.isspace():
            out.append(" ")
        elif _invisible(g):
            if any(unicodedata.category(c) == "Cc" for c in g):
                out.append(" ")
        else:
            g = g.rstrip(_ZWJ)
            if g:
                out.append(g)
    return out


def _kind(g: str) -> str:
    """Classify a grapheme by its first code point: space, cjk, word or symbol."""
    first = g[0]
    if first.isspace():
        return "space"
    if _is_cjk(first):
        return "cjk"
    cat = unicodedata.category(first)
    if cat[0] in "LMN" or first == "_":
        return "word"
    return "symbol"  # punctuation, emoji, other symbols: one token each


def tokenize(text: str, mode: str = "auto", *, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Split ``text`` into tokens without a vocabulary.

    >>> tokenize("I love AI")
    ['I', 'love', 'AI']
    >>> tokenize("我爱人工智能")
    ['我', '爱', '人', '工', '智', '能']

    Raises ``ValueError`` for an unknown mode, for text with no tokens, and for
    text with more than ``max_tokens`` tokens.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown tokenization mode {mode!r}; choose one of {', '.join(MODES)}.")
    if not isinstance(text, str):
        raise ValueError("Text must be a string.")
    # A link's text is checked, then run, then rerun: short texts' tokens are cached.
    tokens = list(_split_kept(text, mode) if len(text) <= 4096 else _split(text, mode))
    if not tokens:
        raise ValueError(_("The text is empty: type at least one word."))
    if len(tokens) > max_tokens:
        raise ValueError(_("The text has {n} tokens; the limit is {limit} a line. Shorten the text, or split it into "
                           "lines (up to {lines}), each of at most {limit} tokens.").format(
            n=len(tokens), limit=max_tokens, lines=MAX_LINES))
    return tokens


# ASCII in auto and word modes: runs of letters, digits and _ are words; every other visible
# character is a symbol of its own; spaces and control characters separate. The standard
# library's engine: the pattern is plain ASCII, and it splits a line 2.3x faster than `regex`.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9_]+|[!-/:-@\[-^`{-~]")


def _split(text: str, mode: str) -> tuple[str, ...]:
    if mode != "char" and text.isascii():
        return tuple(_ASCII_TOKEN.findall(text))
    return _split_graphemes(text, mode)


def _split_graphemes(text: str, mode: str) -> tuple[str, ...]:
    tokens: list[str] = []
    current = ""  # the word being built
    current_kind = ""
    for g in graphemes(text):
        kind = _kind(g)
        if mode == "char":
            if kind != "space":
                tokens.append(g)
            continue
        if mode == "auto" and kind == "cjk":
            kind = "single"
        elif mode == "word" and kind == "cjk":
            kind = "word"  # a run of ideographs is one word in word mode
        if kind == "word" and current_kind == "word":
            current += g
            continue
        if current:
            tokens.append(current)
        current, current_kind = "", ""
        if kind == "word":
            current, current_kind = g, "word"
        elif kind in ("single", "symbol"):
            tokens.append(g)
    if current:
        tokens.append(current)
    return tuple(tokens)


def _split_kept(text: str, mode: str) -> tuple[str, ...]:
    """``_split``, kept in the lookups' share of the byte-bounded cache; the text beside its tokens, so that
    the cache counts what its key holds."""
    return LOOKUPS.get_or_compute(("split", text, mode), lambda: (text, _split(text, mode)))[1]
