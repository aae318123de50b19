"""A class sending many different sweeps at once: over Streamlit's own websocket protocol
(tests/support/stclient.py), against the app as `make run` serves it.

Each of 40 sessions opens a Patching link with prompts of its own on a GPT-2-shaped folder. Every
session's page answers with its sweep's progress (or the sweep) or with the words that say the
server is busy; none shows an exception; and once the pages have answered (Streamlit's own script
threads have ended) the server holds no more than ``MAX_THREADS_ADDED`` threads beyond its idle
count. Before jobs were bounded while running, 40 such sessions left 81 more threads, each a sweep
waiting with its two traces.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from urllib.parse import urlencode

import pytest

from attnviz import limits
from tests.support import stclient
from tests.support.browserkit import streamlit_server
from tests.support.stclient import Session, server_pid

SESSIONS = 40
MAX_THREADS_ADDED = 24
WORDS = "the cat sat on mat because it was tired".split()


def _gpt2_folder(root: Path) -> Path:
    """A GPT-2-shaped folder (6 layers × 8 heads × 256) with a word-level tokenizer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from tests.support.hfmodels import tokenizer

    torch.manual_seed(0)
    fast = tokenizer()
    folder = root / "gpt2-6x8"
    GPT2LMHeadModel(GPT2Config(vocab_size=fast.vocab_size, n_positions=128, n_embd=256, n_layer=6, n_head=8,
                               bos_token_id=2, eos_token_id=3)).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def _links(n: int) -> list[str]:
    """``n`` Patching links, each with prompts of its own (96 words, the last few changed): sweeps long
    enough to queue."""
    rng = random.Random(3)
    out = []
    for _ in range(n):
        clean = [rng.choice(WORDS) for _ in range(96)]
        corrupted = clean[:-3] + [rng.choice(WORDS) for _ in range(3)]
        out.append(urlencode({"model": "gpt2-6x8", "clean": " ".join(clean), "corrupted": " ".join(corrupted),
                              "answer": "cat", "wrong": "mat"}))
    return out


def _answered(report) -> str | None:
    """What a run of the Patching page said of its sweep: "sweep" (its progress, or the pictures),
    "busy", or None (still loading the model)."""
    if any("busy" in a for a in report.alerts):
        return "busy"
    if report.charts or any(text.startswith("Patching every head") for text in report.progress):
        return "sweep"
    return None


@pytest.mark.timeout(600)
def test_forty_sessions_with_sweeps_of_their_own_each_get_theirs_or_busy_within_the_thread_bound(tmp_path):
    assert limits.MAX_JOB_THREADS <= MAX_THREADS_ADDED
    folder = _gpt2_folder(tmp_path)
    with streamlit_server(env={"ATTNVIZ_MODEL_DIRS": str(folder.parent)}) as base:
        pid = server_pid(int(base.rsplit(":", 1)[1]))

        async def idle() -> None:
            s = Session(base)
            await s.connect()
            assert (await s.rerun("")).ok
            await s.close()

        stclient.run(idle())
        idle_threads = _threads(pid)

        async def session(link: str):
            s = Session(base)
            await s.connect()
            try:
                for _ in range(60):  # the first runs load the model (shared); a later one starts the sweep
                    report = await s.rerun(link, page="patching", timeout=180)
                    assert report.ok or report.rerun, report.error  # a rerun: the model it waited for is ready
                    said = _answered(report)
                    if said is not None:
                        return said, s
                    await asyncio.sleep(0.5)
                return f"no answer: {report.alerts} {report.progress} {report.elements}", s
            except BaseException:
                await s.close()
                raise

        async def go():
            results = await asyncio.gather(*(session(link) for link in _links(SESSIONS)))
            added = _threads(pid) - idle_threads  # every page has answered: their script threads have ended
            for _said, s in results:
                await s.close()
            return [said for said, _s in results], added

        answers, added = stclient.run(go())
        assert not [a for a in answers if a.startswith("no answer")], answers[:2]
        assert answers.count("sweep") >= 1 and set(answers) <= {"sweep", "busy"}
        assert added <= MAX_THREADS_ADDED, f"{added} threads beyond the idle server's {idle_threads}"
        print(f"\n{answers.count('sweep')} sweeps, {answers.count('busy')} busy; "
              f"{added} threads beyond the idle server's {idle_threads}")
