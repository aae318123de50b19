"""The explorer's grid as plotly.js draws it alone: 64 against 512 tokens × 8 heads.

First paint in Chromium (bench_browser.py) is mostly Streamlit's and plotly.js's own start-up,
the same for every page; this isolates the part that depends on the figure. Each figure is
built as the explorer sends it (``ui.compute``'s frozen spec: template written in, typed
arrays), then drawn with ``Plotly.newPlot`` into a blank page holding Plotly's own plotly.js,
the cases interleaved, median of --repeats. Variants of the 64-token grid show what its
labels cost: no tick labels, no x tick labels, unrotated x labels.

    python bench/bench_draw.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright  # noqa: E402

from bench.bench_browser import text_of  # noqa: E402
from tests.support.browserkit import HOW_TO_GET_CHROMIUM, chromium_path, plotly_page  # noqa: E402

DRAW = """async s => { const d = document.getElementById('d'); Plotly.purge(d);
  const t0 = performance.now(); await Plotly.newPlot(d, s.data, s.layout, {displaylogo: false});
  return [performance.now() - t0, d.querySelectorAll('.xtick').length, d.querySelectorAll('.ytick').length]; }"""


def grid_spec(n: int) -> dict:
    """The explorer's grid of ``n`` tokens × 8 heads (causal), as the page sends it."""
    import ui.compute as C
    from attnviz.plots.style import plain_figures
    from attnviz.views.catalogue import figure_of as view_figure
    from attnviz.views.state import parse_url

    state, _warnings = parse_url("?" + urlencode({"text": text_of(n), "heads": 8, "mask": "causal", "view": "grid"}))
    result = C.cached_result(state.config)
    with plain_figures():
        fig = view_figure(result, state, "grid")
    spec, _data_json = C._drawn_once(C.plain_dict(fig))
    return json.loads(C.spec_json(C.FrozenSpec(spec)))


def variant(spec: dict, **axes: dict) -> dict:
    out = copy.deepcopy(spec)
    for axis, change in axes.items():
        out["layout"][axis].update(change)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit(HOW_TO_GET_CHROMIUM)
    g64, g512 = grid_spec(64), grid_spec(512)
    cases = {
        "64 tokens × 8 heads": g64,
        "512 tokens × 8 heads (pooled to 96)": g512,
        "64, no tick labels": variant(g64, xaxis={"showticklabels": False}, yaxis={"showticklabels": False}),
        "64, no x tick labels": variant(g64, xaxis={"showticklabels": False}),
        "64, x labels unrotated": variant(g64, xaxis={"tickangle": 0}),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    ticks: dict[str, tuple[int, int]] = {}
    with sync_playwright() as p:
        browser, page = plotly_page(p, 1200)
        for spec in cases.values():  # warm plotly.js's code paths
            page.evaluate(DRAW, spec)
        for _ in range(args.repeats):
            for name, spec in cases.items():
                ms, xt, yt = page.evaluate(DRAW, spec)
                times[name].append(ms)
                ticks[name] = (xt, yt)
        browser.close()
    print(f"Plotly.newPlot alone, median of {args.repeats}, a 1200 px wide div\n")
    print("| figure | x categories | tick labels drawn (x, y) | draw (ms) | against 512 |")
    print("|---|---:|---|---:|---:|")
    ref = statistics.median(times["512 tokens × 8 heads (pooled to 96)"])
    for name, spec in cases.items():
        ms = statistics.median(times[name])
        print(f"| {name} | {len(spec['data'][0]['x'])} | {ticks[name][0]}, {ticks[name][1]} | {ms:.1f} | "
              f"{ms / ref:.2f} |")


if __name__ == "__main__":
    main()
