"""The pretrained encoder (MiniLM-L6, 6 layers × 12 heads) in attnviz against
transformers' BertModel (eager attention, output_attentions=True), same files, same
process, interleaved: model load time, and one 64-token sentence through all 6 layers
with every layer's weights. Prints a Markdown table; ratio < 1 means attnviz is faster.

    python bench/bench_model.py [--repeats 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attnviz import AttentionConfig, compute  # noqa: E402
from attnviz.models import bert as M  # noqa: E402

TEXT = ("attention lets every token look at every other token and mix what it finds; the weights say how "
        "much each key matters to each query, and every head learns its own way to look at the sentence")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(2)
    from tokenizers import Tokenizer
    from transformers import BertModel

    folder, _ = M.locate(M.MINILM)
    t0 = time.perf_counter()
    M.load(M.MINILM)  # verifies the three SHA-256, reads safetensors and tokenizer.json
    ours_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    bert = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    theirs_load = time.perf_counter() - t0
    tok.no_padding()
    tok.no_truncation()
    ids = tok.encode(TEXT + " " + TEXT).ids[1:63]  # 62 word pieces, + [CLS] and [SEP] = 64
    text = tok.decode(ids)
    ids = torch.tensor([tok.encode(text).ids])
    cfg = AttentionConfig(text=text, model=M.MINILM)
    n_tokens = ids.shape[1]

    def ours() -> float:
        t = time.perf_counter()
        compute(cfg)  # tokenize, 6 layers, every layer's weights, layer 0's every step
        return time.perf_counter() - t

    def theirs() -> float:
        t = time.perf_counter()
        with torch.no_grad():
            bert(ids, output_attentions=True)
        return time.perf_counter() - t

    for _ in range(5):
        ours(), theirs()
    a, b = [], []
    for _ in range(args.repeats):
        a.append(ours())
        b.append(theirs())
    ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
    print(f"CPU, {torch.get_num_threads()} threads, {n_tokens} tokens, median of {args.repeats}, "
          f"torch {torch.__version__}")
    print()
    print("| | attnviz | transformers (eager, output_attentions) | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| model load (s) | {ours_load:.2f} (incl. SHA-256 of 3 files) | {theirs_load:.2f} | "
          f"{ours_load / theirs_load:.2f} |")
    print(f"| {n_tokens} tokens, 6 layers with weights (ms) | {ma:.2f} | {mb:.2f} | {ma / mb:.2f} |")


if __name__ == "__main__":
    main()
