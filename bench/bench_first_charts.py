"""Where each page's first chart lies on a newcomer's first screen, in Chromium: every page of the table opened
as a fresh visitor opens it (the real model offered), at 1366 × 768 and in presenter mode at 1024 × 768, once its
loads and jobs have finished; the chart's top and bottom in pixels, whether its top is in sight (laptop) and
whether it is whole (projector). A page still showing progress after ``--wait`` seconds is reported as such.

    python bench/bench_first_charts.py [--pages patching,circuit] [--wait 120]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attnviz.views.catalogue import PAGES  # noqa: E402
from tests.support.browserkit import Profile, streamlit_server, wait_idle  # noqa: E402

SCREEN = 768
# No progress bar short of its end (a finished training's stays on Watch it learn, full)
UNFINISHED = """() => ![...document.querySelectorAll('[data-testid=stProgress] [role=progressbar]')]
  .some(b => Number(b.getAttribute('aria-valuenow')) < 100)"""
FIRST = """() => { const c = document.querySelector('.js-plotly-plot, [data-testid=stImage] img');
  if (!c) return null; const r = c.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; }"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", default="", help="page names, comma-separated (all by default)")
    ap.add_argument("--wait", type=int, default=120, help="seconds a page may take to finish its work")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    names = [n for n in args.pages.split(",") if n]
    pages = [p for p in PAGES if not names or p.name in names]
    env = {"ATTNVIZ_PACKAGED": "minilm-l6 smollm2-135m"}
    print("| page | 1366 × 768: top–bottom (px) | in sight | 1024 × 768 presenter: top–bottom (px) | whole |")
    print("|---|---:|:-:|---:|:-:|")
    whole = in_sight = 0
    with streamlit_server(timeout=120, env=env) as base, sync_playwright() as pw, \
            tempfile.TemporaryDirectory() as profile:
        browser = Profile(pw, Path(profile))
        for p in pages:
            cells = []
            for width, present in ((1366, False), (1024, True)):
                with browser.tab(width, SCREEN) as tab:
                    tab.goto(f"{base}/{p.path}" + ("?present=1" if present else ""))
                    try:
                        wait_idle(tab, timeout=args.wait * 1000)
                        tab.wait_for_function(UNFINISHED, timeout=args.wait * 1000)
                        wait_idle(tab, timeout=args.wait * 1000)
                        tab.wait_for_timeout(1500)
                        box = tab.evaluate(FIRST)
                    except Exception:  # noqa: BLE001 - a page still working: said in the table
                        box = None
                if box is None:
                    cells += ["still working, or no chart", "–"]
                    continue
                ok = box["top"] < SCREEN if not present else box["bottom"] <= SCREEN
                in_sight += ok and not present
                whole += ok and present
                cells += [f"{box['top']:.0f}–{box['bottom']:.0f}", "yes" if ok else "no"]
            print(f"| {p.name} | {' | '.join(cells)} |", flush=True)
        browser.close()
    print(f"\nin sight at 1366 × 768: {in_sight} of {len(pages)}; whole at 1024 × 768 presenter: {whole} of "
          f"{len(pages)}")


if __name__ == "__main__":
    main()
