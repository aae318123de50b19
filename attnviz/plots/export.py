"""Figures and runs to files, byte-identical from run to run.

PNG and SVG go through kaleido with the system's Chromium (Debian's
``/usr/bin/chromium``; ``BROWSER_PATH`` overrides). Nothing is downloaded.
HTML embeds plotly.js, so it works offline. JSON and CSV are the run's numbers.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import plotly.graph_objects as go

FORMATS = ("png", "svg", "html", "json", "csv")
HOW_TO_GET_CHROMIUM = ("PNG/SVG export needs Chromium: install it with `sudo apt-get install -y chromium` "
                       "or set BROWSER_PATH to a Chromium/Chrome binary (HTML, JSON and CSV work without it).")


class ExportError(Exception):
    """A problem a user can fix, worded for one line on stderr."""


def find_chromium() -> str | None:
    for cand in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def format_of(path: str | Path) -> str:
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in FORMATS:
        raise ExportError(f"Unknown output format {ext or '(none)'!r} for {path}; "
                          f"use one of .{', .'.join(FORMATS)}.")
    return ext


def check_writable(path: str | Path) -> None:
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise ExportError(f"Cannot write {path}: folder {parent} does not exist.")
    if not os.access(parent, os.W_OK):
        raise ExportError(f"Cannot write {path}: folder {parent} is not writable.")


def _fix_ids(fig: go.Figure) -> go.Figure:
    """Plotly gives each trace a random uid unless one is set: set them."""
    fig = go.Figure(fig)
    for i, t in enumerate(fig.data):
        t.uid = f"trace{i}"
    return fig


def stable_svg(svg: str) -> str:
    """plotly.js names clip paths and defs after a random 6-hex figure id: fix it."""
    m = re.search(r'id="defs-([0-9a-f]{6})"', svg)
    return svg.replace(m.group(1), "attnvz") if m else svg


def html_bytes(fig: go.Figure) -> bytes:
    html = _fix_ids(fig).to_html(include_plotlyjs=True, full_html=True, div_id="attnviz-figure",
                                 config={"displaylogo": False})
    return html.encode("utf-8")


class ImageExporter:
    """One kaleido/Chromium session for many images (about 0.4 s each instead of 3 s).

    kaleido reloads its tab after every figure, which bounds the rate. Measured for 20
    PNGs: two tabs rendering in parallel (kaleido's ``n=2``) drew them in 6.6 s instead
    of 8.4 s but took longer to start, so end to end a batch was no faster on 2 cores;
    one tab and the simple synchronous server it is.
    """

    def __init__(self):
        self._started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self):
        if self._started:
            return
        chromium = find_chromium()
        if chromium is None:
            raise ExportError(HOW_TO_GET_CHROMIUM)
        os.environ["BROWSER_PATH"] = chromium  # choreographer/kaleido read this
        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
        self._started = True

    def render(self, fig: go.Figure, fmt: str, *, width: int, height: int, scale: float) -> bytes:
        self._start()
        import kaleido

        opts = {"format": fmt, "width": width, "height": height, "scale": scale}
        try:
            data = kaleido.calc_fig_sync(_fix_ids(fig), opts=opts)
        except Exception as e:  # noqa: BLE001 - kaleido raises many kinds; report one line
            raise ExportError(f"Image export failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}). "
                              f"{HOW_TO_GET_CHROMIUM}") from None
        if fmt == "svg":
            data = stable_svg(data.decode("utf-8")).encode("utf-8")
        return data

    def close(self):
        if self._started:
            import kaleido

            kaleido.stop_sync_server(silence_warnings=True)
            self._started = False
