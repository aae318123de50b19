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

import unicodedata

MODES = ("auto", "word", "char")
DEFAULT_MAX_TOKENS = 512

_ZWJ = 0x200D


def _is_cjk(cp: int) -> bool:
    """Scripts written without spaces: one character is one token in ``auto``."""
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= cp <= 0x4DBF  # extension A
        or 0x20000 <= cp <= 0x3134F  # extensions B..G
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0x3040 <= cp <= 0x30FF  # hiragana, katakana
        or 0x31F0 <= cp <= 0x31FF  # katakana phonetic extensions
        or 0xFF66 <= cp <= 0xFF9F  # half-width katakana
        or 0xAC00 <= cp <= 0xD7AF  # hangul syllables
        or 0x1100 <= cp <= 0x11FF  # hangul jamo
    )


def _extends_grapheme(cp: int, ch: str) -> bool:
    """Code points that belong to the character before them."""
    return (
        unicodedata.category(ch) in ("Mn", "Me", "Mc")  # combining marks, keycap 20E3
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences (flags of regions)
    )


def _is_regional_indicator(cp: int) -> bool:
    return 0x1F1E6 <= cp <= 0x1F1FF


def graphemes(text: str) -> list[str]:
    """Split into user-perceived characters (a practical subset of UAX #29).

    Keeps together: base + combining marks, emoji + modifiers/selectors, ZWJ
    sequences, and pairs of regional indicators (flags). Drops control and format
    characters other than ZWJ, so they never reach a label.
    """
    out: list[str] = []
    join_next = False
    for ch in text:
        cp = ord(ch)
        if cp == _ZWJ:
            if out:
                out[-1] += ch
                join_next = True
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn") and not ch.isspace():
            if 0xE0020 <= cp <= 0xE007F and out:  # emoji tags are Cf but belong to the flag
                out[-1] += ch
            elif cat == "Cc":  # a control character separates like a space
                out.append(" ")
                join_next = False
            continue
        if out and (join_next or (_extends_grapheme(cp, ch) and not out[-1].isspace())):
            out[-1] += ch
        elif (
            out
            and _is_regional_indicator(cp)
            and len(out[-1]) == 1
            and _is_regional_indicator(ord(out[-1]))
        ):
            out[-1] += ch
        else:
            out.append(ch)
        join_next = False
    return out


def _kind(g: str) -> str:
    """Classify a grapheme by its first code point: space, cjk, word or symbol."""
    first = g[0]
    if first.isspace():
        return "space"
    if _is_cjk(ord(first)):
        return "cjk"
    cat = unicodedata.category(first)
    if cat[0] in "LMN" or first == "_":
        return "word"
    return "symbol"  # punctuation, emoji, other symbols: one token each


def tokenize(text: str, mode: str = "auto", *, max_tokens: int = DEFAULT_MAX_TOKENS) -> list[str]:
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
    if not tokens:
        raise ValueError("The text is empty: type at least one word.")
    if len(tokens) > max_tokens:
        raise ValueError(
            f"The text has {len(tokens)} tokens; the limit is {max_tokens}. "
            "Shorten the text (or raise the token cap)."
        )
    return tokens
