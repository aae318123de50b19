"""One declaration per setting, carried by the dataclass field that holds it.

A setting is a dataclass field made with ``setting(default, ...)``: its name in links
(``url``), its type (the field's default's type), its bounds or choices (numbers from
``attnviz.limits``), its translatable label and help, and the pages that use it. The
URL parser and writer (``attnviz.settings.url``), the CLI's flags (``attnviz.cli``),
the sidebar's widgets (``ui.sidebar``) and ``validate`` all read these declarations, so a
value refused by one door is refused by every door, with the same words.

Bounds and choices may be callables, for what is only known where the code runs (the
devices of this machine, the installed models). A bound that depends on the run itself
(the heads of the chosen model, the tokens of the chosen text) is not a setting's bound:
the views check it against the run (``attnviz.views.selection``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from functools import cache

from attnviz.i18n import _

ALL_PAGES = ("*",)
# A setting several pages share (the text, the model, the followed head…): read by the pages whose entry in the
# table of pages names it (``attnviz.views.catalogue.Page.reads``), so that no list of page names is kept here.
BY_ENTRY: tuple[str, ...] = ()
# A page's own setting: read by the page whose entry in the table holds its settings class
# (``attnviz.views.catalogue.Page.settings``), so that a page's module need not name its page.
OWN = ("<own>",)


class Reason(ValueError):
    """Why a value was not taken, already worded to follow the setting's name."""


class Unavailable(Reason):
    """A value this machine does not offer (a device, a model, a language): the link's
    warning then uses the setting's own words and lists what is offered."""


@dataclass(frozen=True)
class Spec:
    """What a setting is, apart from the code that uses it."""

    url: str  # its name in links, spec files and (with - for _) CLI flags
    kind: type  # bool, int, float or str
    label: str = ""  # marked for translation (N_), translated where shown
    help: str = ""  # marked for translation too
    lo: float | Callable[[], float] | None = None
    hi: float | Callable[[], float] | None = None
    choices: tuple | Callable[[], tuple] | None = None
    pages: tuple[str, ...] = ALL_PAGES
    convert: Callable[[str, dict], object] | None = None  # text -> value, given the values taken so far
    check_value: Callable[[object], None] | None = None  # extra check of an API value (raises Reason)
    sidebar: bool = False  # drawn in the app's sidebar (ui.sidebar lays out the ones it knows)
    # The default given the other settings' values (by link name): a sentence in the language chosen.
    follows: Callable[[dict], object] | None = None

    def default_for(self, default, values: dict):
        """This setting's default where the other settings hold ``values``."""
        return default if self.follows is None else self.follows(values)

    @property
    def flag(self) -> str:
        return "--" + self.url.replace("_", "-")

    def bounds(self) -> tuple:
        lo = self.lo() if callable(self.lo) else self.lo
        hi = self.hi() if callable(self.hi) else self.hi
        return lo, hi

    def options(self) -> tuple:
        return tuple(self.choices() if callable(self.choices) else self.choices or ())

    def parse(self, raw: str, taken: dict | None = None):
        """Text (a link's value, a flag) -> a checked value; ``Reason`` when it is not one."""
        if self.convert is not None:
            value = self.convert(raw, taken or {})
        elif self.kind is bool:
            value = as_bool(raw)
        elif self.kind is int:
            value = int(raw.strip())
        elif self.kind is float:
            value = float(raw)
        else:
            value = raw
        self.check(value)
        return value

    def check(self, value) -> None:
        """``Reason`` unless ``value`` is within this setting's bounds or choices."""
        lo, hi = self.bounds()
        if self.kind in (int, float) and (lo is not None or hi is not None):
            if isinstance(value, float) and math.isnan(value) or not (lo <= value <= hi):
                raise Reason(_("must be between {lo} and {hi}").format(lo=lo, hi=hi))
        options = self.options()
        if options and value not in options:
            raise Reason(_("must be one of {choices}").format(choices=", ".join(map(str, options))))
        if self.check_value is not None:
            self.check_value(value)


def setting(default, url: str | None = None, **spec):
    """A dataclass field declared as a setting (``url``: its link name; default: the field's name)."""
    return field(default=default, metadata={"spec": spec, "url": url})


@cache
def specs(cls) -> dict[str, tuple[str, Spec, object]]:
    """{link name: (field name, Spec, default)} of a settings dataclass, in field order."""
    out = {}
    for f in fields(cls):
        meta = f.metadata.get("spec")
        if meta is None:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()
        url = f.metadata.get("url") or f.name
        out[url] = (f.name, Spec(url=url, kind=type(default), **meta), default)
    return out


def validate(obj, skip: tuple[str, ...] = ()) -> None:
    """Check every declared setting of ``obj`` (but ``skip``, field names); ``ValueError``
    naming the first that is off."""
    for url, (name, spec, _default) in specs(type(obj)).items():
        if name in skip:
            continue
        value = getattr(obj, name)
        try:
            if spec.kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise Reason(_("must be a number"))
            spec.check(value)
        except Reason as e:
            raise ValueError(_("{name} {reason}, got {value}.").format(name=url, reason=e, value=repr(value)
                                                                      if len(repr(value)) < 60 else
                                                                      repr(value)[:57] + "...")) from None


def layer_head(word: str):
    """A converter: the setting is ``word`` or a head as layer.head (1.0); the run bounds the numbers."""
    def convert(raw: str, taken: dict) -> str:
        raw = raw.strip().lower()
        if raw != word:
            layer, _dot, head = raw.partition(".")
            if not (layer.isdigit() and head.isdigit()):
                raise Reason(_("must be {word} or layer.head, like 1.0").format(word=word))
        return raw
    return convert


def as_bool(raw: str) -> bool:
    s = raw.strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise Reason(_("must be 1 or 0"))


def as_text(raw) -> str:
    """A value as the URL carries it (booleans as 1/0)."""
    return ("1" if raw else "0") if isinstance(raw, bool) else str(raw)
