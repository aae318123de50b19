"""Two languages, English and 简体中文, with gettext (catalogues made with Babel).

One server process answers sessions in different languages at once, so the language
is not global: it is a context variable, set at the start of every script run (and by
the CLI's ``--lang``), and ``_()`` reads it::

    from attnviz.i18n import _, use
    with use("zh"):
        _("Attention explorer")  # '注意力探索器'

Messages are written in English in the source; ``make i18n`` extracts them into
``attnviz/locale/attnviz.pot``, updates ``attnviz/locale/zh/LC_MESSAGES/attnviz.po`` and
compiles the ``.mo`` that ships with the package. To add a language: add its code to
``LANGUAGES``, run ``pybabel init -D attnviz -i attnviz/locale/attnviz.pot -d
attnviz/locale -l CODE``, translate the ``.po`` file, then ``make i18n``.

May import: nothing of attnviz.
"""

from __future__ import annotations

import gettext
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

DOMAIN = "attnviz"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES = {"en": "English", "zh": "简体中文"}
DEFAULT = "en"

_current: ContextVar[str] = ContextVar("attnviz_lang", default=DEFAULT)


@lru_cache(maxsize=len(LANGUAGES))  # one catalogue per language offered
def _translations(lang: str) -> gettext.NullTranslations:
    if lang == DEFAULT:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang], fallback=True)


def set_language(lang: str) -> None:
    """Use ``lang`` in this thread/context from now on (unknown codes: English)."""
    _current.set(lang if lang in LANGUAGES else DEFAULT)


def language() -> str:
    return _current.get()


@contextmanager
def use(lang: str):
    token = _current.set(lang if lang in LANGUAGES else DEFAULT)
    try:
        yield
    finally:
        _current.reset(token)


def _(message: str) -> str:
    """``message`` in the current language."""
    return _translations(_current.get()).gettext(message)


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it here (translated where shown)."""
    return message


def catalogue(lang: str = "zh") -> dict[str, str]:
    """msgid -> msgstr of ``lang``'s compiled catalogue (for tests)."""
    t = _translations(lang)
    return dict(getattr(t, "_catalog", {}))


def fixed() -> Callable[[str], str]:
    """``_`` bound to the current language, for callbacks that run later or elsewhere
    (a widget's ``format_func``), where the context may differ."""
    translations = _translations(_current.get())
    return translations.gettext
