"""A class on one page of a running server, over Streamlit's websocket protocol (no browser): what
``bench_vl_page.py`` and ``bench_lens_page.py`` measure, written once.

Every session opens the page on the same link (``opening``), then reruns it ``reruns`` times with a link of its
own (``link(rng)``), 0–2 s apart. The figures: the rerun time's p50/p95/max, the bytes a rerun sends, errors,
and the server's CPU seconds a rerun (read from /proc).
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.stclient import Session  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def page_class(base: str, pid: int, page: str, sessions: int, reruns: int, seed: int, opening: str,
                     link: Callable[[random.Random], str]) -> dict:
    rng = random.Random(seed)
    people = [Session(base) for _ in range(sessions)]
    await asyncio.gather(*(s.connect() for s in people))
    await asyncio.gather(*(s.rerun(opening, page=page) for s in people))  # every one opens the page
    times, sizes, errors = [], [], 0
    cpu0 = cpu_seconds(pid)

    async def one(s: Session) -> None:
        nonlocal errors
        for _ in range(reruns):
            await asyncio.sleep(rng.uniform(0, 2))
            r = await s.rerun(link(rng), page=page)
            times.append(r.seconds)
            sizes.append(r.bytes)
            errors += not r.ok
            if not r.ok:
                print(f"  not ok: {r.error or 'ended early'}; {r.alerts[:1]}", file=sys.stderr)

    await asyncio.gather(*(one(s) for s in people))
    cpu = cpu_seconds(pid) - cpu0
    await asyncio.gather(*(s.close() for s in people))
    q = statistics.quantiles(times, n=20, method="inclusive") if len(times) > 1 else times * 19
    return {"reruns": len(times), "p50": statistics.median(times), "p95": q[18], "max": max(times),
            "bytes": statistics.median(sizes), "errors": errors, "cpu_per_rerun": cpu / max(1, len(times))}


def print_rows(rows: list[tuple[str, dict]]) -> None:
    print("| setup | reruns | p50 s | p95 s | max s | bytes a rerun | errors | server CPU s a rerun |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['reruns']} | {r['p50']:.3f} | {r['p95']:.3f} | {r['max']:.3f} | {r['bytes']:,.0f} | "
              f"{r['errors']} | {r['cpu_per_rerun']:.3f} |")
