"""The logit lens's cost, and a tuned lens trained here.

1. ``attnviz.logit_lens`` (every point, middles included: 25 on a GPT-2-small shape) on a
   GPT-2-small-shaped folder (random weights: 12 layers × 12 heads, width 768; ``bench_hf.build_model``)
   at 64 tokens, final-scale and per-layer, with an answer, against its floor in the same process: one
   forward pass of the model plus one unembedding (64 × 768 by 768 × V) per point. Twice: with GPT-2's
   vocabulary of 50,257, where the 25 unembeddings cost more than the forward, and with a small one
   (the tokenizer's 2,002 words), where the floor is about one forward. Medians and minima of
   ``--runs``, interleaved, the ratios printed.
2. ``--model NAME``: a real model (``smollm2-135m``: 30 layers, a vocabulary of 49,152) on its Logit lens
   page's fact ("The Eiffel Tower is located in the city of", 10 tokens, 61 points with the middles), against
   two floors in the same process: one forward pass alone, and the plain batched lens (the forward, then every
   point's streams through the final norm and W_U in one product, a log-softmax and a top-5): the work the
   page's first reading cannot avoid.
3. ``--train STEPS``: ``attnviz.train_lens`` on a GPT-2-small-shaped folder whose word-level tokenizer
   reads the built-in corpus (``attnviz/inputs/corpus.txt``), trained on four of every five of its
   sentences, then each layer's KL to the model's own distribution, the logit lens's (per-layer) against
   the tuned lens's, averaged over the held-out fifth's tokens.

    python bench/bench_lens.py [--runs 3] [--threads N] [--model smollm2-135m] [--train STEPS]
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
from attnviz.analysis.lens import points_of  # noqa: E402
from attnviz.analysis.subjects import registry_subject  # noqa: E402
from attnviz.inputs.corpus import default_corpus  # noqa: E402
from bench.bench_hf import build_model  # noqa: E402

TOKENS = 64
GPT2_VOCAB = 50_257


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cost(runs: int, vocab: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder, fast, words = build_model(Path(tmp), vocab_size=vocab)
        vocab = vocab or fast.vocab_size
        rng = np.random.default_rng(0)
        text = " ".join(words[i] for i in rng.choice(len(words), TOKENS, replace=False))
        subject = registry_subject(str(folder), "lens")  # loaded once, as the app's cache keeps it
        ids = torch.tensor([subject.ids(text)])
        u = subject.stack.unembedding()
        points = len(points_of(subject.stack, subject.stack.run(ids)))

        def floor():
            with torch.no_grad():
                subject.stack.model(input_ids=ids, use_cache=False)
                x = torch.randn(TOKENS, u.w_u.shape[1])
                for _ in range(points):
                    x @ u.w_u.T  # (L, V)

        def lens(mode):  # noqa: ANN202
            return lambda: attnviz.logit_lens(str(folder), text, mode=mode, answer=words[1])

        work = {"floor: forward + one unembedding per point": floor, "logit_lens final-scale": lens("final-scale"),
                "logit_lens per-layer": lens("per-layer")}
        for fn in work.values():
            fn()  # warm: the model's load, torch's first calls
        times = {name: [] for name in work}
        for _ in range(runs):
            for name, fn in work.items():
                times[name].append(timed(fn))
    base, low = statistics.median(times[next(iter(work))]), min(times[next(iter(work))])
    print(f"GPT-2-small-shaped (12 × 12 heads, width 768, vocabulary {vocab:,}), {TOKENS} tokens, {points} "
          f"points, CPU, {torch.get_num_threads()} thread(s); {runs} runs")
    print()
    print("| what | median (s) | × floor | min (s) | × floor |")
    print("|---|---:|---:|---:|---:|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m:.3f} | {m / base:.2f} | {min(ts):.3f} | {min(ts) / low:.2f} |")


def real(runs: int, model: str) -> None:
    from attnviz.analysis.examples import FACT
    from attnviz.analysis.lens import unembed

    subject = registry_subject(model, "lens")  # loaded once, as the app's cache keeps it
    ids = torch.tensor([subject.ids(FACT)])
    u = subject.stack.unembedding()

    def forward():
        with torch.no_grad():
            subject.stack.model(input_ids=ids, use_cache=False)

    def batched():  # the forward, then every point at once: one product, a log-softmax, a top-5
        with torch.no_grad():
            trace = subject.stack.run(ids)
            points = points_of(subject.stack, trace, True)
            x = torch.cat([p.stream for p in points])  # (P·L, E)
            logq = torch.log_softmax(unembed(u, x, u.scale(x)), -1)  # (P·L, V)
            logq.topk(5, -1)

    def lens(mode):  # noqa: ANN202
        return lambda: attnviz.logit_lens(model, FACT, mode=mode, answer="ĠParis")

    work = {"one forward pass": forward, "floor: the plain batched lens": batched,
            "logit_lens final-scale": lens("final-scale"), "logit_lens per-layer": lens("per-layer")}
    for fn in work.values():
        fn()
    times = {name: [] for name in work}
    for _ in range(runs):
        for name, fn in work.items():
            times[name].append(timed(fn))
    base = statistics.median(times["floor: the plain batched lens"])
    one = statistics.median(times["one forward pass"])
    print(f"{model}, {ids.shape[1]} tokens, CPU, {torch.get_num_threads()} thread(s); {runs} runs (medians)")
    print()
    print("| what | median (s) | × one forward | × the batched lens |")
    print("|---|---:|---:|---:|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m:.3f} | {m / one:.2f} | {m / base:.2f} |")


def corpus_model(root: Path) -> Path:
    """A GPT-2-small-shaped folder (random weights) whose word-level tokenizer reads the built-in corpus."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(default_corpus(), trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    folder = root / "gpt2-small-corpus"
    GPT2LMHeadModel(GPT2Config(vocab_size=fast.vocab_size, bos_token_id=0, eos_token_id=0)).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def train(steps: int) -> None:
    lines = default_corpus()
    held, train_lines = lines[4::5], [line for i, line in enumerate(lines) if i % 5 != 4]
    with tempfile.TemporaryDirectory() as tmp:
        folder = corpus_model(Path(tmp))
        attnviz.logit_lens(str(folder), held[0])  # the model's load, outside the training's time
        t0 = time.perf_counter()
        lens = attnviz.train_lens(str(folder), train_lines, steps=steps, seed=0)
        seconds = time.perf_counter() - t0
        tuned, plain, tokens = 0.0, 0.0, 0
        for line in held:
            a = attnviz.logit_lens(str(folder), line, lens=lens)
            b = attnviz.logit_lens(str(folder), line, mode="per-layer", mid=False)
            tuned, plain, tokens = tuned + a.kl[:-1].sum(-1), plain + b.kl[:-1].sum(-1), tokens + a.kl.shape[1]
    tuned, plain = tuned / tokens, plain / tokens
    print(f"train_lens on a GPT-2-small-shaped folder (random weights, the corpus's {lens.fit['tokens']:,} training "
          f"tokens, vocabulary of its words), {steps} steps of {lens.fit['batch']} tokens: {seconds:.1f} s on "
          f"{torch.get_num_threads()} thread(s); held-out: {len(held)} sentences, {tokens} tokens")
    print()
    print("| point | logit lens KL | tuned lens KL | tuned / logit |")
    print("|---|---:|---:|---:|")
    for name, p, t in zip(a.points[:-1], plain, tuned, strict=True):
        print(f"| {name} | {p:.4f} | {t:.4f} | {t / p:.2f} |")
    print(f"\nlower at every layer: {bool((tuned < plain).all())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (default: torch's own)")
    parser.add_argument("--model", default="", help="a real model's name or path (3.: its lens against its floors)")
    parser.add_argument("--train", type=int, default=0, metavar="STEPS", help="train a tuned lens (and skip 1.)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model:
        real(args.runs, args.model)
    elif args.train:
        train(args.train)
    else:
        for vocab in (GPT2_VOCAB, None):  # GPT-2's, then the tokenizer's own 2,002 words
            cost(args.runs, vocab)
            print()


if __name__ == "__main__":
    main()
