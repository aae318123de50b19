"""Showing user text in Markdown (the app's captions, messages and tables) without letting it
become Markdown: every caption a view writes passes a token, a model name or a probe through
``md``.

Streamlit renders Markdown (links, images, emphasis), LaTeX between ``$`` signs and
its own directives (``:red[…]``, ``:material/…:``) in ``st.markdown``, ``st.caption``,
``st.warning`` and friends. A token or a URL value shown there must be escaped, or
``[Sign in](https://…)`` becomes a live link.
"""

from __future__ import annotations

import re

# Every ASCII punctuation mark may be backslash-escaped in CommonMark; escaping all
# of them is simpler and safer than guessing which ones a renderer treats specially.
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
# GitHub-flavoured Markdown also turns bare "https://…", "www.…" and "a@b.c" into links,
# escapes or not: an invisible zero-width space after ":" and "@" and inside "www."
# breaks those patterns without changing what the reader sees.
_AUTOLINK = re.compile(r"(?<=[:@])|(?i:(?<=www)(?=\.))")
_ZWSP = "\u200b"


def md(text: str) -> str:
    """``text`` shown literally in Markdown: punctuation escaped, autolinks defused,
    line breaks as spaces."""
    flat = " ".join(str(text).split())  # newlines would start lists or headings
    return _PUNCT.sub(r"\\\1", _AUTOLINK.sub(_ZWSP, flat))


def quoted(token: str) -> str:
    """A token inside typographic quotes, escaped: “it”."""
    return f"“{md(token)}”"
