"""attnviz.MultiHeadAttention (per-head weights) against nn.MultiheadAttention.

Both modules hold the same weights (``from_torch``) and run in this process on the
CPU, interleaved, so the ratio cancels out the machine's speed. Prints a Markdown
table: median milliseconds per call and ours / PyTorch (below 1.0 = faster).

    python bench/bench_attention.py [--repeats 60] [--threads N] [--steps]

``--steps`` times ``MultiHeadAttention.steps`` (every intermediate kept: scores, scaled,
masked, weights, per-head outputs, as the explorer runs) instead of the forward pass.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from attnviz import MultiHeadAttention, resolve_device
from attnviz.core.masks import causal_mask, to_torch_mha_mask


def timed(fn, repeats: int, sync=lambda: None) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()  # CUDA runs asynchronously: wait for the kernels before reading the clock
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 128, 512, 1024])
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda:N")
    ap.add_argument("--steps", action="store_true", help="time steps() (every intermediate kept), not forward")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:
        device = resolve_device(args.device)
    except ValueError as e:
        raise SystemExit(f"bench_attention: {e}") from None
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    H, E = 8, 512
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(E, H, batch_first=True, device=device).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    where = f"CPU, {args.threads} threads" if device.type == "cpu" else str(device)
    what = "steps() with every intermediate kept" if args.steps else "forward()"
    print(f"{where}, H={H}, E={E}, N=1, attnviz {what}, median of {args.repeats}, torch {torch.__version__}\n")
    print("| L | mask | attnviz (ms) | nn.MultiheadAttention (ms) | ratio |")
    print("|---:|---|---:|---:|---:|")
    for L in args.lengths:
        x = torch.randn(1, L, E, device=device)
        for mask_name in ("none", "causal"):
            m = None if mask_name == "none" else causal_mask(L, device=device)
            tm = None if m is None else to_torch_mha_mask(m)
            with torch.inference_mode():
                if args.steps:
                    run_ours = lambda x=x, m=m: (lambda st: (st.output, st.weights))(ours.steps(x, attn_mask=m))
                else:
                    run_ours = lambda x=x, m=m: ours(x, attn_mask=m)
                run_ref = lambda x=x, tm=tm: ref(x, x, x, attn_mask=tm, need_weights=True,
                                                 average_attn_weights=False)
                o1, w1 = run_ours()
                o2, w2 = run_ref()
                assert (w1 - w2).abs().max() < 1e-5 and (o1 - o2).abs().max() < 1e-4
                for _ in range(3):
                    run_ours(), run_ref()
                a, b = [], []
                # A short call is over in a few ms, where one scheduler hiccup moves a median of 30:
                # take more of them (about as much time as --repeats calls at L = 512), fewer past it.
                reps = max(5, args.repeats * max(1, 512 // L) if L <= 512 else args.repeats // 2)
                for _ in range(reps):  # interleave so drift hits both alike
                    a += timed(run_ours, 1, sync)
                    b += timed(run_ref, 1, sync)
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"| {L} | {mask_name} | {ma:.2f} | {mb:.2f} | {ma / mb:.2f} |", flush=True)


if __name__ == "__main__":
    main()
