"""Edge attribution's cost: ``attnviz.edge_attribution`` by EAP and by EAP-IG (inputs, 5 points) on a
GPT-2-small-shaped folder (random weights: 12 layers × 12 heads, width 768, a word-level vocabulary
of 2,000) at 24 tokens, against one forward pass of the same model in the same process.

Each call tokenizes both prompts, runs each once through the model (``patching.runs``), then the
split run forward and backward (EAP: once; EAP-IG: the 5 points in one batch) and the product of the
differences with the gradients: 32,000-odd edges. The model is loaded once (the registry's cache)
before the timing. Medians and minima of ``--runs``, interleaved.

    python bench/bench_eap.py [--runs 3] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import attnviz  # noqa: E402
from attnviz.analysis.subjects import registry_subject  # noqa: E402
from bench.bench_hf import build_model  # noqa: E402

TOKENS = 24


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (default: torch's own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # on a shared machine one thread waits less on the others' work
    with tempfile.TemporaryDirectory() as tmp:
        folder, _fast, words = build_model(Path(tmp))
        rng = np.random.default_rng(0)
        clean = [words[i] for i in rng.choice(len(words), TOKENS, replace=False)]
        corrupted = list(clean)
        corrupted[3], corrupted[10] = words[int(rng.integers(len(words)))], words[int(rng.integers(len(words)))]
        answer, wrong = words[1], words[2]
        subject = registry_subject(str(folder))  # loaded once, as the app's cache keeps it
        ids = torch.tensor([subject.ids(" ".join(clean))])

        def forward():
            with torch.no_grad():
                subject.stack.model(input_ids=ids, use_cache=False)

        def eap(method):  # noqa: ANN202
            return lambda: attnviz.edge_attribution(str(folder), " ".join(clean), " ".join(corrupted), answer=answer,
                                                    wrong=wrong, method=method, steps=5)

        work = {"forward": forward, "eap": eap("eap"), "eap-ig-inputs (5)": eap("eap-ig-inputs")}
        for fn in work.values():
            fn()  # warm: the model's load, torch's first calls
        times = {name: [] for name in work}
        for _ in range(args.runs):
            for name, fn in work.items():
                times[name].append(timed(fn))
        edges = len(eap("eap")())
    base = statistics.median(times["forward"])
    print(f"GPT-2-small-shaped (12 × 12 heads, width 768), {TOKENS} tokens, {edges} edges, CPU, "
          f"{torch.get_num_threads()} thread(s); {args.runs} runs")
    print()
    print("| what | median (s) | × one forward | min (s) | × one forward |")
    print("|---|---:|---:|---:|---:|")
    low = min(times["forward"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m:.3f} | {m / base:.1f} | {min(ts):.3f} | {min(ts) / low:.1f} |")


if __name__ == "__main__":
    main()
