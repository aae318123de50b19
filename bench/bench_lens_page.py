"""The Logit lens page on the real model (SmolLM2-135M) in a classroom: N sessions over Streamlit's websocket
protocol (no browser). A fresh server's first visitor opens the page (the model's load from the model cache and
the first reading: what a newcomer waits for), then one session reruns alone, then N sessions each rerun with a
form, colour, middles and cell of their own every 0–2 s. Prints each setup's rerun p50/p95/max, the bytes a rerun
sends, errors, the server's CPU seconds a rerun (from /proc) and its resident memory (VmRSS) at the end.

    python bench/bench_lens_page.py [--sessions 30] [--reruns 4]

The model's de-quantized folder should be in the model cache already (a first load de-quantizes it: about 20 s
more for the first visitor, once per machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.browserkit import streamlit_server  # noqa: E402
from tests.support.stclient import Session, server_pid  # noqa: E402

PAGE = "logit-lens"
FACT = "The+Eiffel+Tower+is+located+in+the+city+of"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _link(rng: random.Random) -> str:
    """The page's own example, with a form, colour, middles and an opened cell of the session's own."""
    mid = rng.randint(0, 1)
    layer = rng.randint(0, 29)
    mode = rng.choice(["final-scale", "per-layer"])
    return (f"model=smollm2-135m&text={FACT}&lens_answer=%C4%A0Paris&lens_mode={mode}"
            f"&lens_colour={rng.choice(['probability', 'entropy', 'kl'])}&lens_mid={mid}"
            f"&lens_cell={layer}{'m' if mid and rng.random() < 0.5 else ''}.{rng.randint(0, 9)}")


async def _first(base: str) -> float:
    s = Session(base)
    await s.connect()
    t0 = time.perf_counter()
    for _ in range(120):  # the page shows the load's progress and stops; the visitor's fragment polls it
        r = await s.rerun(f"model=smollm2-135m&text={FACT}&lens_answer=%C4%A0Paris", page=PAGE)
        if r.ok and r.charts and not r.progress:  # the grid drawn, no load or job in progress
            break
        await asyncio.sleep(0.5)
    await s.close()
    return time.perf_counter() - t0


async def _class(base: str, pid: int, sessions: int, reruns: int, seed: int) -> dict:
    rng = random.Random(seed)
    people = [Session(base) for _ in range(sessions)]
    await asyncio.gather(*(s.connect() for s in people))
    await asyncio.gather(*(s.rerun(f"model=smollm2-135m&text={FACT}&lens_answer=%C4%A0Paris", page=PAGE)
                           for s in people))
    times, sizes, errors = [], [], 0
    cpu0 = _cpu_seconds(pid)

    async def one(s: Session) -> None:
        nonlocal errors
        for _ in range(reruns):
            await asyncio.sleep(rng.uniform(0, 2))
            r = await s.rerun(_link(rng), page=PAGE)
            times.append(r.seconds)
            sizes.append(r.bytes)
            errors += not r.ok
            if not r.ok:
                print(f"  not ok: {r.error or 'ended early'}; {r.alerts[:1]}", file=sys.stderr)

    await asyncio.gather(*(one(s) for s in people))
    cpu = _cpu_seconds(pid) - cpu0
    await asyncio.gather(*(s.close() for s in people))
    q = statistics.quantiles(times, n=20, method="inclusive") if len(times) > 1 else times * 19
    return {"reruns": len(times), "p50": statistics.median(times), "p95": q[18], "max": max(times),
            "bytes": statistics.median(sizes), "errors": errors, "cpu_per_rerun": cpu / max(1, len(times))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--reruns", type=int, default=4)
    args = ap.parse_args()
    env = {"ATTNVIZ_PACKAGED": "minilm-l6 smollm2-135m"}  # offered, whatever the environment says
    with streamlit_server(timeout=120, env=env) as base:
        pid = server_pid(int(base.rsplit(":", 1)[1]))
        first = asyncio.run(_first(base))
        rows = [("one session", asyncio.run(_class(base, pid, 1, args.reruns * 3, 1))),
                (f"{args.sessions} sessions, own settings", asyncio.run(_class(base, pid, args.sessions,
                                                                               args.reruns, 2)))]
        rss = _rss_mb(pid)
    print(f"a fresh server's first visitor: the page's first reading after {first:.1f} s (the load from the model "
          f"cache included); the server's resident memory at the end: {rss:,.0f} MB")
    print()
    print("| setup | reruns | p50 s | p95 s | max s | bytes a rerun | errors | server CPU s a rerun |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['reruns']} | {r['p50']:.3f} | {r['p95']:.3f} | {r['max']:.3f} | {r['bytes']:,.0f} | "
              f"{r['errors']} | {r['cpu_per_rerun']:.3f} |")


if __name__ == "__main__":
    main()
