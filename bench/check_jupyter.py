"""The notebook views in a real JupyterLab and Jupyter Notebook 7, offline, in Chromium.

A notebook written the BertViz way, with only the import changed
(``from attnviz import head_view, model_view``), plus ``attnviz.show`` and an
``attention_pattern``: four views in one notebook. It is opened in JupyterLab (``/lab``) and in
Notebook 7 (``/notebooks``), every cell is run through the menu, and the check waits until each
view's Plotly charts are drawn. Every request that leaves 127.0.0.1 is blocked and counted:
the views must draw with none. It writes a screenshot of each to ``docs/screenshots/``.

A second notebook holds ten ``head_view`` outputs of 12 layers × 12 heads × 32 tokens: it is run
in JupyterLab, saved, closed (its kernel shut down) and opened again in a fresh browser, offline,
and every view must draw again from the saved outputs alone (the first view's output carries
plotly.js, the other nine only their data). The saved file's size and each output's size are
printed. A copy of the saved file that Jupyter has not signed (as a notebook received from
someone else) is opened too, to count what an untrusted notebook draws.

JupyterLab, Notebook and ipykernel are installed into ``.bench/jupyter`` the first time
(``pip install --target``): this check's environment only, not the project's.

    python bench/check_jupyter.py
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / ".bench" / "jupyter"
sys.path.insert(0, str(ROOT))

CELLS = [
    "import torch\nfrom attnviz import head_view, model_view  # was: from bertviz import head_view, model_view\n"
    "import attnviz\n"
    "torch.manual_seed(0)\n"
    "tokens = ['[CLS]', 'the', 'cat', 'sat', 'on', 'the', 'mat', '[SEP]']\n"
    "attention = tuple(torch.softmax(torch.randn(1, 4, 8, 8), -1) for _ in range(3))  # (1, H, L, S) per layer",
    "head_view(attention, tokens)",
    "model_view(attention, tokens)",
    "attnviz.show(attention, tokens, view='grid')",
    "attnviz.attention_pattern(tokens, attention[0][0, 0])",
]
VIEWS = len(CELLS) - 1

LIGHT = ["import torch\nfrom attnviz import head_view\ntorch.manual_seed(0)\n"
         "tokens = [f't{i}' for i in range(32)]\n"
         "attention = tuple(torch.softmax(torch.randn(1, 12, 32, 32), -1) for _ in range(12))  # (1, H, L, S) x 12"]
LIGHT += ["head_view(attention, tokens)"] * 10
LIGHT_VIEWS = len(LIGHT) - 1


def notebook(folder: Path, cells: list[str] = CELLS, name: str = "attnviz-check.ipynb") -> Path:
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name":
                                                                           "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "id": f"c{i}",
                     "source": src} for i, src in enumerate(cells)]}
    path = folder / name
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def ensure_installed() -> None:
    probe = [sys.executable, "-c", "import jupyterlab, notebook, ipykernel"]
    if subprocess.run(probe, env={**os.environ, "PYTHONPATH": str(SITE)}, capture_output=True).returncode == 0:
        return
    print("installing jupyterlab, notebook and ipykernel into .bench/jupyter ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(SITE), "jupyterlab", "notebook",
                    "ipykernel"], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_all(page, cells: int = len(CELLS)) -> float:
    """Every cell, through the frontend's own menu (Run, then Run All Cells: the same in Lab
    and Notebook 7), once the kernel is up; again if no cell started (the kernel was still
    connecting)."""
    for _attempt in range(12):
        t0 = time.perf_counter()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.locator("li[data-command='runmenu:run-all']").click()
        try:
            page.wait_for_function("[...document.querySelectorAll('.jp-InputArea-prompt')].filter(p => "
                                   "/\\[\\d+\\]/.test(p.innerText)).length >= %d" % cells, timeout=10_000)
            return t0
        except Exception:  # noqa: BLE001 - not run yet: try again
            time.sleep(2)
    raise RuntimeError("the notebook's cells never ran")


DRAWN = """() => {
    const views = [...document.querySelectorAll('.jp-OutputArea-output')];
    return views.length >= %d && views.every(v => v.querySelectorAll('.js-plotly-plot .main-svg').length > 0);
}""" % VIEWS  # every view's output holds Plotly charts with their SVG


def check(page, base: str, kind: str, shot: Path) -> dict:
    url = f"{base}/{'lab/tree' if kind == 'lab' else 'notebooks'}/attnviz-check.ipynb"
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    time.sleep(3)  # the kernel starts and connects
    t0 = run_all(page)
    try:
        page.wait_for_function(DRAWN, timeout=180_000)
    except Exception:
        page.screenshot(path="/tmp/jupyter-failed.png")
        print(page.evaluate("[...document.querySelectorAll('.jp-OutputArea-output')].map(e => e.innerText.slice(0, "
                            "300))"), file=sys.stderr)
        raise
    drawn = time.perf_counter() - t0
    # Charts drawn in each view's output (a view may hold several).
    charts = page.evaluate("[...document.querySelectorAll('.jp-OutputArea-output')].map(v => "
                           "v.querySelectorAll('.js-plotly-plot .main-svg').length > 0).filter(Boolean).length")
    errors = page.evaluate("[...document.querySelectorAll('.jp-OutputArea-output')].filter(e => "
                           "e.querySelector('[data-mime-type*=\"error\"], [data-mime-type*=\"stderr\"]'))"
                           ".map(e => e.innerText.slice(0, 200))")
    news = page.get_by_role("button", name="No", exact=True)  # JupyterLab's "notified about news?" toast
    if news.count():
        news.first.click()
    page.locator(".jp-OutputArea-output").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    return {"views": VIEWS, "charts": charts, "seconds": drawn, "errors": errors}


DRAWN_CELLS = """() => [...document.querySelectorAll('.jp-Cell')].filter(c =>
    c.querySelector('.jp-OutputArea-output .js-plotly-plot .main-svg'))
    .map(c => c.getAttribute('data-windowed-list-index') || c.id)"""
SCROLL = """() => {
    const s = document.querySelector('.jp-WindowedPanel-outer') || document.querySelector('.jp-Notebook');
    const end = s.scrollTop + s.clientHeight >= s.scrollHeight - 2;
    s.scrollTop = end ? 0 : s.scrollTop + s.clientHeight * 0.8;
}"""


def count_drawn(page, want: int, timeout: float) -> int:
    """Views drawn, scrolling through the notebook: JupyterLab keeps only the cells in view in
    the page, so a view counts once it has been seen drawn."""
    end, seen = time.monotonic() + timeout, set()
    while time.monotonic() < end:
        seen |= set(page.evaluate(DRAWN_CELLS))
        if len(seen) >= want:
            break
        page.evaluate(SCROLL)
        time.sleep(0.7)
    return len(seen)


def dismiss(page) -> None:
    """Close a dialog that JupyterLab opened (one is named on stderr)."""
    for d in page.locator(".jp-Dialog").all():
        print("dialog: " + " ".join(d.inner_text().split())[:200], file=sys.stderr)
        page.keyboard.press("Escape")
        time.sleep(0.5)


def saved_outputs(path: Path) -> list[int]:
    """Bytes of each code cell's saved text/html output (0 where it has none)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    sizes = []
    for cell in nb["cells"]:
        html = [o["data"]["text/html"] for o in cell.get("outputs", []) if "text/html" in o.get("data", {})]
        sizes.append(sum(len("".join(h) if isinstance(h, list) else h) for h in html))
    return sizes


def check_light(browser, route, base: str, folder: Path) -> dict:
    """Ten head views: run, save, close, reopen offline in a fresh browser; then an unsigned copy."""
    path = notebook(folder, LIGHT, "attnviz-light.ipynb")
    url = f"{base}/lab/tree/{path.name}?reset"  # a fresh workspace: the first checks left theirs open
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.route("**/*", route)
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    time.sleep(3)
    dismiss(page)
    run_all(page, 1)  # started: the cells out of view may not be in the page (JupyterLab renders them late)
    ran = count_drawn(page, LIGHT_VIEWS, 300)
    dismiss(page)
    page.locator(".jp-Notebook").first.click()
    for _ in range(60):  # save (Ctrl+S) until the file holds every output
        page.keyboard.press("Control+s")
        time.sleep(2)
        if sum(1 for b in saved_outputs(path) if b) >= LIGHT_VIEWS:
            break
    ctx.close()
    for s in json.loads(urllib.request.urlopen(base + "/api/sessions").read()):  # the kernel goes too
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/sessions/{s['id']}", method="DELETE")).read()
    sizes = [b for b in saved_outputs(path) if b]
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.route("**/*", route)
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    reopened = count_drawn(page, LIGHT_VIEWS, 120)
    ctx.close()
    copy = folder / "attnviz-light-unsigned.ipynb"  # changed, so that its signature is not on record
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "id": "received", "source": "Received."})
    copy.write_text(json.dumps(nb), encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.route("**/*", route)
    page = ctx.new_page()
    page.goto(f"{base}/lab/tree/{copy.name}")
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    untrusted = count_drawn(page, LIGHT_VIEWS, 20)
    ctx.close()
    return {"ran": ran, "reopened": reopened, "untrusted": untrusted, "file": path.stat().st_size, "outputs": sizes}


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.support.browserkit import launch

    ensure_installed()
    folder = Path(tempfile.mkdtemp(prefix="attnviz-jupyter-"))
    notebook(folder)
    (folder / ".cfg").mkdir()
    (folder / ".cfg" / "jupyter_server_config.json").write_text(json.dumps(  # Notebook 7 beside Lab
        {"ServerApp": {"jpserver_extensions": {"notebook": True}}}))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SITE)]), "JUPYTER_CONFIG_DIR":
           str(folder / ".cfg"), "JUPYTER_DATA_DIR": str(folder / ".data"), "JUPYTER_RUNTIME_DIR": str(folder / ".rt"),
           "JUPYTER_PATH": str(SITE / "share" / "jupyter"),
           "JUPYTER_CONFIG_PATH": str(SITE / "etc" / "jupyter")}  # where the extensions enable themselves
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                               "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={folder}",
                               "--ServerApp.disable_check_xsrf=True", "--allow-root",
                               f"--LabApp.app_dir={SITE / 'share' / 'jupyter' / 'lab'}"], env=env, cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=open(folder / "server.log", "w"),
                              start_new_session=True)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/api", timeout=2).read()
                break
            except OSError:
                time.sleep(1)
        blocked: list[str] = []
        results = {}

        def route(r):
            return r.continue_() if r.request.url.startswith(base) else (blocked.append(r.request.url), r.abort())

        with sync_playwright() as p:
            browser = launch(p)
            kinds = () if "--light-only" in sys.argv else (("lab", "jupyterlab.png"),
                                                            ("notebook", "jupyter-notebook.png"))
            for kind, shot in kinds:
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                ctx.route("**/*", route)
                page = ctx.new_page()
                results[kind] = check(page, base, kind, ROOT / "docs" / "screenshots" / shot)
                ctx.close()
            light = check_light(browser, route, base, folder)
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    print("| frontend | views in one notebook | views drawn | seconds from Run All to all drawn | errors |")
    print("|---|---:|---:|---:|---|")
    for kind, r in results.items():
        name = {"lab": "JupyterLab", "notebook": "Jupyter Notebook 7"}[kind]
        print(f"| {name} | {r['views']} | {r['charts']} | {r['seconds']:.1f} | {len(r['errors'])} |")
    print()
    out = light["outputs"]
    print(f"Ten head views (12 layers x 12 heads x 32 tokens) in JupyterLab: drawn when run {light['ran']}/"
          f"{LIGHT_VIEWS}; saved, closed and reopened offline: drawn {light['reopened']}/{LIGHT_VIEWS}; "
          f"an unsigned copy (untrusted): drawn {light['untrusted']}/{LIGHT_VIEWS}")
    print(f"Saved notebook: {light['file'] / 1e6:.2f} MB; first view's output {out[0] / 1e6:.2f} MB; later views "
          f"{min(out[1:]) / 1e3:.0f}-{max(out[1:]) / 1e3:.0f} KB" if len(out) > 1 else f"outputs saved: {out}")
    print()
    print(f"Requests that left 127.0.0.1 (blocked): {len(blocked)}" + (f", e.g. {blocked[:3]}" if blocked else ""))
    light_ok = (light["ran"] == light["reopened"] == LIGHT_VIEWS and light["file"] <= 10_000_000
                and len(out) == LIGHT_VIEWS and max(out[1:]) <= 500_000)
    if blocked or any(r["errors"] for r in results.values()) or not light_ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
