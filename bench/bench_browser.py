"""The explorer against the floor page in Chromium: load-to-drawn and bytes sent.

Load-to-drawn, best of --repeats (3): open a link in a fresh page, then wait until every chart of the page is drawn and
Streamlit is idle. Bytes: what the server sent over the websocket for that load.
The floor page (bench/floor_app.py, one Plotly heatmap of the same size) runs in
the same process, with the same settings, and the table gives the ratios.

Cases: 64 and 512 tokens × 8 heads; 2048 tokens × 16 heads (the grid overview);
2048 tokens, one head at full detail (an image, plus a hoverable close-up).

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

from tests.browserkit import (  # noqa: E402
    HOW_TO_GET_CHROMIUM,
    ROOT,
    chromium_path,
    launch,
    streamlit_server,
)

WORDS = ("attention lets every token look at every other token and mix what it finds "
         "the weights say how much each key matters to each query").split()


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def load(ctx, url: str, charts: int) -> tuple[float, int]:
    """Seconds from navigation to `charts` drawn and idle, and websocket bytes received.

    One browser context per server, so its static files (Streamlit's frontend, fonts)
    are cached after the warm-up load, as for a returning visitor, alike for both pages.
    """
    page = ctx.new_page()
    received = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(
        len(f) if isinstance(f, (bytes, str)) else 0)))
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(
        """n => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
                  return plots.length >= n && plots.every(p => p._fullLayout && p.querySelector('.main-svg'))
                         && !document.querySelector('[data-testid=stStatusWidget]'); }""",
        arg=charts, timeout=300_000, polling=50)
    took = time.perf_counter() - t0
    page.wait_for_timeout(300)
    page.close()
    return took, sum(received)


CASES = [  # label, tokens, heads, view, charts on the explorer
    ("64 tokens × 8 heads", 64, 8, "grid", 1),
    ("512 tokens × 8 heads", 512, 8, "grid", 1),
    ("2048 tokens × 16 heads, overview", 2048, 16, "grid", 1),
    ("2048 tokens, one head at full detail", 2048, 16, "head", 3),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit(HOW_TO_GET_CHROMIUM)
    rows = {}
    with sync_playwright() as p:
        browser = launch(p)
        with streamlit_server(script=ROOT / "bench" / "floor_app.py") as floor:
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            for n in (64, 512, 2048):
                url = f"{floor}/?{urlencode({'text': text_of(n)})}"
                load(ctx, url, 1)  # warm: the first load also fetches the frontend
                runs = [load(ctx, url, 1) for _ in range(args.repeats)]
                rows[("floor", n)] = (min(r[0] for r in runs), statistics.median(r[1] for r in runs))  # best of N
                print(f"floor {n}: {rows[('floor', n)]}", file=sys.stderr, flush=True)
            ctx.close()
        with streamlit_server() as app:
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            for label, n, heads, view, charts in CASES:
                url = f"{app}/?{urlencode({'text': text_of(n), 'heads': heads, 'mask': 'causal', 'view': view})}"
                load(ctx, url, charts)
                runs = [load(ctx, url, charts) for _ in range(args.repeats)]
                rows[label] = (min(r[0] for r in runs), statistics.median(r[1] for r in runs))  # best of N
                print(f"{label}: {rows[label]}", file=sys.stderr, flush=True)
            ctx.close()
        browser.close()
    print("| page | load-to-drawn | sent | floor at the same length | ratio to the floor |")
    print("|---|---:|---:|---:|---:|")
    for n in (64, 512, 2048):
        t, b = rows[("floor", n)]
        print(f"| floor page, {n} tokens | {t:.2f} s | {b / 2**20:.2f} MiB | | |")
    for label, n, _, _, _ in CASES:
        t, b = rows[label]
        ft = rows[("floor", min(n, 512) if "overview" in label else n)][0]
        ref = "floor at 512" if "overview" in label else f"floor at {n}"
        print(f"| explorer, {label} | {t:.2f} s | {b / 2**20:.2f} MiB | {ft:.2f} s ({ref}) | {t / ft:.2f} |")


if __name__ == "__main__":
    main()
