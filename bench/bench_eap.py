"""Edge attribution's cost: ``attnviz.edge_attribution`` by EAP and by EAP-IG (inputs, 5 points), the
faithfulness curve (nine points) and the exact effects of the top 20 edges (``path_patch(edges=)``) on a
GPT-2-small-shaped folder (random weights: 12 layers × 12 heads, width 768, a word-level vocabulary
of 2,000) at 24 tokens, against one forward pass of the same model in the same process. With
``--growth``: the same at 12, 24, 48 and 96 tokens, and on a 6-layer × 8-head × 256 folder.

Each call tokenizes both prompts, runs each once through the model (``patching.runs``), then the
split run forward and backward (EAP: once; EAP-IG: the 5 points in one batch) and the product of the
differences with the gradients: 32,000-odd edges. The model is loaded once (the registry's cache)
before the timing. Medians and minima of ``--runs``, interleaved.

    python bench/bench_eap.py [--runs 3] [--threads N] [--growth]
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


def prompts(words: list[str], tokens: int) -> tuple[str, str, str, str]:
    rng = np.random.default_rng(0)
    clean = [words[i] for i in rng.choice(len(words), tokens, replace=False)]
    corrupted = list(clean)
    corrupted[3], corrupted[tokens // 2] = words[int(rng.integers(len(words)))], words[int(rng.integers(len(words)))]
    return " ".join(clean), " ".join(corrupted), words[1], words[2]


def work_of(folder: Path, words: list[str], tokens: int) -> dict:
    """What the Circuit page computes, each as a call: EAP, EAP-IG, the curve, the top 20 edges' exact effects
    (the last two on an attribution made once, as the page's job makes it)."""
    clean, corrupted, answer, wrong = prompts(words, tokens)
    subject = registry_subject(str(folder))  # loaded once, as the app's cache keeps it
    ids = torch.tensor([subject.ids(clean)])
    pair = {"answer": answer, "wrong": wrong}

    def forward():
        with torch.no_grad():
            subject.stack.model(input_ids=ids, use_cache=False)

    def eap(method):  # noqa: ANN202
        return lambda: attnviz.edge_attribution(str(folder), clean, corrupted, method=method, steps=5, **pair)

    scored = eap("eap-ig-inputs")()
    top = [n for n, _s in scored.top(20)]
    return {"forward": forward, "eap": eap("eap"), "eap-ig-inputs (5)": eap("eap-ig-inputs"),
            "faithfulness curve (9 points)": lambda: attnviz.faithfulness_curve(str(folder), clean, corrupted,
                                                                                attribution=scored, **pair),
            "exact effects of the top 20": lambda: attnviz.path_patch(str(folder), clean, corrupted, edges=top, **pair),
            "_edges": len(scored)}


def table(work: dict, runs: int) -> dict[str, list[float]]:
    calls = {k: v for k, v in work.items() if not k.startswith("_")}
    for fn in calls.values():
        fn()  # warm: the model's load, torch's first calls
    times = {name: [] for name in calls}
    for _ in range(runs):
        for name, fn in calls.items():
            times[name].append(timed(fn))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (default: torch's own)")
    parser.add_argument("--growth", action="store_true", help="also 12, 48 and 96 tokens, and a 6 × 8 × 256 folder")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # on a shared machine one thread waits less on the others' work
    with tempfile.TemporaryDirectory() as tmp:
        folder, _fast, words = build_model(Path(tmp))
        work = work_of(folder, words, TOKENS)
        times = table(work, args.runs)
        print(f"GPT-2-small-shaped (12 × 12 heads, width 768), {TOKENS} tokens, {work['_edges']} edges, CPU, "
              f"{torch.get_num_threads()} thread(s); {args.runs} runs")
        print()
        print("| what | median (s) | × one forward | min (s) | × one forward |")
        print("|---|---:|---:|---:|---:|")
        base, low = statistics.median(times["forward"]), min(times["forward"])
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"| {name} | {m:.3f} | {m / base:.1f} | {min(ts):.3f} | {min(ts) / low:.1f} |")
        if not args.growth:
            return
        small = Path(tmp) / "small"
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config(vocab_size=_fast.vocab_size, n_layer=6, n_head=8, n_embd=256, bos_token_id=0,
                                   eos_token_id=0)).save_pretrained(small)
        _fast.save_pretrained(small)
        print()
        print("Growth (median of the runs, seconds; the forward pass for scale):")
        print()
        names = [k for k in times]
        print("| model | tokens | edges | " + " | ".join(names) + " |")
        print("|---|---:|---:|" + "---:|" * len(names))
        for label, where in (("6 × 8 × 256", small), ("12 × 12 × 768", folder)):
            for tokens in (12, 24, 48, 96):
                w = work_of(where, words, tokens)
                t = table(w, args.runs)
                print(f"| {label} | {tokens} | {w['_edges']} | " +
                      " | ".join(f"{statistics.median(t[k]):.3f}" for k in names) + " |", flush=True)


if __name__ == "__main__":
    main()
