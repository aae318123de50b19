"""Long contexts: ``attnviz.long_attention`` against the same model's forward pass with SDPA (which
keeps no weights) and, where it fits, with eager attention and ``output_attentions``.

A LLaMA-shaped folder built from its config (random weights: 2 layers, width 256, 8 query heads
over 2 key/value heads, rotary, 32,768 positions), read as token ids, N = 2k … 32k tokens.

- **time**: in one process per N, after a warm-up at 64 tokens, ``long_attention(blocks=256)`` and
  the SDPA forward pass of the model's body (no unembedding, as ``long_attention`` runs it),
  interleaved, best of ``--runs``; the ratio is long / SDPA;
- **memory**: the growth of the process's peak resident memory over one run, above what the loaded
  and warmed model holds, each path in a fresh process of its own (``ru_maxrss``);
- **output_attentions**: the eager forward pass that returns every layer's weights, where those
  weights (layers × 8 × N² × 4 B) stay under 2 GiB.

    python bench/bench_long.py [--lengths 2048,4096,8192,16384,32768] [--runs 1] [--threads T] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EAGER_MAX_BYTES = 2 * 2**30  # output_attentions' weights at most (layers × heads × N² × 4 B)
CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
folder, N, what, runs, threads = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
if threads:
    torch.set_num_threads(threads)
from transformers import AutoModelForCausalLM
from attnviz.analysis.longcontext import long_attention
from attnviz.models.registry import load
ids = [int(x) for x in np.random.default_rng(0).integers(4, 60, size=N)]
impl = "eager" if what == "eager" else "sdpa"
model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=impl).eval()
held = load(folder)

def sdpa():
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), use_cache=False)

def eager():
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), use_cache=False, output_attentions=True)

def long():
    long_attention(held, ids, blocks=256)

paths = {"sdpa": sdpa, "eager": eager, "long": long}
ids_short = ids
ids = ids_short[:64]
for f in paths.values() if what != "eager" else (eager,):
    f()  # loaded, twin made, warm
ids = ids_short
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
base = rss()
out = {"threads": torch.get_num_threads()}
order = {"time": ["long", "sdpa"], "eager": ["eager"], "mem-long": ["long"], "mem-sdpa": ["sdpa"]}[what]
for name in order:
    best = None
    for _ in range(runs if what in ("time", "eager") else 1):
        t0 = time.perf_counter()
        paths[name]()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    out[name + "_s"] = best
    out[name + "_grew"] = rss() - base
print(json.dumps(out))
"""


def child(folder: Path, n: int, what: str, runs: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(folder), str(n), what, str(runs), str(threads)],
                         capture_output=True, text=True, timeout=3600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode != 0:
        raise SystemExit(f"{what} at {n}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="2048,4096,8192,16384,32768")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads in each process (0: torch's default)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.support.longmodels import llama_shaped

    lengths = [int(x) for x in args.lengths.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = llama_shaped(Path(tmp), positions=max(lengths), width=256, heads=8, kv=2, layers=2)
        for n in lengths:
            t0 = time.perf_counter()
            timed = child(folder, n, "time", args.runs, args.threads)
            mem_long = child(folder, n, "mem-long", 1, args.threads)["long_grew"]
            mem_sdpa = child(folder, n, "mem-sdpa", 1, args.threads)["sdpa_grew"]
            eager = None
            if 2 * 8 * n * n * 4 <= EAGER_MAX_BYTES:
                eager = child(folder, n, "eager", args.runs, args.threads)
            rows.append({"n": n, "long_s": timed["long_s"], "sdpa_s": timed["sdpa_s"], "mem_long": mem_long,
                         "mem_sdpa": mem_sdpa, "eager_s": eager and eager["eager_s"],
                         "mem_eager": eager and eager["eager_grew"], "threads": timed["threads"]})
            print(f"# N={n} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    mb = 2**20
    head = ("| N | long_attention | SDPA forward | long / SDPA | peak growth: long / SDPA | output_attentions "
            "(time, peak growth) |")
    lines = [head, "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        eager = f"{r['eager_s']:.2f} s, {r['mem_eager'] / mb:,.0f} MB" if r["eager_s"] is not None else "does not fit"
        lines.append(f"| {r['n']:,} | {r['long_s']:.2f} s | {r['sdpa_s']:.2f} s | {r['long_s'] / r['sdpa_s']:.2f}× | "
                     f"{r['mem_long'] / mb:,.0f} MB / {r['mem_sdpa'] / mb:,.0f} MB | {eager} |")
    print(f"LLaMA-shaped folder (2 layers, width 256, 8 query heads over 2 KV heads), torch threads: "
          f"{rows[0]['threads']}; load average {os.getloadavg()[0]:.1f}")
    print("\n".join(lines) if args.markdown else json.dumps(rows, indent=1))
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        grow = b["n"] / a["n"]
        print(f"From N = {a['n']:,} to {b['n']:,} (×{grow:.0f}): long_attention's time "
              f"×{b['long_s'] / a['long_s']:.1f}, SDPA's ×{b['sdpa_s'] / a['sdpa_s']:.1f}; "
              f"long_attention's peak growth "
              f"×{b['mem_long'] / max(1, a['mem_long']):.1f}, SDPA's ×{b['mem_sdpa'] / max(1, a['mem_sdpa']):.1f}")


if __name__ == "__main__":
    main()
