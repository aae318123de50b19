"""Activation patching's sweep: attnviz against a plain loop of one hooked forward pass per head
and against TransformerLens's own sweep, on the same folder, in one process.

A GPT-2-small-shaped model built from its config (random weights: 12 layers × 12 heads, width
768, GPT-2's vocabulary of 50,257), saved to a temporary folder; a clean prompt of 20 tokens and
a corrupted one with two of them changed; the metric logit[answer] − logit[wrong].

- **heads**: ``attnviz.patch_heads`` (tokenizing, the clean and the corrupted run, then one batch
  per layer started from the corrupted stream at that layer) against the plain loop
  (``tests/support/reference.hf_patched_heads``: the clean run, then 144 whole forward passes, a
  pre-hook on W_O replacing one head's slice) and against TransformerLens 4.3's bridge over the
  folder (``run_with_cache`` of the clean prompt, then
  ``patching.get_act_patch_attn_head_out_all_pos``).
- **residual**: ``attnviz.patch_residual`` against ``patching.get_act_patch_resid_pre`` (240
  forward passes), the same way.

Each is run ``--runs`` times, interleaved; the table gives medians and the ratio of each
reference's median to attnviz's (above 1: attnviz is faster), the largest difference between
the numbers (they must agree to 1e-4) and their spread (that there is something to agree on).

With ``--server``, what the Patching page costs the server instead, on the same folder: the
whole sweep the page runs (every head, every layer × position, the attribution and both prompts'
attention) for the default-sized 20-token prompts and for the longest a link may hold
(``MAX_PATCH_TOKENS``), with its batches (each a turn on the compute workers) and the longest;
and one rerun of the page with its sweep cached (AppTest, median of ``--runs``) against one
rerun of the explorer's default link in the same process.

    python bench/bench_patching.py [--runs 5] [--server]
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
os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens's sweeps draw a progress bar per run

import numpy as np  # noqa: E402
import torch  # noqa: E402

import attnviz  # noqa: E402
from attnviz.analysis.subjects import registry_subject  # noqa: E402
from bench.bench_hf import build_model  # noqa: E402
from tests.support.reference import hf_patched_heads  # noqa: E402

TOKENS = 20


def build(root: Path):
    """The GPT-2-small-shaped folder (GPT-2's vocabulary of 50,257) and two prompts of TOKENS words."""
    folder, _fast, words = build_model(root, vocab_size=50_257)
    rng = np.random.default_rng(0)
    clean = [words[i] for i in rng.choice(len(words), TOKENS, replace=False)]
    corrupted = list(clean)
    corrupted[3], corrupted[11] = words[-2], words[-1]
    return folder, " ".join(clean), " ".join(corrupted)


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def server_costs(root: Path, runs: int) -> None:
    """The page's sweep at 20 and at MAX_PATCH_TOKENS tokens; a rerun with it cached against the explorer's."""
    from urllib.parse import quote

    from attnviz import limits
    from attnviz.models.registry import MODEL_DIRS_ENV
    from attnviz.views import patching as V
    from attnviz.views.state import DEFAULTS
    from tests.support.apphelp import app

    folder, clean, corrupted = build(root)
    answer, wrong = "w5", "w7"

    def lengthened(text: str, n: int) -> str:
        words = text.split()
        return " ".join((words * (n // len(words) + 1))[:n])

    print(f"GPT-2-small-shaped, CPU, {torch.get_num_threads()} threads: the Patching page's whole sweep (heads, "
          "residual, attribution, both prompts' attention), once each")
    print()
    print("| prompt tokens | sweep (s) | its time / 20 tokens' | batches | "
          "longest batch: a turn on the compute workers (s) |")
    print("|---:|---:|---:|---:|---:|")
    base = None
    for n in (TOKENS, limits.MAX_PATCH_TOKENS):
        c, k = lengthened(clean, n), lengthened(corrupted, n)
        state = DEFAULTS.with_(model=str(folder), clean=c, corrupted=k, answer=answer, wrong=wrong)
        V.run_of(state)  # warm (and loaded)
        turns = []

        def step(work, turns=turns):
            seconds, value = timed(work)
            turns.append(seconds)
            return value

        seconds, _run = timed(lambda state=state, step=step: V.run_of(state, step=step))
        base = base or seconds
        print(f"| {n} | {seconds:.2f} | {seconds / base:.1f}× | {len(turns)} | {max(turns):.2f} |")

    os.environ[MODEL_DIRS_ENV] = str(folder.parent)
    page = app(f"model={folder.name}&clean={quote(clean)}&corrupted={quote(corrupted)}&answer={answer}&wrong={wrong}",
               page="app_pages/patching.py", timeout=600)
    assert not page.exception and not page.error, [e.value for e in page.error]
    explorer = app()
    med = {}
    for name, at in (("Patching page, its sweep cached", page), ("explorer, its default link", explorer)):
        times = []
        for _ in range(runs):
            seconds, _ = timed(at.run)
            times.append(seconds)
        med[name] = statistics.median(times)
    print()
    print(f"One rerun through AppTest (the server's script run and its messages), median of {runs}:")
    print()
    print("| page | rerun (ms) | its time / the explorer's |")
    print("|---|---:|---:|")
    ref = med["explorer, its default link"]
    for name, seconds in med.items():
        print(f"| {name} | {seconds * 1e3:.0f} | {seconds / ref:.2f}× |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--server", action="store_true", help="what the Patching page costs the server (see above)")
    args = ap.parse_args()
    if args.server:
        with tempfile.TemporaryDirectory() as tmp:
            server_costs(Path(tmp), args.runs)
        return
    from transformer_lens import patching
    from transformer_lens.model_bridge import TransformerBridge

    with tempfile.TemporaryDirectory() as tmp:
        folder, clean, corrupted = build(Path(tmp))
        answer, wrong = "w5", "w7"
        subject = registry_subject(str(folder))  # loaded once, as the app holds it
        hf = subject.hf.model
        bridge = TransformerBridge.boot_transformers(str(folder))
        ids = {k: torch.tensor([subject.ids(t)]) for k, t in (("clean", clean), ("corrupted", corrupted))}
        a, w = subject.token(answer, "answer"), subject.token(wrong, "wrong")

        def metric(logits):
            return logits[0, -1, a] - logits[0, -1, w]

        def tl_heads():
            _logits, cache = bridge.run_with_cache(ids["clean"])
            return patching.get_act_patch_attn_head_out_all_pos(bridge, ids["corrupted"], cache, metric)

        def tl_residual():
            _logits, cache = bridge.run_with_cache(ids["clean"])
            return patching.get_act_patch_resid_pre(bridge, ids["corrupted"], cache, metric)

        sweeps = {
            "heads": {
                "attnviz.patch_heads": lambda: attnviz.patch_heads(str(folder), clean, corrupted, answer=answer,
                                                                   wrong=wrong).heads,
                "plain loop, one hooked forward pass per head": lambda: hf_patched_heads(
                    hf, subject.stack.o, ids["clean"], ids["corrupted"], a, w),
                "TransformerLens get_act_patch_attn_head_out_all_pos": lambda: tl_heads().detach().numpy(),
            },
            "residual": {
                "attnviz.patch_residual": lambda: attnviz.patch_residual(str(folder), clean, corrupted, answer=answer,
                                                                         wrong=wrong).residual,
                "TransformerLens get_act_patch_resid_pre": lambda: tl_residual().detach().numpy(),
            },
        }
        print(f"GPT-2-small-shaped (12 layers × 12 heads, width 768, vocabulary 50,257, random weights), {TOKENS} "
              f"tokens, CPU, {torch.get_num_threads()} threads; median of {args.runs} interleaved runs")
        print()
        print("| sweep | implementation | median (s) | its time / attnviz's | largest difference from attnviz | "
              "spread of its values (max − min) |")
        print("|---|---|---:|---:|---:|---:|")
        for sweep, fns in sweeps.items():
            for fn in fns.values():  # warm: the first call of each allocates
                fn()
            times = {name: [] for name in fns}
            values = {}
            with torch.no_grad():
                for _ in range(args.runs):
                    for name, fn in fns.items():
                        seconds, values[name] = timed(fn)
                        times[name].append(seconds)
            ours = next(iter(fns))
            base = statistics.median(times[ours])
            for name in fns:
                med = statistics.median(times[name])
                diff = float(np.abs(np.asarray(values[name], dtype=np.float64) - values[ours]).max())
                spread = float(np.ptp(np.asarray(values[name], dtype=np.float64)))
                print(f"| {sweep} | {name} | {med:.3f} | {med / base:.2f}× | {diff:.1e} | {spread:.2e} |")
                if diff > 1e-4:
                    raise SystemExit(f"{name} disagrees with {ours} by {diff:.2e}")


if __name__ == "__main__":
    main()
