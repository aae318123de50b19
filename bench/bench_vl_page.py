"""The Vision-language page in a classroom: N sessions over Streamlit's websocket protocol (no browser), each
opening the page on the trained tiny model, then rerunning it with a token, layer, head or built-in picture of
its own, every 0–2 s. Prints the rerun time's p50/p95/max, the bytes a rerun sends, errors, and the server's CPU
seconds per rerun (read from /proc), and the same for the worst link a class can build (an opened head, the
sinks switch off, a picture nobody asked for yet, the last checkpoint), all against one rerun alone.

    python bench/bench_vl_page.py [--sessions 30] [--reruns 4]

The tiny model's training must be on disk first (the server trains it in its worker otherwise, and the first
reruns would wait for it): the script trains it into a runs folder of its own before the server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.browserkit import streamlit_server  # noqa: E402
from tests.support.stclient import Session, server_pid  # noqa: E402

PAGE = "vision-language"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _question(picture: int) -> str:
    """The built-in picture's own question, in the link: a link with the default text reruns once more to adopt it
    (a pick), which would end the measured run early."""
    from attnviz.learn.shapes import built_in

    return quote(built_in(f"shapes-{picture}")[1])


def _links(rng: random.Random) -> str:
    picture = rng.randint(1, 8)
    return (f"vl_picture=shapes-{picture}&text={_question(picture)}&token={rng.randint(0, 6)}"
            f"&vl_layer={rng.randint(-1, 1)}")


def _worst() -> str:
    return (f"vl_picture=shapes-8&text={_question(8)}&token=6&vl_layer=1&vl_head=3&vl_sinks=0&vl_checkpoint=12"
            "&present=1")


async def _class(base: str, pid: int, sessions: int, reruns: int, worst: bool, seed: int) -> dict:
    rng = random.Random(seed)
    people = [Session(base) for _ in range(sessions)]
    await asyncio.gather(*(s.connect() for s in people))
    await asyncio.gather(*(s.rerun(f"text={_question(1)}", page=PAGE) for s in people))  # every one opens the page
    times, sizes, errors = [], [], 0
    cpu0 = _cpu_seconds(pid)

    async def one(s: Session) -> None:
        nonlocal errors
        for _ in range(reruns):
            await asyncio.sleep(rng.uniform(0, 2))
            r = await s.rerun(_worst() if worst else _links(rng), page=PAGE)
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
    runs = Path(tempfile.mkdtemp(prefix="vl-bench-"))
    os.environ["ATTNVIZ_LEARN_DIR"] = str(runs)
    from attnviz.learn.look import LookSettings
    from attnviz.learn.worker import _train_to_files, key_of

    _train_to_files("look", asdict(LookSettings()), str(runs), key_of(LookSettings()))
    with streamlit_server(timeout=120, env={"ATTNVIZ_LEARN_DIR": str(runs)}) as base:
        pid = server_pid(int(base.rsplit(":", 1)[1]))
        rows = [("one session", asyncio.run(_class(base, pid, 1, args.reruns * 3, False, 1))),
                (f"{args.sessions} sessions, own links", asyncio.run(_class(base, pid, args.sessions, args.reruns,
                                                                            False, 2))),
                (f"{args.sessions} sessions, the worst link", asyncio.run(_class(base, pid, args.sessions,
                                                                                 args.reruns, True, 3)))]
    print("| setup | reruns | p50 s | p95 s | max s | bytes a rerun | errors | server CPU s a rerun |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['reruns']} | {r['p50']:.3f} | {r['p95']:.3f} | {r['max']:.3f} | {r['bytes']:,.0f} | "
              f"{r['errors']} | {r['cpu_per_rerun']:.3f} |")


if __name__ == "__main__":
    main()
