"""Command-line flags made from the settings' declarations: one flag per setting, with the
same name (``--pad-to`` for ``pad_to``), type, bounds and choices as the links."""

from __future__ import annotations

import argparse

from attnviz.limits import MAX_LINES, MAX_TOKENS


def add_flags(parser: argparse.ArgumentParser, table: dict, notes: dict[str, str] | None = None,
              name=lambda url, entry: url) -> None:
    """A flag per entry of ``table`` ({link name: Entry}, ``attnviz.settings.url.table``);
    ``name(url, entry)`` picks the flag's name (default: the link name) and its dest."""
    for url, entry in table.items():
        spec, dest = entry.spec, name(url, entry)
        help_text = _plain(spec.help or spec.label)
        options = spec.options() if not callable(spec.choices) else ()
        if options:
            help_text += f" (one of: {' | '.join(map(str, options))})"
        lo, hi = spec.bounds()
        if lo is not None:
            help_text += f" ({lo}–{hi})"
        help_text += (notes or {}).get(url, "")
        flag = "--" + dest.replace("_", "-")
        if spec.kind is bool:
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            parser.add_argument(flag, dest=dest, type=spec.kind if spec.kind in (int, float) else str,
                                help=help_text.replace("%", "%%"))


def _plain(text: str) -> str:
    """A declaration's help as the CLI prints it (English, limits filled in)."""
    return text.format(lines=MAX_LINES, tokens=MAX_TOKENS) if "{" in text else text
