"""The long texts shipped with attnviz for the Long context page: public-domain works (the opening
of Alice's Adventures in Wonderland, of Pride and Prejudice, and the US Constitution's Preamble and
Article I), a few thousand words each, read from ``attnviz/inputs/texts/``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_DIR = Path(__file__).with_name("texts")
LONG_TEXTS = ("alice", "pride", "constitution")  # the shipped texts, by name (each a file <name>.txt)
LONG_TEXT_TITLES = {"alice": "Alice's Adventures in Wonderland, chapter 1 (Lewis Carroll, 1865)",
                    "pride": "Pride and Prejudice, chapters 1–2 (Jane Austen, 1813)",
                    "constitution": "The US Constitution: Preamble and Article I (1787)"}


def long_texts() -> dict[str, str]:
    """{name: title} of the shipped long texts."""
    return {name: LONG_TEXT_TITLES[name] for name in LONG_TEXTS}


@lru_cache(maxsize=len(LONG_TEXTS))
def long_text(name: str) -> str:
    """The shipped text ``name`` (one of ``LONG_TEXTS``)."""
    if name not in LONG_TEXTS:
        raise ValueError(f"No shipped long text {name!r}; choose one of {', '.join(LONG_TEXTS)}.")
    return (_DIR / f"{name}.txt").read_text(encoding="utf-8")
