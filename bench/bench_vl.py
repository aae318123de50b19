"""Memory of ``attnviz.vl_attention`` on a picture of many image tokens, against the same model's
forward pass with ``output_attentions`` (eager: every layer's N × N weights) and with SDPA (the
model's own pass, which keeps no weights).

A LLaVA-1.5-shaped folder built from its config (random weights; a CLIP tower of 2 layers with
8-pixel patches on a square picture of side × 8 pixels, so side² image tokens: 24² = 576 as
LLaVA-1.5's, 48² = 2,304, 71² = 5,041 for "5,000"; a LLaMA language model of 4 layers, width 256,
8 query heads over 2 key/value heads), a prompt of a picture and a short question, the answer
teacher-forced (four words). Each path runs in a fresh process of its own; the figure is the growth
of the process's peak resident memory (``ru_maxrss``) over one run, above what the loaded and warmed
model holds, once the picture has gone through the vision tower (which every path runs alike, eager: its own
growth is the column "the vision tower alone", above the loaded model).

    python bench/bench_vl.py [--sides 24,48,71] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT, ANSWER = "USER: <image> what is in the picture ? ASSISTANT:", "the cat sat down"
CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
from PIL import Image
sys.path.insert(0, sys.argv[1])
folder, side, what, threads, prompt, answer = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), \
    sys.argv[6], sys.argv[7]
if threads:
    torch.set_num_threads(threads)
from attnviz.analysis.vlattention import vl_attention
from attnviz.models.vlm import load_vlm, prepare

rng = np.random.default_rng(0)
picture = Image.fromarray(rng.integers(0, 255, (side * 8, side * 8, 3), dtype=np.uint8))
vlm = load_vlm(folder)


def forward(impl):
    def run():
        inputs = prepare(vlm, [picture], prompt)
        ids = torch.cat([inputs["input_ids"], torch.tensor([vlm.processor.tokenizer(answer,
                         add_special_tokens=False)["input_ids"]])], 1)
        vlm.model.set_attn_implementation(impl)
        with torch.no_grad():
            vlm.model(input_ids=ids, pixel_values=inputs["pixel_values"], use_cache=False,
                      output_attentions=impl == "eager")
        return ids.shape[1]
    return run


paths = {"vl_attention": lambda: len(vl_attention(folder, picture, prompt, answer=answer).ids),
         "eager": forward("eager"), "sdpa": forward("sdpa")}
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
loaded = rss()
with torch.no_grad():  # warm: the picture through the vision tower, which every path runs alike
    vlm.model.model.vision_tower(prepare(vlm, [picture], prompt)["pixel_values"])
base = rss()
t0 = time.perf_counter()
n = paths[what]()
print(json.dumps({"seconds": time.perf_counter() - t0, "grew": rss() - base, "tokens": n, "tower": base - loaded,
                  "threads": torch.get_num_threads()}))
"""


def llava(root: Path, side: int) -> Path:
    """The LLaVA-1.5-shaped folder for pictures of side × 8 pixels (``tests.support.vlmodels``' tiny LLaVA,
    its language model and vision tower widened)."""
    from tests.support.vlmodels import save_llava

    text = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "max_position_embeddings": 8192}
    vision = {"hidden_size": 64, "intermediate_size": 128, "projection_dim": 64}
    return save_llava(root / f"llava-{side}", side=side, text=text, vision=vision)[0]


def child(folder: Path, side: int, what: str, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(folder), str(side), what, str(threads), PROMPT,
                          ANSWER], capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        raise SystemExit(f"{what} at side {side}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", default="24,48,71")
    ap.add_argument("--threads", type=int, default=0, help="torch threads in each process (0: torch's default)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    mb = 2**20
    print("| image tokens | sequence | the vision tower alone | vl_attention | output_attentions (eager) | "
          "SDPA forward | vl / eager |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for side in (int(s) for s in args.sides.split(",")):
            t0 = time.perf_counter()
            folder = llava(Path(tmp), side)
            r = {what: child(folder, side, what, args.threads) for what in ("vl_attention", "eager", "sdpa")}
            cell = lambda x: f"{x['grew'] / mb:,.0f} MB, {x['seconds']:.1f} s"  # noqa: E731
            print(f"| {side * side:,} | {r['eager']['tokens']:,} | {r['sdpa']['tower'] / mb:,.0f} MB | "
                  f"{cell(r['vl_attention'])} | {cell(r['eager'])} | "
                  f"{cell(r['sdpa'])} | {r['vl_attention']['grew'] / max(1, r['eager']['grew']):.2f} |", flush=True)
            print(f"# side {side} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
