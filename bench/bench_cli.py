"""20 PNG figures: one `render --spec` batch (one kaleido/Chromium session) against 20
separate `render` runs. Prints a Markdown table with both times and their ratio.

    python bench/bench_cli.py [--count 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VIEWS = ("grid", "head", "mean", "mask", "output", "query")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--batch-only", action="store_true", help="skip the 20 separate runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        figs = [(f"fig{i:02d}.png", VIEWS[i % len(VIEWS)], i) for i in range(args.count)]
        spec = ['[defaults]', 'text = "The cat sat on the mat because it was tired."', 'heads = 4',
                'mask = "causal"', 'width = 800', 'height = 600']
        for out, view, seed in figs:
            spec += ["[[figure]]", f'out = "{out}"', f'view = "{view}"', f"seed = {seed}"]
        (tmp / "spec.toml").write_text("\n".join(spec))
        render = [sys.executable, "-m", "attnviz", "render"]
        t0 = time.perf_counter()
        subprocess.run(render + ["--spec", str(tmp / "spec.toml")], check=True, capture_output=True)
        batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        for out, view, seed in ([] if args.batch_only else figs):
            subprocess.run(render + ["--text", "The cat sat on the mat because it was tired.", "--heads", "4",
                                     "--mask", "causal", "--view", view, "--seed", str(seed), "--width", "800",
                                     "--height", "600", "--out", str(tmp / ("single-" + out))],
                           check=True, capture_output=True)
        single = time.perf_counter() - t0
    print(f"| {args.count} PNG figures | time (s) | per figure (s) |")
    print("|---|---:|---:|")
    print(f"| one `--spec` batch | {batch:.1f} | {batch / args.count:.2f} |")
    if not args.batch_only:
        print(f"| {args.count} separate runs | {single:.1f} | {single / args.count:.2f} |")
        print(f"| ratio batch / separate | {batch / single:.2f} | |")


if __name__ == "__main__":
    main()
