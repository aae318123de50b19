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
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pageclass import page_class, print_rows  # noqa: E402
from tests.support.browserkit import streamlit_server  # noqa: E402
from tests.support.stclient import Session, server_pid  # noqa: E402

PAGE = "logit-lens"
FACT = "The+Eiffel+Tower+is+located+in+the+city+of"
OPENING = f"model=smollm2-135m&text={FACT}&lens_answer=%C4%A0Paris"


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


def _worst(rng: random.Random) -> str:
    """The costliest link a class builds without training a lens: per-layer with the middles, coloured by KL, in
    presenter mode, each session its own step (a position's attribution not made yet, then made once)."""
    return (f"{OPENING}&lens_mode=per-layer&lens_colour=kl&lens_mid=1&present=1"
            f"&lens_cell={rng.randint(0, 29)}m.{rng.randint(0, 9)}")


async def _first(base: str) -> float:
    s = Session(base)
    await s.connect()
    t0 = time.perf_counter()
    for _ in range(120):  # the page shows the load's progress and stops; the visitor's fragment polls it
        r = await s.rerun(OPENING, page=PAGE)
        if r.ok and r.charts and not r.progress:  # the grid drawn, no load or job in progress
            break
        await asyncio.sleep(0.5)
    await s.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--reruns", type=int, default=4)
    args = ap.parse_args()
    env = {"ATTNVIZ_PACKAGED": "minilm-l6 smollm2-135m"}  # offered, whatever the environment says
    with streamlit_server(timeout=120, env=env) as base:
        pid = server_pid(int(base.rsplit(":", 1)[1]))
        first = asyncio.run(_first(base))
        rows = [(name, asyncio.run(page_class(base, pid, PAGE, n, reruns, seed, OPENING, _link)))
                for name, n, reruns, seed in (("one session", 1, args.reruns * 3, 1),
                                              (f"{args.sessions} sessions, own settings", args.sessions,
                                               args.reruns, 2))]
        rows.append((f"{args.sessions} sessions, the worst link", asyncio.run(page_class(
            base, pid, PAGE, args.sessions, args.reruns, 3, OPENING, _worst))))
        rss = _rss_mb(pid)
    print(f"a fresh server's first visitor: the page's first reading after {first:.1f} s (the load from the model "
          f"cache included); the server's resident memory at the end: {rss:,.0f} MB")
    print()
    print_rows(rows)

if __name__ == "__main__":
    main()
