"""Headless figures for documentation: ``python -m attnviz render ...``.

    python -m attnviz render --text "I love AI" --heads 4 --mask causal --view grid --out fig.png
    python -m attnviz render --from-url "http://localhost:8501/?text=...&heads=2&view=head" --out fig.svg
    python -m attnviz render --spec docs/figures.toml

Settings have the app's URL names and are validated by the same code
(``attnviz.params``), so a link and a build give the same figure. Bad input: one
line on stderr and exit code 2, no traceback, no partial file.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from .export import (
    ExportError,
    ImageExporter,
    check_writable,
    format_of,
    html_bytes,
    write_atomic,
)
from .params import ViewState, parse, query_dict
from .pipeline import compute
from .views import FIGURE_VIEWS, run_json, style_for, view_figure, weights_csv

# CLI flag (dest) -> URL parameter name
FLAG_PARAMS = {
    "text": "text", "heads": "heads", "d_model": "d_model", "mask": "mask", "window": "window",
    "pad_to": "pad_to", "seed": "seed", "dropout": "dropout", "positional": "positional",
    "tokenize": "tokenize", "device": "device", "view": "view", "head": "head", "query": "query",
    "seq": "seq", "colors": "colors", "present": "present",
}  # fmt: skip
OUTPUT_KEYS = ("out", "width", "height", "scale", "theme", "from_url")
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1000, 700


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


@dataclass
class Job:
    """One figure to write."""

    state: ViewState
    out: Path
    width: int = DEFAULT_WIDTH
    height: int | None = None
    scale: float = 1.0
    theme: str = "light"


def state_from(settings: dict, from_url: str | None = None) -> ViewState:
    """URL parameters (from a link, then overridden by ``settings``) -> ViewState.

    Unlike the app, which falls back to defaults with a warning, a build stops on the
    first invalid value: a docs figure should never silently change.
    """
    raw = query_dict(from_url) if from_url else {}
    for key, value in settings.items():
        if value is None:
            continue
        if key not in FLAG_PARAMS:
            raise UsageError(f"Unknown setting {key!r}; known: {', '.join(sorted(FLAG_PARAMS))}, "
                             f"{', '.join(OUTPUT_KEYS)}.")
        raw[FLAG_PARAMS[key]] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    state, warnings = parse(raw)
    if warnings:
        raise UsageError(_cli_wording(warnings[0]))
    return state


def _cli_wording(warning: str) -> str:
    """The app's fallback warning, worded as an error for a build."""
    head, _, _ = warning.partition("; using the default")
    head, _, _ = head.partition("; running on cpu")
    return head.replace("URL parameter ", "Setting ").replace("`", "") + "."


def figure_for(job: Job) -> go.Figure:
    """The figure the app shows for ``job.state`` (its ``view``), sized for export."""
    state = job.state
    view = "head" if state.view == "table" else state.view  # the app's table is head h's numbers
    if view not in FIGURE_VIEWS:
        raise UsageError(f"Unknown view {view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")
    result = _compute(state)
    return view_figure(result, state, view, style=style_for(state, theme=job.theme))


def _compute(state: ViewState):
    try:
        return compute(state.config())
    except ValueError as e:
        raise UsageError(str(e)) from None


def start_job(job: Job, exporter: ImageExporter):
    """Validate ``job`` and compute its figure; returns a function that gives the file's
    bytes (for an image, the Chromium render happens then)."""
    if job.theme not in ("light", "dark"):
        raise UsageError(f"Unknown theme {job.theme!r}; use light or dark.")
    if not (100 <= job.width <= 10_000) or (job.height is not None and not 100 <= job.height <= 10_000):
        raise UsageError("Width and height must be between 100 and 10000 pixels.")
    if not 0.1 <= job.scale <= 10:
        raise UsageError(f"Scale must be between 0.1 and 10, got {job.scale}.")
    fmt = format_of(job.out)
    check_writable(job.out)
    if fmt in ("json", "csv"):
        result = _compute(job.state)
        data = (run_json(result) if fmt == "json" else weights_csv(result)).encode("utf-8")
        return lambda: data
    fig = figure_for(job)
    if fmt == "html":
        data = html_bytes(fig)
        return lambda: data
    height = int(job.height or fig.layout.height or DEFAULT_HEIGHT)
    return lambda: exporter.render(fig, fmt, width=job.width, height=height, scale=job.scale)


def run_job(job: Job, exporter: ImageExporter) -> None:
    write_atomic(job.out, start_job(job, exporter)())


# --- spec files ------------------------------------------------------------------


def load_spec(path: Path) -> list[tuple[str, dict]]:
    """``[defaults]`` plus ``[[figure]]`` tables -> [(label, settings)]."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"Spec file {path} does not exist.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"Spec file {path} is not valid TOML: {e}.") from None
    figures = data.get("figure")
    if not isinstance(figures, list) or not figures or not all(isinstance(f, dict) for f in figures):
        raise UsageError(f"Spec file {path} has no [[figure]] tables.")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"Spec file {path}: [defaults] must be a table.")
    out = []
    for i, fig in enumerate(figures, 1):
        settings = {**defaults, **fig}
        out.append((str(settings.get("out", f"figure {i}")), settings))
    return out


def job_from_settings(settings: dict, base: Path) -> Job:
    settings = dict(settings)
    out = settings.pop("out", None)
    if not out:
        raise UsageError("Every figure needs an `out` path.")
    width = settings.pop("width", DEFAULT_WIDTH)
    height = settings.pop("height", None)
    scale = settings.pop("scale", 1.0)
    theme = settings.pop("theme", "light")
    from_url = settings.pop("from_url", None)
    if not isinstance(width, int) or (height is not None and not isinstance(height, int)):
        raise UsageError("width and height must be whole numbers of pixels.")
    out_path = Path(out) if Path(out).is_absolute() else base / out
    return Job(state_from(settings, from_url), out_path, width, height, float(scale), theme)


def _bar(done: int, total: int, label: str) -> str:
    filled = round(20 * done / total)
    return f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total} {label}"


def run_spec(path: Path) -> int:
    """Render every figure of a spec file; the others are written when one fails."""
    entries = load_spec(path)
    failures: list[str] = []
    t0 = time.perf_counter()
    base = path.resolve().parent
    with ImageExporter() as exporter:
        # Validate and compute every entry first: a broken entry is known before any image.
        started = []
        for label, settings in entries:
            try:
                job = job_from_settings(settings, base)
                started.append((label, job.out, start_job(job, exporter)))
            except (UsageError, ExportError, OSError) as e:
                started.append((label, None, e))
        for i, (label, out, finish) in enumerate(started, 1):
            try:
                if isinstance(finish, Exception):
                    raise finish
                write_atomic(out, finish())
                status = "ok"
            except (UsageError, ExportError, OSError) as e:
                failures.append(f"{label}: {e}")
                status = "FAILED"
            print(_bar(i, len(entries), f"{label} {status}"), file=sys.stderr, flush=True)
    took = time.perf_counter() - t0
    if failures:
        print(f"attnviz: {len(failures)} of {len(entries)} figures failed (the others were written):",
              file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 2
    print(f"attnviz: wrote {len(entries)} figures in {took:.1f} s", file=sys.stderr)
    return 0


# --- command line ----------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage otherwise)
        raise UsageError(message[0].upper() + message[1:] + ". See --help.")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attnviz", description="See multi-head attention work: figures from the command line.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("render", help="render one figure (or a batch from a spec file)",
                       description="Render a view of an attention run to .png, .svg, .html, .json or .csv.")
    r.add_argument("--text", help="one sentence per line")
    r.add_argument("--heads", type=int)
    r.add_argument("--d-model", dest="d_model", type=int)
    r.add_argument("--mask", help="none | causal | padding | window | causal+window")
    r.add_argument("--window", type=int)
    r.add_argument("--pad-to", dest="pad_to", type=int)
    r.add_argument("--seed", type=int)
    r.add_argument("--dropout", type=float)
    r.add_argument("--positional", action=argparse.BooleanOptionalAction, default=None)
    r.add_argument("--tokenize", help="auto | word | char")
    r.add_argument("--device")
    r.add_argument("--view", help=f"{' | '.join(FIGURE_VIEWS)} (default grid)")
    r.add_argument("--head", type=int, help="the head for --view head")
    r.add_argument("--query", type=int, help="the query position for --view query")
    r.add_argument("--seq", type=int, help="which sentence of a multi-line text")
    r.add_argument("--colors", help="colour scale, e.g. Viridis, Cividis")
    r.add_argument("--present", action="store_true", default=None, help="presenter-size fonts")
    r.add_argument("--from-url", dest="from_url", help="a link (or query string) of the app to reproduce")
    r.add_argument("--out", help="output file; the extension picks the format")
    r.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    r.add_argument("--height", type=int)
    r.add_argument("--scale", type=float, default=1.0)
    r.add_argument("--theme", default="light", help="light | dark")
    r.add_argument("--spec", help="a TOML file with a [[figure]] table per figure")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.spec:
            return run_spec(Path(args.spec))
        if not args.out:
            raise UsageError("Give --out FILE (its extension picks the format) or --spec FILE.")
        settings = {k: getattr(args, k) for k in FLAG_PARAMS}
        job = Job(state_from(settings, args.from_url), Path(args.out), args.width, args.height,
                  args.scale, args.theme)
        with ImageExporter() as exporter:
            run_job(job, exporter)
        return 0
    except (UsageError, ExportError) as e:
        print(f"attnviz: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"attnviz: cannot write output: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
