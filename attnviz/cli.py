"""Headless figures for documentation: ``python -m attnviz render ...``.

    python -m attnviz render --text "I love AI" --heads 4 --mask causal --view grid --out fig.png
    python -m attnviz render --from-url "http://localhost:8501/?text=...&heads=2&view=head" --out fig.svg
    python -m attnviz render --from-url "http://localhost:8501/mask-lab?masks=causal,window" --out masks.png
    python -m attnviz render --spec docs/figures.toml

Every flag is a setting of the app's links, made from its one declaration
(``attnviz.views.state``), so a link and a build give the same figure; a link to a
teaching page renders that page's main figure (``attnviz.views.pages.page_figure``).
Bad input: one line on stderr and exit code 2, no traceback, no partial file. In a spec
batch a bad entry is reported and the others are still written; every ``out`` must stay
inside the spec file's folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from attnviz.i18n import use
from attnviz.learn.train import LearnSettings
from attnviz.limits import MAX_UPLOAD_BYTES
from attnviz.plots.export import (
    ExportError,
    ImageExporter,
    check_writable,
    format_of,
    html_bytes,
    write_atomic,
)
from attnviz.settings.flags import add_flags
from attnviz.settings.url import table
from attnviz.views.files import run_json, weights_csv
from attnviz.views.pages import page_figure, page_result
from attnviz.views.qkmap import qk_record_json
from attnviz.views.registry import FIGURE_VIEWS, INPUT_PAGES, PAGE_NAMES, page_of
from attnviz.views.selection import selection_problems, style_for
from attnviz.views.state import SETTINGS, ViewState, parse, query_dict

OUTPUT_KEYS = ("out", "width", "height", "scale", "theme", "from_url", "page", "image", "audio")
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
    page: str = "explorer"
    data: bytes | None = None  # an image or WAV file, for the modality pages


def state_from(settings: dict, from_url: str | None = None) -> ViewState:
    """URL parameters (from a link, then overridden by ``settings``) -> ViewState.

    Unlike the app, which falls back to defaults with a warning, a build stops on the
    first invalid value: a docs figure should never silently change.
    """
    raw = query_dict(from_url) if from_url else {}
    folder = None
    for key, value in settings.items():
        if value is None:
            continue
        if key == "model" and isinstance(value, str) and ("/" in value or Path(value).is_dir()):
            folder = value  # a model folder: the API and the CLI take paths, a URL never does
            if not Path(value).is_dir():
                raise UsageError(f"Model folder {value} does not exist.")
            continue
        if key not in SETTINGS:
            raise UsageError(f"Unknown setting {key!r}; known: {', '.join(sorted(SETTINGS))}, "
                             f"{', '.join(OUTPUT_KEYS)}.")
        raw[key] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    state, warnings = parse(raw)
    if warnings:
        raise UsageError(_cli_wording(warnings[0]))
    return state if folder is None else state.with_(model=folder)


def _cli_wording(warning: str) -> str:
    """The app's fallback warning, worded as an error for a build."""
    head, _, _ = warning.partition("; using the default")
    head, _, _ = head.partition("; running on cpu")
    head, _, _ = head.partition("; using the random model")
    head, _, _ = head.partition("; using English")
    return head.replace("URL parameter ", "Setting ").replace("`", "") + "."


def figure_for(job: Job) -> go.Figure:
    """The figure the app shows for ``job.state`` on ``job.page`` (the explorer: its
    ``view``), sized for export, in the state's language."""
    with use(job.state.lang):
        return _figure_for(job)


def _figure_for(job: Job) -> go.Figure:
    state = job.state
    if job.page in ("explorer", *INPUT_PAGES) and state.view not in (*FIGURE_VIEWS, "table"):
        raise UsageError(f"Unknown view {state.view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")
    try:
        return page_figure(job.page, state, style_for(state, theme=job.theme), data=job.data)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _compute(job: Job):
    """The run behind ``job`` (cross-attention for that page) and the state it is read with, its selection checked."""
    try:
        result, state = page_result(job.page, job.state, job.data)
    except ValueError as e:
        raise UsageError(str(e)) from None
    problems = selection_problems(result, state)
    if problems:
        raise UsageError(next(iter(problems.values())) + ".")
    return result, state


def start_job(job: Job, exporter: ImageExporter):
    """Validate ``job`` and compute its figure; returns a function that gives the file's
    bytes (for an image, the Chromium render happens then)."""
    if job.theme not in ("light", "dark"):
        raise UsageError(f"Unknown theme {job.theme!r}; use light or dark.")
    if not (100 <= job.width <= 10_000) or (job.height is not None and not 100 <= job.height <= 10_000):
        raise UsageError("Width and height must be between 100 and 10000 pixels.")
    if not 0.1 <= job.scale <= 10:
        raise UsageError(f"Scale must be between 0.1 and 10, got {job.scale}.")
    if job.page not in PAGE_NAMES:
        raise UsageError(f"Unknown page {job.page!r}; choose one of {', '.join(PAGE_NAMES)}.")
    fmt = format_of(job.out)
    check_writable(job.out)
    if fmt in ("json", "csv"):  # a ValueError is one line too (main)
        if job.page == "qk-map":  # every point, the agreement and its baseline
            data = qk_record_json(job.state, fmt)
        else:  # a view with numbers of its own (norms, neurons) adds them
            result, state = _compute(job)
            with use(job.state.lang):
                data = (run_json(result, state) if fmt == "json" else weights_csv(result)).encode("utf-8")
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


def _inside(out, base: Path, key: str = "out") -> Path:
    """A spec's ``out`` (or input file): a relative path that stays inside the spec
    file's folder, so a shared figures file cannot write (or read) anywhere else."""
    if not isinstance(out, str) or not out.strip():
        raise UsageError(f"`{key}` must be a file name (text), got {out!r}.")
    rel = Path(out)
    if rel.is_absolute() or ".." in rel.parts:
        raise UsageError(f"`{key}` {out!r} must be a relative path inside the spec file's folder (no '..').")
    path = base / rel
    if not path.resolve().is_relative_to(base.resolve()):  # a symbolic link pointing out
        raise UsageError(f"`{key}` {out!r} leads outside the spec file's folder.")
    return path


def _whole(name: str, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"`{name}` must be a whole number of pixels, got {value!r}.")
    return value


def job_from_settings(settings: dict, base: Path) -> Job:
    settings = dict(settings)
    out_path = _inside(settings.pop("out", None), base)
    width = _whole("width", settings.pop("width", DEFAULT_WIDTH))
    height = _whole("height", settings.pop("height", None))
    scale = settings.pop("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise UsageError(f"`scale` must be a number, got {scale!r}.")
    theme = settings.pop("theme", "light")
    if not isinstance(theme, str):
        raise UsageError(f"`theme` must be light or dark, got {theme!r}.")
    from_url = settings.pop("from_url", None)
    if from_url is not None and not isinstance(from_url, str):
        raise UsageError(f"`from_url` must be a link (text), got {from_url!r}.")
    page = settings.pop("page", None)
    if page is not None and not isinstance(page, str):
        raise UsageError(f"`page` must be one of {', '.join(PAGE_NAMES)}, got {page!r}.")
    data = None
    for key, kind in (("image", "image-patches"), ("audio", "audio-frames")):
        path = settings.pop(key, None)
        if path is not None:
            source = _inside(path, base, key).resolve()  # a shared spec reads only files beside it
            if not source.is_file():
                raise UsageError(f"`{key}` {path!r}: no such file beside the spec.")
            data, page = source.read_bytes()[: 64 * 2**20], page or kind
    page = page or (page_of(from_url) if from_url else "explorer")
    return Job(state_from(settings, from_url), out_path, width, height, float(scale), theme, page, data)


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
            except Exception as e:  # noqa: BLE001 - reported with the others, after the good ones
                started.append((label, None, e))
        for i, (label, out, finish) in enumerate(started, 1):
            try:
                if isinstance(finish, Exception):
                    raise finish
                write_atomic(out, finish())
                status = "ok"
            except Exception as e:  # noqa: BLE001 - one bad entry never stops the batch
                failures.append(f"{label}: {_one_line(e)}")
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
    add_flags(r, SETTINGS, _FLAG_NOTES)
    r.add_argument("--page", choices=PAGE_NAMES, help="whose main figure to render (default: from --from-url, "
                                                       "else the explorer)")
    r.add_argument("--image", help="image patches: a PNG or JPEG file (or --image-sample NAME)")
    r.add_argument("--audio", help="audio frames: a WAV file (or --audio-sample NAME)")
    r.add_argument("--attention", help="an attention file (.safetensors or .npz, from attnviz.save_attention)")
    r.add_argument("--from-url", dest="from_url", help="a link (or query string) of the app to reproduce")
    r.add_argument("--out", help="output file; the extension picks the format")
    r.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    r.add_argument("--height", type=int)
    r.add_argument("--scale", type=float, default=1.0)
    r.add_argument("--theme", default="light", help="light | dark")
    r.add_argument("--spec", help="a TOML file with a [[figure]] table per figure")
    lr = sub.add_parser("learn", help="train the tiny model of 'Watch it learn' and write its record and figures",
                        description="Train an attention-only model deterministically; write the checkpoints as JSON "
                                    "and the loss, scores and heads as figures.")
    add_flags(lr, table(LearnSettings), name=lambda url, entry: entry.path[-1])  # --layers, --d-model, …
    lr.add_argument("--json", help="write the record here: config, checkpoints, probe")
    lr.add_argument("--out", help="a folder for loss.png, scores-*.png, heads-step*.png and heads.html")
    return p


# Flags whose meaning in the CLI goes beyond the link's setting.
_FLAG_NOTES = {
    "model": "; or (the CLI and the API only) a model folder: BERT in attnviz's layout, "
             "or any folder "
             "transformers loads (GPT-2, LLaMA, BERT, RoBERTa, T5, BART, ViT)",
    "projections": "; --no-projections also turns them off for image, audio and graph inputs",
    "view": f" (default grid; the figure views: {' | '.join(FIGURE_VIEWS)})",
}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "learn":
            from attnviz.views.learn_report import learn_command

            try:
                return learn_command(args)
            except ValueError as e:
                raise UsageError(str(e)) from None
        if args.spec:
            return run_spec(Path(args.spec))
        if not args.out:
            raise UsageError("Give --out FILE (its extension picks the format) or --spec FILE.")
        if args.input_projections is None:  # one flag for text and other inputs alike
            args.input_projections = args.projections
        settings = {k: getattr(args, k) for k in SETTINGS}
        page, data = _input_page(args)
        page = args.page or page or (page_of(args.from_url) if args.from_url else "explorer")
        job = Job(state_from(settings, args.from_url), Path(args.out), args.width, args.height,
                  args.scale, args.theme, page, data)
        with ImageExporter() as exporter:
            run_job(job, exporter)
        return 0
    except (UsageError, ExportError, OSError, ValueError) as e:
        print(f"attnviz: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a build log gets one line, never a traceback
        print(f"attnviz: {_one_line(e)}", file=sys.stderr)
        return 2


def _input_page(args) -> tuple[str | None, bytes | None]:
    """--image/--audio (a file) or their samples, --edges/--graph: which modality page."""
    for flag, page in (("image", "image-patches"), ("audio", "audio-frames"), ("attention", "attention-file")):
        path = getattr(args, flag)
        if path:
            if flag == "attention":  # refuse a pickle or a bad file by its name and header, before anything
                from attnviz.notebook.files import load_attention

                try:
                    load_attention(Path(path))
                except ValueError as e:
                    raise UsageError(str(e)) from None
            p = Path(path)
            if not p.is_file():
                raise UsageError(f"--{flag} {path}: no such file.")
            if p.stat().st_size > MAX_UPLOAD_BYTES:
                raise UsageError(f"--{flag} {path} has {p.stat().st_size / 2**20:.1f} MB; the limit is "
                                 f"{MAX_UPLOAD_BYTES / 2**20:.0f} MB.")
            return page, p.read_bytes()
    if args.image_sample or args.patch or args.stride or args.patch_mask:
        return "image-patches", None
    if args.audio_sample or args.frame or args.hop:
        return "audio-frames", None
    if args.edges or args.graph or args.graph_mask:
        return "graph-nodes", None
    return None, None


def _one_line(e: BaseException) -> str:
    text = (str(e) if isinstance(e, (UsageError, ExportError, ValueError)) else
            f"cannot write output: {e.strerror or e}" if isinstance(e, OSError) else f"{type(e).__name__}: {e}")
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
