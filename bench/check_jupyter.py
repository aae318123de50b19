"""The notebook views in a real JupyterLab and Jupyter Notebook 7, offline, in Chromium.

A notebook written the BertViz way, with only the import changed
(``from attnviz import head_view, model_view``), plus ``attnviz.show`` and an
``attention_pattern``: four views in one notebook. It is opened in JupyterLab (``/lab``) and in
Notebook 7 (``/notebooks``), every cell is run through the menu, and the check waits until each
view's Plotly charts are drawn. Every request that leaves 127.0.0.1 is blocked and counted:
the views must draw with none. It writes a screenshot of each to ``docs/screenshots/``.

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


def notebook(folder: Path) -> Path:
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name":
                                                                           "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "id": f"c{i}",
                     "source": src} for i, src in enumerate(CELLS)]}
    path = folder / "attnviz-check.ipynb"
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


def run_all(page) -> float:
    """Every cell, through the frontend's own menu (Run, then Run All Cells: the same in Lab
    and Notebook 7), once the kernel is up; again if no cell started (the kernel was still
    connecting)."""
    for _attempt in range(12):
        t0 = time.perf_counter()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.locator("li[data-command='runmenu:run-all']").click()
        try:
            page.wait_for_function("[...document.querySelectorAll('.jp-InputArea-prompt')].filter(p => "
                                   "/\\[\\d+\\]/.test(p.innerText)).length >= %d" % len(CELLS), timeout=10_000)
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


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.browserkit import launch

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
        with sync_playwright() as p:
            browser = launch(p)
            for kind, shot in (("lab", "jupyterlab.png"), ("notebook", "jupyter-notebook.png")):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                          else (blocked.append(route.request.url), route.abort()))
                page = ctx.new_page()
                results[kind] = check(page, base, kind, ROOT / "docs" / "screenshots" / shot)
                ctx.close()
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
    print(f"Requests that left 127.0.0.1 (blocked): {len(blocked)}" + (f", e.g. {blocked[:3]}" if blocked else ""))
    if blocked or any(r["errors"] for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
