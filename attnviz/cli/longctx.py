"""``render --page long-context``: a model's attention over a long text file (``attnviz.views.longcontext``),
written as every number the view draws (``.json``) or its figures (``.png``/``.svg``: the small multiples;
``.html``: every figure). Bad input raises ``UsageError``: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from attnviz.atomic import write_atomic
from attnviz.cli.render import UsageError
from attnviz.notebook.page import to_html
from attnviz.plots.export import ImageExporter, check_writable, format_of
from attnviz.plots.style import FigureStyle
from attnviz.views.longcontext import (
    LONG_TEXTS,
    LongSettings,
    long_figures,
    long_record,
    long_text,
    read_text_file,
    run_long,
)

FORMATS = ("json", "png", "svg", "html")
LONG_NAMES = ("text", "blocks", "policy", "ratio", "layer", "head", "q0", "k0")  # LongSettings' fields, --long-<name>


def settings_of(args) -> LongSettings:
    given = {name: getattr(args, "long_" + name, None) for name in LONG_NAMES}
    settings = LongSettings().with_(**{k: v for k, v in given.items() if v is not None})
    try:
        settings.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return settings


def long_command(args) -> int:
    if not args.out:
        raise UsageError("Give --out FILE (.json, .png, .svg or .html).")
    sample = args.long_text if args.long_text in LONG_TEXTS else None
    if not args.text_file and sample is None:
        raise UsageError("The long-context page reads a text file: give --text-file FILE (or --long-text "
                         f"{' | '.join(LONG_TEXTS)}, a shipped text).")
    fmt = format_of(args.out)
    if fmt not in FORMATS:
        raise UsageError(f"The long-context page writes .{', .'.join(FORMATS)}, not .{fmt}.")
    path = Path(args.text_file) if args.text_file else None
    if path is not None and not path.is_file():
        raise UsageError(f"--text-file {args.text_file}: no such file.")
    settings = settings_of(args)
    check_writable(args.out)
    try:
        text = read_text_file(path.read_bytes(), f"--text-file {path.name}") if path else long_text(sample)
        result, kept = run_long(args.model or "random", text, settings)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if fmt == "json":
        data = json.dumps(long_record(result, kept, settings)).encode("utf-8")
    else:
        figs = long_figures(result, kept, settings, FigureStyle(theme=args.theme))
        if fmt == "html":
            data = to_html(figs, title=f"attnviz: long context of {result.model}").encode("utf-8")
        else:
            with ImageExporter() as exporter:
                fig = figs[0]
                data = exporter.render(fig, fmt, width=args.width, height=int(args.height or fig.layout.height or 700),
                                       scale=args.scale)
    write_atomic(Path(args.out), data)
    return 0
