"""Spec files: ``[defaults]`` plus one ``[[figure]]`` table per figure, rendered in one batch
(``python -m attnviz render --spec docs/figures.toml``). Every ``out`` (and every input file a
figure names) must stay inside the spec file's folder; a bad entry is reported and the others
are still written.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from attnviz.atomic import write_atomic
from attnviz.cli.render import DEFAULT_WIDTH, RenderJob, UsageError, one_line, read_input, start_job, state_from
from attnviz.plots.export import ImageExporter
from attnviz.views.catalogue import FILE_PAGES, HOME, PAGE_NAMES, page_of


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


def job_from_settings(settings: dict, base: Path) -> RenderJob:
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
    for flag, kind in FILE_PAGES.items():  # the file a page reads, by its key: image = "cat.png"
        key = flag.replace("-", "_")
        path = settings.pop(key, None)
        if path is not None:
            source = _inside(path, base, key).resolve()  # a shared spec reads only files beside it
            data, page = read_input(source, f"`{key}`"), page or kind
    page = page or (page_of(from_url) if from_url else HOME)
    return RenderJob(state_from(settings, from_url, page), out_path, width, height, float(scale), theme, page, data)


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
                failures.append(f"{label}: {one_line(e)}")
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


