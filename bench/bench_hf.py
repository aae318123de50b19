"""Your own model's attention: attnviz against calling transformers directly, the server's
memory serving it, and head_view against BertViz.

1. A GPT-2-small-sized model built from its config (random weights, 12 layers × 12 heads,
   width 768), saved to a temporary folder: transformers' own forward pass with
   ``output_attentions=True`` (eager attention, every layer's weights stacked) against
   ``attnviz.compute`` on that folder (tokenizing, the run, every layer's weights brought
   back), at 128 and 1024 tokens, 7 runs each, interleaved in one process; the ratio is
   attnviz / transformers of the medians (at 1024 tokens one run allocates 0.6 GB of
   weights, and the page faults that costs make single runs vary by ±20%).
2. The app's server (``python -m ui.server``) with that folder listed in
   ``ATTNVIZ_MODEL_DIRS``: its RSS idle, with the model loaded (one session), and its peak
   while 30 sessions join at once, each with its own 24–96-word text on the model, and edit
   3 times (join and edit p50 printed too).
3. ``attnviz.notebook.head_view`` on a (12, 12, 512, 512) attention against BertViz 1.4.1's
   ``head_view`` on the same input: the time until the HTML is made and its size. BertViz
   (and IPython, which it imports) is installed into ``.bench/site`` the first time, with
   ``pip install --target``; the benchmark's environment only, not the project's.

    python bench/bench_hf.py [--skip-server]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_SITE = ROOT / ".bench" / "site"

import torch  # noqa: E402

# 12 layers × 12 heads × 1024² weights are about 0.6 GB (1.2 GB with transformers' own
# copies): over the default per-run budget (448 MB), so this runs as a server configured
# for such a model would.
os.environ.setdefault("ATTNVIZ_MEMORY_BUDGET_MB", "4096")
NAME = "gpt2-small-random"


def build_model(root: Path, vocab_size: int | None = None):
    """A GPT-2-small-sized model (random weights) and a word-level tokenizer of 2,000 words, saved
    to a folder; ``vocab_size``: the model's vocabulary (default: the tokenizer's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = [f"w{i}" for i in range(2000)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(words)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    folder = root / NAME
    GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size or fast.vocab_size, bos_token_id=0,
                               eos_token_id=0)).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder, fast, words


def against_transformers(folder: Path, fast, words: list[str]) -> None:
    from transformers import AutoModelForCausalLM

    from attnviz import AttentionConfig, compute

    model = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    print("GPT-2-small-sized (12 layers × 12 heads, width 768, random weights), CPU, 2 threads; median of 7 "
          "interleaved runs (the ratio is of the medians)")
    print()
    print("| tokens | transformers, output_attentions (s) | attnviz.compute (s) | ratio |")
    print("|---:|---:|---:|---:|")
    for L in (128, 1024):
        text = " ".join(words[i % len(words)] for i in range(L))
        ids = fast(text, return_tensors="pt")

        def direct(ids=ids):
            with torch.no_grad():
                out = model(**ids, output_attentions=True)
            return torch.stack(out.attentions)  # (layers, N, H, L, L)

        cfg = AttentionConfig(text=text, model=str(folder))
        compute(cfg)  # the model is loaded once per process, as on a server
        a, b = [], []
        for _ in range(7):  # interleaved; collected first, so neither pays for the other's garbage
            for fn, times in ((direct, a), (lambda cfg=cfg: compute(cfg), b)):
                gc.collect()
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {L} | {ma:.3f} (best {min(a):.3f}) | {mb:.3f} (best {min(b):.3f}) | {mb / ma:.2f} |", flush=True)
    print()


def serving(root: Path, words: list[str]) -> None:
    from tests.support.stclient import Session, free_port_block, rss_bytes, wait_healthy

    port = free_port_block()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ATTNVIZ_MODEL_DIRS": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "ui.server", "--server.port", str(port), "--server.address",
                             "127.0.0.1"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    rng = random.Random(0)

    def link() -> str:
        return urlencode({"model": NAME, "text": " ".join(rng.choice(words[:300]) for _ in range(rng.randint(24, 96)))})

    async def warm() -> None:
        s = Session(base)
        await s.connect()
        await s.rerun("")  # the random model: the server's own baseline
        await s.close()

    async def load() -> float:
        s = Session(base)
        await s.connect()
        t0 = time.perf_counter()
        while (await s.rerun(link())).charts == 0:  # the load's progress bar, until the model is ready
            await asyncio.sleep(0.5)
        await s.close()
        return time.perf_counter() - t0

    joins, edits, errors = [], [], []

    async def student() -> None:
        s = Session(base)
        t0 = time.perf_counter()
        await s.connect()
        r = await s.rerun(link())
        joins.append(time.perf_counter() - t0)
        errors.extend([r.error] if not r.ok else [])
        for _ in range(3):
            await asyncio.sleep(rng.uniform(0, 4))
            r = await s.rerun(link())
            edits.append(r.seconds)
            errors.extend([r.error] if not r.ok else [])
        await s.close()

    async def classroom() -> None:
        await asyncio.gather(*(student() for _ in range(30)))

    try:
        wait_healthy(base, proc)
        asyncio.run(warm())
        idle = rss_bytes(proc.pid)
        loaded_in = asyncio.run(load())
        loaded = rss_bytes(proc.pid)
        peak, stop = [loaded], threading.Event()

        def watch():
            while not stop.wait(0.2):
                peak.append(rss_bytes(proc.pid))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        asyncio.run(classroom())
        stop.set()
        watcher.join()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    print("The app's server (one process) serving the GPT-2-small-sized model:")
    print()
    print("| server | RSS |")
    print("|---|---:|")
    print(f"| idle (one session on the random model) | {idle / 2**20:,.0f} MiB |")
    print(f"| the model loaded (one session; {loaded_in:.1f} s from the link to its figures) | "
          f"{loaded / 2**20:,.0f} MiB |")
    print(f"| peak while 30 sessions join at once on the model and edit 3 times | {max(peak) / 2**20:,.0f} MiB |")
    print()
    print(f"30 sessions on the model: join p50 {statistics.median(joins):.2f} s, max {max(joins):.2f} s; edit p50 "
          f"{statistics.median(edits):.2f} s, p95 {sorted(edits)[int(0.95 * (len(edits) - 1))]:.2f} s; "
          f"{len(errors)} errors")
    print()


def bertviz_head_view():
    """BertViz's head_view, installed into the benchmark's own folder if need be."""
    if str(BENCH_SITE) not in sys.path:
        sys.path.append(str(BENCH_SITE))  # after the project's packages: they win
    try:
        from bertviz import head_view
    except ImportError:
        print("installing bertviz==1.4.1 and IPython into .bench/site ...", file=sys.stderr)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(BENCH_SITE)]
        subprocess.run([*pip, "--no-deps", "bertviz==1.4.1"], check=True)
        subprocess.run([*pip, "ipython"], check=True)
        from bertviz import head_view
    return head_view


def head_views() -> None:
    from attnviz.notebook import head_view

    attention = tuple(torch.softmax(torch.randn(1, 12, 512, 512), -1) for _ in range(12))
    tokens = [f"t{i}" for i in range(512)]
    theirs_fn = bertviz_head_view()
    print("| head_view on (12, 12, 512, 512) | time to the HTML | HTML size |")
    print("|---|---:|---:|")
    rows = {}
    for name, fn in (("attnviz.head_view", lambda: head_view(attention, tokens, html_action="return").data),
                     ("BertViz 1.4.1 head_view", lambda: theirs_fn(attention, tokens, html_action="return").data)):
        t0 = time.perf_counter()
        html = fn()
        rows[name] = (time.perf_counter() - t0, len(html.encode()))
        print(f"| {name} | {rows[name][0]:.2f} s | {rows[name][1] / 2**20:.1f} MiB |", flush=True)
    (a, sa), (b, sb) = rows.values()
    print(f"| ratio attnviz / BertViz | {a / b:.2f} | {sa / sb:.2f} |")
    print()
    print("BertViz's HTML also loads d3 and jQuery from a CDN when it is opened; attnviz's carries its own "
          "Plotly and needs no network.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-server", action="store_true", help="only the forward-pass ratio and head_view")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="attnviz-bench-models-"))
    folder, fast, words = build_model(root)
    against_transformers(folder, fast, words)
    if not args.skip_server:
        serving(root, words)
    head_views()


if __name__ == "__main__":
    main()
