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
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pageclass import page_class, print_rows  # noqa: E402
from tests.support.browserkit import streamlit_server  # noqa: E402
from tests.support.stclient import server_pid  # noqa: E402

PAGE = "vision-language"


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
        opening = f"text={_question(1)}"  # every one opens the page on the first picture's question
        setups = (("one session", 1, args.reruns * 3, 1, _links),
                  (f"{args.sessions} sessions, own links", args.sessions, args.reruns, 2, _links),
                  (f"{args.sessions} sessions, the worst link", args.sessions, args.reruns, 3, lambda _rng: _worst()))
        rows = [(name, asyncio.run(page_class(base, pid, PAGE, n, reruns, seed, opening, link)))
                for name, n, reruns, seed, link in setups]
    print_rows(rows)

if __name__ == "__main__":
    main()
