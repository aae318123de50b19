"""``render``: one figure (or its numbers) of a page, for a link's settings: the ``RenderJob``, its
checks, and the one check of an input file (``read_input``) that every way in uses.

A link to the explorer renders its view's figure (its entry in ``attnviz.views.catalogue``), a
link to another page that page's main figure (``attnviz.views.pages.page_figure``). Bad input
raises ``UsageError``: one line on stderr and exit code 2 (``attnviz.cli.main``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from attnviz.atomic import write_atomic
from attnviz.i18n import use
from attnviz.inputs.attention_file import load_attention
from attnviz.limits import MAX_UPLOAD_BYTES
from attnviz.models.door import available as available_models
from attnviz.models.door import open as open_model
from attnviz.plots.export import ExportError, ImageExporter, check_writable, format_of, html_bytes
from attnviz.plots.html import to_html
from attnviz.settings.url import shown
from attnviz.views.catalogue import FIGURE_VIEWS, FILE_PAGES, HOME, PAGE_NAMES, models_for, opening_model, page, why_not
from attnviz.views.exports import run_json, weights_csv
from attnviz.views.pages import page_figure, page_figures, page_record, page_result
from attnviz.views.selection import selection_problems, style_for
from attnviz.views.state import SETTINGS, ViewState, parse, query_dict

OUTPUT_KEYS = ("out", "width", "height", "scale", "theme", "from_url", "page",
               *(f.replace("-", "_") for f in FILE_PAGES))  # a page's file: image, audio, attention, text_file
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1000, 700


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


@dataclass
class RenderJob:
    """One figure to write."""

    state: ViewState
    out: Path
    width: int = DEFAULT_WIDTH
    height: int | None = None
    scale: float = 1.0
    theme: str = "light"
    page: str = HOME
    data: bytes | None = None  # the file the page reads: an image, a WAV, an attention file, a text


def state_from(settings: dict, from_url: str | None = None, page_name: str | None = None) -> ViewState:
    """URL parameters (from a link, then overridden by ``settings``) -> ViewState.

    Unlike the app, which falls back to defaults with a warning, a build stops on the
    first invalid value: a docs figure should never silently change. ``page_name``: the page
    rendered, whose own default model (``models_for``, the app's) replaces one that no flag or
    link chose and the page cannot run; a chosen one it cannot run stops the build, saying why.
    """
    linked = query_dict(from_url) if from_url else {}
    state = _state_from(settings, dict(linked))
    if page_name is None or state.model not in available_models():  # a folder or a hub id: the run says
        return state
    models = models_for(page(page_name))
    chosen = settings.get("model") is not None or "model" in linked
    if not chosen and models and models[0] == opening_model(page(page_name)):
        return state.with_(model=models[0])  # the model the page opens on where a link names none (the app's)
    if state.model in models:
        return state
    if not models:
        raise UsageError(f"No model this server offers runs the {page_name} page.")
    if chosen:
        raise UsageError(f"Model {state.model} {why_not(page(page_name), state.model)}: the {page_name} page runs "
                         f"{', '.join(models)}.")
    return state.with_(model=models[0])


def _state_from(settings: dict, raw: dict) -> ViewState:
    """``raw`` (a link's parameters) overridden by ``settings``, parsed and checked."""
    model = None
    for key, value in settings.items():
        if value is None:
            continue
        if key == "model" and isinstance(value, str) and value not in available_models():
            # Not a name a link may give: a folder or a Hugging Face id in the local cache, which the API and
            # the CLI take and a URL never does. The registry finds it as the run will, or says why it cannot.
            problem = open_model(value).problem
            if problem:
                raise UsageError(problem)
            model = value
            continue
        if key not in SETTINGS:
            raise UsageError(f"Unknown setting {key!r}; known: {', '.join(sorted(SETTINGS))}, "
                             f"{', '.join(OUTPUT_KEYS)}.")
        raw[key] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    state, warnings = parse(raw)
    if warnings:  # where the app falls back to a default, a build stops: the first one, as an error
        w = warnings[0]
        why = w.reason if w.offered is None else f"is not available here (available: {', '.join(w.offered)})"
        raise UsageError(f"Setting {w.name}={shown(w.value)} {why}.")
    return state if model is None else state.with_(model=model)


def figure_for(job: RenderJob) -> go.Figure:
    """The figure the app shows for ``job.state`` on ``job.page`` (the explorer: its
    ``view``), sized for export, in the state's language."""
    with use(job.state.lang):
        return _figure_for(job)


def _figure_for(job: RenderJob) -> go.Figure:
    state = job.state
    if "view" in page(job.page).reads and state.view not in (*FIGURE_VIEWS, "table"):  # a page with a view chooser
        raise UsageError(f"Unknown view {state.view!r}; choose one of {', '.join(FIGURE_VIEWS)}.")
    try:
        return page_figure(job.page, state, style_for(state, theme=job.theme), data=job.data)
    except ValueError as e:
        raise UsageError(str(e)) from None


def html_for(job: RenderJob) -> bytes:
    """The page's figures as one HTML file: all of them where its module draws several."""
    with use(job.state.lang):
        try:
            figs = page_figures(job.page, job.state, style_for(job.state, theme=job.theme), data=job.data)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return html_bytes(figs[0]) if len(figs) == 1 else to_html(figs, title=f"attnviz: {job.page}").encode("utf-8")


def _compute(job: RenderJob):
    """The run behind ``job`` (cross-attention for that page) and the state it is read with, its selection checked."""
    try:
        result, state = page_result(job.page, job.state, job.data)
    except ValueError as e:
        raise UsageError(str(e)) from None
    problems = selection_problems(result, state)
    if problems:
        raise UsageError(next(iter(problems.values())) + ".")
    return result, state


def start_job(job: RenderJob, exporter: ImageExporter):
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
        with use(job.state.lang):
            data = page_record(job.page, job.state, fmt, job.data)  # a page whose numbers are its own
        if data is None:  # the run's numbers (a view with numbers of its own, norms or neurons, adds them)
            result, state = _compute(job)
            with use(job.state.lang):
                data = (run_json(result, state) if fmt == "json" else weights_csv(result)).encode("utf-8")
        return lambda: data
    if fmt == "html":
        data = html_for(job)
        return lambda: data
    fig = figure_for(job)
    height = int(job.height or fig.layout.height or DEFAULT_HEIGHT)
    return lambda: exporter.render(fig, fmt, width=job.width, height=height, scale=job.scale)


def run_job(job: RenderJob, exporter: ImageExporter) -> None:
    write_atomic(job.out, start_job(job, exporter)())




def read_input(path, flag: str) -> bytes:
    """The bytes of an input file (an image, a WAV, an attention file), however it is named (a
    flag, a spec's key): it must exist and fit ``limits.MAX_UPLOAD_BYTES``, as an upload must;
    an attention file must be one (never a pickle), told from its name and header."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{flag} {path}: no such file.")
    if p.stat().st_size > MAX_UPLOAD_BYTES:
        raise UsageError(f"{flag} {path} has {p.stat().st_size / 2**20:.1f} MB; the limit is "
                         f"{MAX_UPLOAD_BYTES / 2**20:.0f} MB.")
    data = p.read_bytes()
    if flag in ("--attention", "`attention`"):
        try:
            load_attention(data, p.name)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return data


def one_line(e: BaseException) -> str:
    text = (str(e) if isinstance(e, (UsageError, ExportError, ValueError)) else
            f"cannot write output: {e.strerror or e}" if isinstance(e, OSError) else f"{type(e).__name__}: {e}")
    return " ".join(text.split())
