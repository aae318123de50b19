"""Start the app with `streamlit run` and drive it with Playwright + Debian's Chromium.

Used by the browser tests and by bench/bench_browser.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from attnviz.plots.export import find_chromium
from tests.support.stclient import free_port_block, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
# --renderer-process-limit=1: a Chromium's tabs share one renderer process (kept alive by the profile's first,
# blank tab), where each new tab of the app started a process of its own; the tabs also share its V8 isolate,
# whose compiled scripts a new tab reuses: 3.18 → 2.04 s of the machine's CPU a page load, the server's included
# (docs/testing.md). --process-per-site alone saved nothing: a tab of the app is closed before the next opens, and
# the app's process with it.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--renderer-process-limit=1"]
# Where the browser tests put their screenshots: an ignored folder, so that a test run leaves the tree
# as it found it; `make screenshots` points it at the docs' own folder of screenshots.
SCREENSHOTS_ENV = "ATTNVIZ_SCREENSHOTS"
SHOTS = Path(os.environ.get(SCREENSHOTS_ENV, "").strip() or ROOT / "build" / "screenshots")
HOW_TO_GET_CHROMIUM = ("Chromium not found: install Debian's package with "
                       "`sudo apt-get install -y chromium-headless-shell` (make test does), or set BROWSER_PATH.")


HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"


def chromium_path() -> str | None:
    """The Chromium the tests drive: BROWSER_PATH where set; else Debian's headless shell (its package
    ``chromium-headless-shell``, Chromium's own headless build: the same Blink, without the desktop browser's
    layers, about 0.5 s less CPU a page load, docs/testing.md); else the CLI's image export's lookup."""
    if not os.environ.get("BROWSER_PATH") and os.access(HEADLESS_SHELL, os.X_OK):
        return HEADLESS_SHELL
    return find_chromium()


def free_port() -> int:
    return free_port_block(0)


def _options(port: int) -> list[str]:
    return ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]


def _torch_threads() -> int | None:
    """This process's torch threads (None: torch not imported), for a server to run as many: a number the test
    computes here and the server's are equal to the bit only then (a matrix product's blocking follows the threads;
    the suite's workers run one each)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def start_server(script: Path | None = None, root: Path = ROOT, env: dict[str, str] | None = None):
    """(process, base URL) of the app as `make run` serves it (``python -m ui.server``), or of `streamlit run
    SCRIPT`, on 127.0.0.1 with the project's settings, just started: ``wait_healthy`` before asking it anything."""
    port = free_port()
    opts = _options(port)
    cmd = ([sys.executable, "-m", "ui.server", *opts] if script is None else
           [sys.executable, "-m", "streamlit", "run", str(script), *opts])
    threads = _torch_threads()
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}), **(env or {})})
    return proc, f"http://127.0.0.1:{port}"


def stop_server(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def streamlit_server(timeout: float = 60, script: Path | None = None, root: Path = ROOT,
                     env: dict[str, str] | None = None):
    """Yield the base URL of a server ``start_server`` started (its arguments), once healthy; stop it after.
    ``root``: the checkout whose app is served (a benchmark's ``--against``); ``env``: variables the server runs
    with beside this process's (an operator's ``ATTNVIZ_MODEL_DIRS``, say)."""
    proc, base = start_server(script, root, env)
    try:
        wait_healthy(base, proc, timeout)
        yield base
    finally:
        stop_server(proc)


@contextmanager
def fresh_servers():
    """Yield ``take()``: (process, base URL) of a fresh ``python -m ui.server`` that no session has visited, healthy;
    the caller stops it. Each is forked from one process that did the launcher's imports once
    (``tests/support/forkserver.py``: 3.1 of a start's 3.4 s of CPU); the next one starts as one is taken. Those left
    are stopped after."""
    from tests.support.forkserver import ForkServer

    forks = ForkServer(threads=_torch_threads() or os.cpu_count() or 1)
    logs = Path(tempfile.mkdtemp(prefix="attnviz-fresh-"))

    def begin() -> tuple:
        port = free_port()
        return forks.start(_options(port), logs / f"server-{port}.log"), f"http://127.0.0.1:{port}"

    started: list[tuple] = []

    def take() -> tuple:
        proc, base = started.pop()
        started.append(begin())  # the next case's
        wait_healthy(base, proc, 60)
        return proc, base

    try:
        started.append(begin())
        yield take
    finally:
        for proc, _base in started:
            stop_server(proc)
        forks.close()
        shutil.rmtree(logs, ignore_errors=True)


class Tabs:
    """What a test asked of a fresh context (``new_context(viewport=...)``: pages of one size, request listeners,
    init scripts, closed together), as tabs of ``Profile``'s one context."""

    def __init__(self, context, viewport: dict | None) -> None:
        self._context, self._viewport = context, viewport
        self._pages: list = []
        self._listeners: list[tuple[str, object]] = []
        self._scripts: list[str] = []

    def new_page(self):
        page = self._context.new_page()
        if self._viewport:
            page.set_viewport_size(self._viewport)
        for event, listener in self._listeners:
            page.on(event, listener)
        for script in self._scripts:
            page.add_init_script(script)
        self._pages.append(page)
        return page

    def on(self, event: str, listener) -> None:
        self._listeners.append((event, listener))
        for page in self._pages:
            page.on(event, listener)

    def add_init_script(self, script: str) -> None:
        self._scripts.append(script)

    def close(self) -> None:
        for page in self._pages:
            page.close()
        self._pages.clear()


class Profile:
    """A test process's Chromium, with one profile on disk: each ``new_context`` is a group of tabs (``Tabs``) in it.
    A fresh incognito context per test kept no disk cache, so every page load parsed and compiled Streamlit's
    scripts again; here a load after a server's first reads them compiled (V8's code cache, kept on disk only): the
    first-screen module's 16 page loads took 156 s of CPU in fresh contexts and 136 s here (docs/testing.md). The
    tabs share cookies and local storage, which the app does not use."""

    def __init__(self, playwright, folder: Path) -> None:
        self._context = playwright.chromium.launch_persistent_context(
            str(folder), executable_path=chromium_path(), args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000})

    def new_context(self, viewport: dict | None = None) -> Tabs:
        return Tabs(self._context, viewport)

    @contextmanager
    def tab(self, width: int = 1400, height: int = 1000):
        """One tab ``width`` × ``height``, closed on the way out (``new_context`` for a test that wants listeners,
        init scripts or several tabs)."""
        tabs = self.new_context({"width": width, "height": height})
        try:
            yield tabs.new_page()
        finally:
            tabs.close()

    def close(self) -> None:
        self._context.close()


@contextmanager
def plotly_tab(browser: Profile, width: int, script: str = ""):
    """A blank tab of ``browser`` holding Plotly's own plotly.js and a ``div#d`` ``width`` px wide to draw figures
    in; ``script`` runs before plotly.js loads. Closed on the way out."""
    import plotly

    with browser.tab() as page:
        page.set_content(f"<div id=d style='width:{width}px'></div>")
        if script:
            page.add_script_tag(content=script)
        page.add_script_tag(path=str(Path(plotly.__path__[0]) / "package_data" / "plotly.min.js"))
        yield page


def wait_idle(page, timeout: float = 30_000) -> None:
    """Wait until Streamlit has finished the current run and a chart is drawn."""
    page.wait_for_selector(".js-plotly-plot", timeout=timeout)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)
    page.wait_for_timeout(300)


def wait_run(page, timeout: float = 30_000) -> None:
    """Wait until Streamlit has drawn a page heading and finished the current run (for a
    page that may have no chart yet)."""
    page.wait_for_selector("[data-testid=stMain] h1", timeout=timeout)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)
    page.wait_for_timeout(300)


def wait_for_label(page, text: str, timeout: float = 30_000) -> None:
    """Wait until the first chart's data has a row labelled ``text`` (the rerun has drawn).

    Reads the chart's data, not its tick labels: Plotly thins ticks that do not fit.
    """
    page.wait_for_function(
        """t => { const g = document.querySelector('.js-plotly-plot');
                  return !!(g && g.data && g.data[0].y && [...g.data[0].y].some(
                      y => String(y).replace(/[\u200b\u200c\u2060\ufeff]/g, '') === t)); }""",
        arg=text, timeout=timeout)
    wait_idle(page)


def wait_for_titles(page, n: int, timeout: float = 30_000) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot .annotation-text').length === n",
        arg=n, timeout=timeout)
    wait_idle(page)


def subplot_titles(page) -> list[str]:
    """The 'head N' titles of the grid (Plotly draws them as annotations)."""
    return page.eval_on_selector_all(
        ".js-plotly-plot .annotation-text", "els => els.map(e => e.textContent)")


def full_page_screenshot(page, path: Path, width: int = 1400) -> None:
    """Streamlit scrolls inside stMain: size the viewport to its height first."""
    h = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": width, "height": max(800, int(h))})
    page.wait_for_timeout(800)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
