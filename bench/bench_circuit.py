"""Direct path patching, every sender into every later receiver: attnviz against TransformerLens
4.3's ``patching.get_act_patch_direct_path_all_sources`` on the same folder, in one process.

GPT-2 folders built from their configs (random weights, GPT-2's vocabulary of 50,257, a
word-level tokenizer): 6 layers × 8 heads × width 256 and 4 layers × 8 heads × width 256, a clean
prompt of 12 tokens and a corrupted one with one token changed, the metric logit[answer] −
logit[wrong]. For each component (q, k, v): ``attnviz.path_patch`` (tokenizing, the clean and the
corrupted run, then for each receiver layer batches of runs from the corrupted stream into it)
against TransformerLens's bridge over the folder in compatibility mode (``run_with_cache`` of both
prompts, then one whole forward pass per sender–receiver pair: 960 and 384). The table gives each
time, the ratio (above 1: attnviz is faster), the largest difference where the receiver is later
(within 1e-4 × max(1, |value|)) and the spread of the values (that there is something to agree on).

Then attnviz alone on a GPT-2-small-shaped folder (12 × 12 × 768): 9,504 paths per component,
where TransformerLens would run 9,504 forward passes.

    python bench/bench_circuit.py [--components k] [--no-small]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import attnviz  # noqa: E402

TOKENS = 12
VOCAB = 50_257


def build(root: Path, layers: int, heads: int, width: int):
    """A GPT-2 folder of that shape, and two prompts of TOKENS words one word apart."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = [f"w{i}" for i in range(2000)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(words)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    folder = root / f"gpt2-{layers}x{heads}x{width}"
    GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_layer=layers, n_head=heads, n_embd=width, bos_token_id=0,
                               eos_token_id=0)).save_pretrained(folder)
    fast.save_pretrained(folder)
    rng = np.random.default_rng(0)
    clean = [words[i] for i in rng.choice(len(words), TOKENS, replace=False)]
    corrupted = list(clean)
    corrupted[4] = words[-1]
    return folder, fast, " ".join(clean), " ".join(corrupted)


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def against_transformer_lens(root: Path, layers: int, components) -> list[str]:
    from transformer_lens import patching
    from transformer_lens.model_bridge import TransformerBridge

    folder, fast, clean, corrupted = build(root, layers, 8, 256)
    answer, wrong = "w5", "w7"
    a, w = fast.convert_tokens_to_ids(answer), fast.convert_tokens_to_ids(wrong)
    bridge = TransformerBridge.boot_transformers(str(folder))
    bridge.enable_compatibility_mode()

    def metric(logits):
        return logits[0, -1, a] - logits[0, -1, w]

    attnviz.path_patch(str(folder), clean, corrupted, answer=answer, wrong=wrong, component="q")  # loaded, warm
    rows = []
    for c in components:
        ours_s, ours = timed(lambda c=c: attnviz.path_patch(str(folder), clean, corrupted, answer=answer, wrong=wrong,
                                                          component=c))

        def theirs(c=c):
            ids = [torch.tensor([fast(t)["input_ids"]]) for t in (clean, corrupted)]
            _l, clean_cache = bridge.run_with_cache(ids[0])
            _l, corrupted_cache = bridge.run_with_cache(ids[1])
            return patching.get_act_patch_direct_path_all_sources(bridge, ids[1], clean_cache, corrupted_cache, metric,
                                                                  component=c, verbose=False)
        tl_s, tl = timed(theirs)
        later = ~torch.isnan(ours)
        diff = float((ours[later] - tl.double()[later]).abs().max())
        spread = float(ours[later].max() - ours[later].min())
        rows.append(f"| {layers} × 8 × 256 | {c} | {int(later.sum())} | {tl_s:.2f} | {ours_s:.2f} | "
                    f"{tl_s / ours_s:.1f}× | {diff:.1e} | {spread:.1e} |")
        print(rows[-1], flush=True)
    return rows


def small_alone(root: Path, components) -> None:
    folder, _fast, clean, corrupted = build(root, 12, 12, 768)
    attnviz.patch_heads(str(folder), clean, corrupted, answer="w5", wrong="w7")  # loaded, warm
    for c in components:
        seconds, values = timed(lambda c=c: attnviz.path_patch(str(folder), clean, corrupted, answer="w5", wrong="w7",
                                                             component=c))
        print(f"| 12 × 12 × 768 | {c} | {int((~torch.isnan(values)).sum())} | {seconds:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--components", default="qkv", help="which components to sweep (default: qkv)")
    ap.add_argument("--no-small", action="store_true", help="skip the GPT-2-small-shaped folder")
    args = ap.parse_args()
    print(f"CPU, {torch.get_num_threads()} threads, prompts of {TOKENS} tokens, one run each")
    print()
    print("| folder | component | paths | TransformerLens (s) | attnviz (s) | ratio | largest difference | spread |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for layers in (6, 4):
            against_transformer_lens(Path(tmp), layers, args.components)
        if not args.no_small:
            print()
            print("| folder | component | paths | attnviz (s) |")
            print("|---|---|---:|---:|")
            small_alone(Path(tmp), "k")


if __name__ == "__main__":
    main()
