"""The explorer in a real browser: time from a control change to the charts drawn,
and bytes the server sent for it, for 16, 64, 256 and 512 tokens with 8 heads.

Starts `streamlit run app.py` on 127.0.0.1 and drives Debian's Chromium with
Playwright. The change is a new seed (recomputes everything, redraws every chart).
Prints a Markdown table.

    python bench/bench_browser.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, launch, streamlit_server, wait_idle  # noqa: E402

WORDS = ("attention lets every token look at every other token and mix what it finds "
         "the weights say how much each key matters to each query").split()


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def measure(page, base: str, n: int, seed: int, frames: list[int]) -> tuple[float, float, int]:
    q = {"text": text_of(n), "heads": 8, "d_model": 64, "mask": "causal", "seed": seed}
    t0 = time.perf_counter()
    page.goto(f"{base}/?{urlencode(q)}")
    wait_idle(page, timeout=120_000)
    load_s = time.perf_counter() - t0
    page.evaluate("() => { window.__old = document.querySelector('.js-plotly-plot').data; }")
    box = page.get_by_role("spinbutton", name="Seed", exact=True)
    frames.clear()
    t0 = time.perf_counter()
    box.fill(str(seed + 1))
    box.press("Enter")
    page.wait_for_function(
        "() => { const g = document.querySelector('.js-plotly-plot'); return g && g.data !== window.__old; }",
        timeout=120_000, polling="raf")
    change_s = time.perf_counter() - t0
    wait_idle(page, timeout=120_000)  # let the other charts finish before counting bytes
    return load_s, change_s, sum(frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256, 512])
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit(HOW_TO_GET_CHROMIUM)
    frames: list[int] = []
    print("| tokens | heads | first load (s) | control change → charts drawn (s) | bytes sent for the change |")
    print("|---:|---:|---:|---:|---:|")
    with streamlit_server() as base, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(
            len(f) if isinstance(f, (bytes, str)) else 0)))
        for n in args.lengths:
            rows = [measure(page, base, n, seed=10 * r, frames=frames) for r in range(args.repeats)]
            load = statistics.median(r[0] for r in rows)
            change = statistics.median(r[1] for r in rows)
            sent = int(statistics.median(r[2] for r in rows))
            print(f"| {n} | 8 | {load:.2f} | {change:.2f} | {sent / 1024:,.0f} KiB |", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
