"""Your own model's attention: attnviz against calling transformers directly, and head_view.

1. A GPT-2-small-sized model built from its config (random weights, 12 layers × 12 heads,
   width 768), saved to a temporary folder: transformers' own forward pass with
   ``output_attentions=True`` (eager attention) against ``attnviz.compute`` on that folder
   (tokenizing, the run, every layer's weights brought back), at 128 and 1024 tokens, best of
   3 each, interleaved in one process; the ratio is attnviz / transformers. Peak RSS with the
   model loaded is printed too.
2. ``attnviz.notebook.head_view`` on a (12, 12, 512, 512) attention: the time until the HTML
   is written and its size; BertViz 1.4.1's ``head_view`` on the same input where it is
   installed in this environment (``pip install bertviz==1.4.1``).

    python bench/bench_hf.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import os  # noqa: E402

import torch  # noqa: E402

# 12 layers × 12 heads × 1024² weights are about 1.4 GB: over the default per-run budget
# (448 MB), so this benchmark runs as a server configured for it would.
os.environ.setdefault("ATTNVIZ_MEMORY_BUDGET_MB", "4096")


def best(fn, repeats: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from attnviz import AttentionConfig, compute

    torch.manual_seed(0)
    words = [f"w{i}" for i in range(2000)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(words)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    folder = Path(tempfile.mkdtemp(prefix="attnviz-bench-gpt2-"))
    GPT2LMHeadModel(GPT2Config(vocab_size=fast.vocab_size, bos_token_id=0, eos_token_id=0)).save_pretrained(folder)
    fast.save_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    print("GPT-2-small-sized (12 layers × 12 heads, width 768, random weights), CPU, 2 threads")
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
        a, b = best(direct), best(lambda cfg=cfg: compute(cfg))
        print(f"| {L} | {a:.3f} | {b:.3f} | {b / a:.2f} |", flush=True)
    print()
    print(f"Peak RSS with the model loaded (and both copies: transformers' and attnviz's): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    print()
    from attnviz.notebook import head_view

    attention = tuple(torch.softmax(torch.randn(1, 12, 512, 512), -1) for _ in range(12))
    tokens = [f"t{i}" for i in range(512)]
    t0 = time.perf_counter()
    html = head_view(attention, tokens, html_action="return").data
    ours = time.perf_counter() - t0
    print("| head_view on (12, 12, 512, 512) | time to the HTML | HTML size |")
    print("|---|---:|---:|")
    print(f"| attnviz.notebook.head_view | {ours:.2f} s | {len(html.encode()) / 2**20:.1f} MiB |")
    try:
        from bertviz import head_view as bertviz_head_view
    except ImportError:
        print("| BertViz 1.4.1 | not installed here (pip install bertviz==1.4.1) | |")
        return
    t0 = time.perf_counter()
    theirs = bertviz_head_view(attention, tokens, html_action="return").data
    print(f"| BertViz 1.4.1 head_view | {time.perf_counter() - t0:.2f} s | {len(theirs.encode()) / 2**20:.1f} MiB |")


if __name__ == "__main__":
    main()
