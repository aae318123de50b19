"""The Q/K map's speed: one head's PCA map and t-SNE map of MiniLM over the shipped corpus,
from a cold cache (the corpus run included; the model loaded first, timed on its own).

    .venv/bin/python bench/bench_qkmap.py [--repeats 3] [--layer 0] [--head 0]

Targets (issue 35, on this project's 2-core machine): PCA ≤ 2 s, t-SNE ≤ 15 s. Prints each
run and the median as a ratio of its target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from attnviz.analysis import qkcorpus as Q  # noqa: E402
from attnviz.inputs.corpus import default_corpus  # noqa: E402
from attnviz.models import registry  # noqa: E402
from attnviz.views.state import ViewState  # noqa: E402

TARGETS = {"pca": 2.0, "tsne": 15.0}


def one(state: ViewState, lines: list[str], method: str) -> tuple[float, dict]:
    Q.RUNS.clear()  # a cold cache: the corpus is run again
    t0 = time.perf_counter()
    crun = Q.cached_corpus_run(state.config, lines)
    record = Q.head_map(crun, state.head, method=method, seed=state.seed)
    return time.perf_counter() - t0, {"forward": crun.seconds, "project": record["seconds"], **record}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--head", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(2)
    lines = default_corpus()
    t0 = time.perf_counter()
    registry.load(registry.MINILM)
    load = time.perf_counter() - t0
    state = ViewState.of(model=registry.MINILM, layer=args.layer, head=args.head)
    print(f"MiniLM-L6 layer {args.layer} head {args.head}, {len(lines)} sentences; model load {load:.2f} s "
          f"(once per process, not in the figures below)")
    for method in ("pca", "tsne"):
        times = []
        for i in range(args.repeats if method == "pca" else max(1, args.repeats - 1)):
            took, rec = one(state, lines, method)
            times.append(took)
            print(f"  {method:4s} run {i + 1}: {took:.2f} s (corpus forward {rec['forward']:.2f} s, normalisation and "
                  f"projection {rec['project']:.2f} s) · {rec['queries']} tokens, {2 * rec['queries']} points · "
                  f"agreement {rec['agreement']:.3f}, random baseline {rec['baseline']:.3f} (k = {rec['k']})")
        med = statistics.median(times)
        print(f"{method}: median {med:.2f} s = {med / TARGETS[method]:.2f}× its target of {TARGETS[method]:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
