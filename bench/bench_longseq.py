"""Long sequences: the tiled path's peak memory and time against the naive path and SDPA.

For L in 2048, 4096, 8192 (H=8, D=64, no mask, float32, CPU), each path runs in a fresh
process that first allocates Q, K and V; the table gives
- the peak of live tensors the path created (attnviz.analysis.tensorbytes.peak_tensor_bytes),
- the process's peak RSS above its peak once Q, K and V were allocated (this also sees
  buffers a fused kernel keeps out of the tensor tracker's sight),
- the median time of 3 runs after one warm-up, and the ratio to SDPA in the same row.

    python bench/bench_longseq.py [--lengths 2048 4096 8192] [--heads 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, sys, torch
torch.set_num_threads(2)
import torch.nn.functional as F
from attnviz.analysis.longseq import naive, timed
from attnviz.analysis.tensorbytes import peak_tensor_bytes
from attnviz.core.efficient import tiled_attention
path, L, H, D = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, H, L, D, generator=g) for _ in range(3))
path = {"naive": naive, "tiled": lambda q, k, v: tiled_attention(q, k, v, block_q=64, block_k=64),
        "sdpa": F.scaled_dot_product_attention}[path]
fn = lambda: path(q, k, v)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.no_grad():
    fn()
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    tracked = peak_tensor_bytes(path, q, k, v)
    ms = timed(fn, "cpu", repeats=3)
print(json.dumps({"tracked": tracked, "rss": rss, "ms": ms}))
"""


def run(path: str, L: int, H: int, D: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(L), str(H), str(D)], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    a = ap.parse_args()
    print(f"CPU, 2 threads, H={a.heads}, D={a.head_dim}, N=1, float32, blocks 64 × 64, no mask")
    print()
    print("| L | path | peak tensors (MB) | peak RSS over baseline (MB) | time (ms) | time / SDPA | "
          "peak tensors / naive's |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for L in a.lengths:
        rows = {p: run(p, L, a.heads, a.head_dim) for p in ("naive", "tiled", "sdpa")}
        for p, r in rows.items():
            print(f"| {L} | {p} | {r['tracked'] / 2**20:,.1f} | {max(0, r['rss']) / 2**20:,.1f} | {r['ms']:,.1f} | "
                  f"{r['ms'] / rows['sdpa']['ms']:.2f} | {r['tracked'] / rows['naive']['tracked']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
