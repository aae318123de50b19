"""The explorer against the floor page in Chromium: load-to-drawn and bytes sent.

Load-to-drawn, the median (or, --stat best, the best) of --repeats (5): open a link in a fresh page, then
wait until every chart of the page is drawn
(Plotly has finished drawing it: its ``plotly_afterplot`` event, see ``DRAWN``) and Streamlit is idle.
Bytes: what the server sent over the websocket for that load.
The floor page (bench/floor_app.py, one Plotly heatmap of the same size) runs in
the same process, with the same settings, and the table gives the ratios. Both servers
are up together and their loads alternate (floor, explorer, floor, ...), so that each
pair meets the machine in the same state: this machine runs in phases in which every
load takes up to twice as long.

``--against DIR`` adds another checkout's explorer (a git worktree of a change's base),
its loads alternating with the others', and prints each case's ratio between the two.

Cases: 64 and 512 tokens × 8 heads; 2048 tokens × 16 heads (the grid overview);
2048 tokens, one head at full detail (an image, plus a hoverable close-up).

    python bench/bench_browser.py [--repeats 5] [--stat median|best] [--max-tokens 512] [--against ../base]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.support.browserkit import (  # noqa: E402
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


# Counts each chart's finished draws. Plotly sets ``gd._fullLayout`` early in every draw,
# after giving the div its event methods: a setter on the prototype sees that first
# assignment and listens for the draw's end. (The chart's SVG root exists well before its
# data is drawn: a heatmap's image came 30-140 ms after it.)
DRAWN = """Object.defineProperty(HTMLDivElement.prototype, '_fullLayout', {configurable: true,
  set(v) { Object.defineProperty(this, '_fullLayout', {value: v, writable: true, configurable: true});
           if (this.on) this.on('plotly_afterplot', () => { this.__drawn = (this.__drawn || 0) + 1; }); }});"""


def browser_context(browser):
    """A context whose pages count their charts' draws (``DRAWN``)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(DRAWN)
    return ctx


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
                  return plots.length >= n && plots.every(p => p.__drawn)
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
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stat", choices=("median", "best"), default="median", help="of the repeats' load-to-drawn")
    ap.add_argument("--max-tokens", type=int, default=2048, help="leave out the cases longer than this")
    ap.add_argument("--against", type=Path, metavar="DIR", help="another checkout's explorer, measured alongside")
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit(HOW_TO_GET_CHROMIUM)
    global CASES
    CASES = [c for c in CASES if c[1] <= args.max_tokens]
    lengths = tuple(n for n in (64, 512, 2048) if n <= args.max_tokens)
    with sync_playwright() as p, contextlib.ExitStack() as up:
        browser = launch(p)
        floor = up.enter_context(streamlit_server(script=ROOT / "bench" / "floor_app.py"))
        apps = {"explorer": up.enter_context(streamlit_server())}
        if args.against:
            apps[f"explorer at {args.against}"] = up.enter_context(streamlit_server(root=args.against.resolve()))
        # One browser context per server: its static files are cached after the warm-up load.
        ctx = {name: browser_context(browser) for name in ("floor", *apps)}
        floor_url = {n: f"{floor}/?{urlencode({'text': text_of(n)})}" for n in lengths}
        # The bare page drawing one heatmap of the same 64 tokens, each its own category.
        labelled_url = f"{floor}/?{urlencode({'text': text_of(64), 'labels': 1})}"
        app_url = {(name, label): base + "/?" + urlencode({"text": text_of(n), "heads": heads, "mask": "causal",
                                                           "view": view})
                   for name, base in apps.items() for label, n, heads, view, _ in CASES}
        charts = {label: c for label, _, _, _, c in CASES}
        for n in lengths:  # warm: the first load also fetches the frontend
            load(ctx["floor"], floor_url[n], 1)
        load(ctx["floor"], labelled_url, 1)
        for (name, label), url in app_url.items():
            load(ctx[name], url, charts[label])
        runs: dict = {}
        for r in range(args.repeats):
            for n in lengths:
                runs.setdefault(("floor", n), []).append(load(ctx["floor"], floor_url[n], 1))
                if n == 64:
                    runs.setdefault(("labelled", 64), []).append(load(ctx["floor"], labelled_url, 1))
                for label, ln, _, _, c in CASES:
                    if ln != n:
                        continue
                    for name in apps:
                        runs.setdefault((name, label), []).append(load(ctx[name], app_url[(name, label)], c))
            print(f"round {r + 1} of {args.repeats} done", file=sys.stderr, flush=True)
        for c in ctx.values():
            c.close()
        browser.close()
    stat = min if args.stat == "best" else statistics.median
    rows = {k: (stat([x[0] for x in v]), statistics.median(x[1] for x in v)) for k, v in runs.items()}
    print(f"load-to-drawn: the {args.stat} of {args.repeats} loads\n")
    print("| page | load-to-drawn | sent | floor at the same length | ratio to the floor |")
    print("|---|---:|---:|---:|---:|")
    for n in lengths:
        t, b = rows[("floor", n)]
        print(f"| floor page, {n} tokens | {t:.2f} s | {b / 2**20:.2f} MiB | | |")
    for name in apps:
        for label, n, _, _, _ in CASES:
            t, b = rows[(name, label)]
            ft = rows[("floor", min(n, 512) if "overview" in label else n)][0]
            ref = "floor at 512" if "overview" in label else f"floor at {n}"
            print(f"| {name}, {label} | {t:.2f} s | {b / 2**20:.2f} MiB | {ft:.2f} s ({ref}) | {t / ft:.2f} |")
    t64, bare = rows[("explorer", CASES[0][0])][0], rows[("labelled", 64)][0]
    t512 = rows[("explorer", CASES[1][0])][0] if len(CASES) > 1 else float("nan")
    # Each round loads the bare page and then the explorer: the ratio within a round meets the
    # machine in one phase, so its median moves less from run to run than the ratio of medians.
    paired = statistics.median(e[0] / b[0] for e, b in zip(runs[("explorer", CASES[0][0])], runs[("labelled", 64)],
                                                           strict=True))
    print(f"\nThe bare page with the 64 tokens as categories: {bare:.2f} s. The explorer at 64 tokens: "
          f"{t64 / bare:.2f}x it (the median of the rounds' own ratios: {paired:.2f}x), "
          f"{t64 / t512:.2f}x the explorer at 512.")
    if args.against:
        other = f"explorer at {args.against}"
        print()
        print(f"This checkout's load-to-drawn over {args.against}'s: " + ", ".join(
            f"{label} {rows[('explorer', label)][0] / rows[(other, label)][0]:.3f}" for label, *_ in CASES))


if __name__ == "__main__":
    main()
