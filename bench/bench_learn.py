"""Watch it learn: the default training's numbers, its speed, and what the page's way of
running it (a spawned worker process, checkpoints streamed to a file) adds.

1. The bare training loop in this process (one thread, as in the worker): steps per second,
   the phase change's step and seconds, the best layer-1 prefix-matching and layer-0
   previous-token scores, the loss on the repeat against its start; the one-layer control's
   prefix matching and loss; and a second run with the same seed, compared number by number.
2. The same training through ``attnviz.learn.worker.Trainings`` (what the page starts):
   wall time from start to the finished record, against the bare loop's (ratio).
3. With ``--classroom``: 30 sessions on one server (bench_classroom's harness) editing the
   explorer, without and then with a training running in a worker process; edit p95 of each.

    python bench/bench_learn.py [--classroom]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from attnviz.learn.train import LearnSettings, best, train  # noqa: E402


def numbers(record: dict) -> list:
    return [(c["step"], c["loss_repeat"], c["loss_other"], c["heads"]) for c in record["checkpoints"]]


def bare(settings: LearnSettings) -> tuple[dict, float]:
    t0 = time.perf_counter()
    record = train(settings)
    return record, time.perf_counter() - t0


def through_worker(settings: LearnSettings) -> float:
    from attnviz.learn.worker import Trainings

    os.environ["ATTNVIZ_LEARN_DIR"] = tempfile.mkdtemp(prefix="attnviz-bench-learn-")
    runs = Trainings()
    t0 = time.perf_counter()
    key = runs.start(settings)
    while not runs.progress(key).done:
        time.sleep(0.05)
    return time.perf_counter() - t0


def classroom_p95(with_training: bool) -> float:
    import bench_classroom as B

    server = B.Server("app")
    trainer = None
    with server:
        asyncio.run(B.classroom(server.base, 1, seed=7))
        if with_training:  # a worker process, one thread, as the page starts it
            trainer = subprocess.Popen([sys.executable, "-m", "attnviz", "learn", "--steps", "5000", "--json",
                                        os.path.join(tempfile.mkdtemp(), "run.json")], cwd=ROOT,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(3)  # past its start-up
        try:
            tally = asyncio.run(B.classroom(server.base, 30, seed=1))
        finally:
            if trainer is not None:
                trainer.kill()
    return B.pct(tally.edits, 0.95), len(tally.errors)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classroom", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    s = LearnSettings()
    two, seconds = bare(s)
    again, _s2 = bare(s)
    one, _s3 = bare(s.with_(layers=1, heads=4))
    c0, c1 = two["checkpoints"][0], two["checkpoints"][-1]
    o0, o1 = one["checkpoints"][0], one["checkpoints"][-1]
    print("Defaults: 2 layers × 2 heads, width 32, 2000 steps, AdamW 3e-3, batch 64, seed 0; CPU, one thread")
    print()
    print("| figure | measured | target |")
    print("|---|---:|---:|")
    pc = two["phase_change"]
    change = f"step {pc['step']}, {pc['seconds']:.1f} s" if pc else "none"
    print(f"| phase change | {change} | ≤ 15 s |")
    print(f"| best layer-1 prefix-matching score | {best(c1, 'prefix_matching', 1):.2f} | ≥ 0.5 |")
    print(f"| best layer-0 previous-token score | {best(c1, 'previous_token', 0):.2f} | ≥ 0.4 |")
    print(f"| loss on the repeat, end / start | {c1['loss_repeat']:.2f} / {c0['loss_repeat']:.2f} = "
          f"{c1['loss_repeat'] / c0['loss_repeat']:.0%} | ≤ 40 % |")
    print(f"| one-layer control (4 heads): prefix matching | {best(o1, 'prefix_matching'):.2f} | ≤ 0.2 |")
    print(f"| one-layer control: loss on the repeat, end / start | {o1['loss_repeat'] / o0['loss_repeat']:.0%} | "
          f"≥ 70 % |")
    print(f"| the same seed again: identical numbers | {numbers(two) == numbers(again)} | True |")
    print(f"| steps per second (bare loop) | {s.steps / seconds:,.0f} | |")
    worker = through_worker(s)
    print(f"| through the page's worker: start to finished record | {worker:.1f} s against {seconds:.1f} s = "
          f"{worker / seconds:.2f}× | ≤ 1.2× |")
    if a.classroom:
        base, errs0 = classroom_p95(False)
        during, errs1 = classroom_p95(True)
        print(f"| 30-session edit p95, explorer | {base:.3f} s alone, {during:.3f} s with a training running "
              f"({errs0 + errs1} errors) | ≤ 0.2 s |")


if __name__ == "__main__":
    main()
