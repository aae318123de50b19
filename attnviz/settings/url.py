"""Links <-> settings, derived from the declarations (``attnviz.settings.spec``).

``table(cls)`` flattens a settings dataclass, including the settings dataclasses nested
in it, into {link name: Entry}; ``parse`` and ``to_query`` read and write links through
it. Query parameters always arrive as text: invalid or missing values fall back to
their defaults, and each fallback is reported as a warning naming the parameter.

Each warning is a ``ParamWarning``: the setting, the value as it came and why it was not taken,
as values, plus the sentence the app shows. The app shows that sentence; the CLI, which stops
where the app falls back, words its own error from the fields. The sentence quotes the user's
value as it came: whoever shows it in Markdown must escape it (``attnviz.views.markdown.md``),
or a value such as ``[Sign in](https://…)`` becomes a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cache
from urllib.parse import parse_qsl, urlsplit

from attnviz.i18n import _
from attnviz.settings.spec import Reason, Spec, Unavailable, as_text, specs


@dataclass(frozen=True)
class ParamWarning:
    """A link's value that was not taken: as values, and as the sentence the app shows for it."""

    name: str  # the setting's link name
    value: str  # the value as the link gave it, uncut
    reason: str  # why it was not taken, worded to follow "name=value": "is not a number"
    text: str  # the app's sentence: the setting, the value (quoted, cut short), the reason and the fallback
    # The values this machine offers, where the value was a device, a model or a language it does not
    # offer (spec.Unavailable); None for a value that is wrong everywhere.
    offered: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Entry:
    path: tuple[str, ...]  # field names from the outer dataclass in: ("config", "num_heads")
    spec: Spec
    default: object


@cache
def table(cls) -> dict[str, Entry]:
    """Every setting of ``cls`` and of the settings dataclasses it holds, by link name."""
    out: dict[str, Entry] = {}
    own = specs(cls)
    by_field = {name: (url, spec, default) for url, (name, spec, default) in own.items()}
    for f in fields(cls):
        if f.name in by_field:
            url, spec, default = by_field[f.name]
            _add(out, url, Entry((f.name,), spec, default))
        elif is_dataclass(f.default):
            for url, e in table(type(f.default)).items():
                _add(out, url, Entry((f.name, *e.path), e.spec, e.default))
    return out


def _add(out: dict[str, Entry], url: str, entry: Entry) -> None:
    if url in out:  # two settings under one link name: the later would silently replace the former
        raise TypeError(f"Two settings use the link name {url!r}: {'.'.join(out[url].path)} and "
                        f"{'.'.join(entry.path)}; give one a url= of its own.")
    out[url] = entry


def get(obj, entry: Entry):
    for name in entry.path:
        obj = getattr(obj, name)
    return obj


def set_values(obj, values: Mapping[str, object]):
    """``obj`` with settings changed by link name (nested settings included)."""
    entries = table(type(obj))
    unknown = [k for k in values if k not in entries]
    if unknown:
        raise TypeError(f"Unknown setting(s) {', '.join(unknown)}.")
    nested: dict[str, dict] = {}
    own = {}
    for url, value in values.items():
        path = entries[url].path
        if len(path) == 1:
            own[path[0]] = value
        else:
            nested.setdefault(path[0], {})[url] = value
    for name, sub in nested.items():
        own[name] = set_values(getattr(obj, name), sub)
    return replace(obj, **own)


def to_query(obj) -> dict[str, str]:
    """Every setting as the string the URL carries (booleans as 1/0)."""
    return {url: as_text(get(obj, e)) for url, e in table(type(obj)).items()}


def flatten(params: Mapping) -> dict[str, str]:
    """Streamlit's query params and parse_qs give str or list[str]: take the last."""
    out = {}
    for k, v in params.items():
        if isinstance(v, (list, tuple)):
            if not v:
                continue
            v = v[-1]
        out[str(k)] = str(v)
    return out


def shown(raw: str) -> str:
    """The user's value, quoted and cut short, for a message (never interpreted)."""
    raw = raw if len(raw) <= 40 else raw[:37] + "..."
    return '"' + raw.replace("\n", " ") + '"'


def reason(e: Exception) -> str:
    if isinstance(e, Reason):
        return str(e)
    msg = str(e)
    if msg.startswith(("invalid literal", "could not convert", "Exceeds the limit")) or isinstance(e, OverflowError):
        return _("is not a number")
    msg = msg.rstrip(".")
    return _("is invalid: {reason}").format(reason=msg if len(msg) <= 200 else msg[:197] + "...")


def parse(cls, params: Mapping, fallbacks: Mapping[str, str] | None = None) -> tuple[object, list[ParamWarning]]:
    """Query parameters -> (an instance of ``cls``, warnings). Never raises on bad input.

    Settings are read in declaration order, so a setting's converter sees the ones before
    it (``heads`` sees ``d_model``). ``fallbacks``: per link name, a warning of its own
    (formatted with ``value`` and ``choices``) for a value that is not among those this
    machine offers.
    """
    p = flatten(params)
    defaults = cls()
    warnings: list[ParamWarning] = []
    values: dict[str, object] = {}
    for url, entry in table(cls).items():
        if url not in p:
            continue
        try:
            values[url] = entry.spec.parse(p[url], values)
        except (ValueError, TypeError, OverflowError) as e:
            why, offered = reason(e), None
            if fallbacks and url in fallbacks and isinstance(e, Unavailable):
                offered = tuple(map(str, entry.spec.options()))
                why = _("must be one of {choices}").format(choices=", ".join(offered))  # Unavailable has no words
                text = _(fallbacks[url]).format(value=shown(p[url][:20]), choices=", ".join(offered))
            else:
                default = as_text(get(defaults, entry)).replace("\n", " ") or "none"
                text = _("URL parameter {name}={value} {reason}; using the default ({default}).").format(
                    name=url, value=shown(p[url]), reason=why, default=f"{default:.40}")
            warnings.append(ParamWarning(url, p[url], why, text, offered))
    return set_values(defaults, values), warnings


def query_dict(url_or_query: str) -> dict[str, str]:
    """A full URL or a bare query string (with or without a leading ``?``) -> its parameters."""
    s = url_or_query.strip()
    query = urlsplit(s).query if "://" in s or s.startswith("/") else s.lstrip("?")
    return dict(parse_qsl(query, keep_blank_values=True))
