"""What the server sends when a class joins: over Streamlit's own websocket protocol, no
browser (tests/stclient.py), against the app as `make run` serves it.

Every element is a message the server makes, queues and sends on each run, and a class
joining at once waits for thirty first runs of them (docs/serving.md). The explorer's first
run sends 17 messages: 50 before the sidebar's pairs shared one container and the rarely
changed settings went behind "More settings", 27 before the title and its captions became
one element and the sidebar drew the window and device only where they change something,
21 before the downloads went behind one button, d_model and heads stood one above the
other and presenter mode went behind More settings (a window mask adds one; a view with a
head or query selector adds two, its row and its widget; a link that sets what is behind
More settings adds none, its label names them); 19 since the pages moved to menus across the top,
whose room under them the page's style sets (one element), and presenter mode's switch came out
from behind More settings, in sight on every page (one more).
The budget below leaves room for two, so a change that adds elements to every first run is
a decision, not an accident.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.support import stclient
from tests.support.browserkit import streamlit_server
from tests.support.stclient import Session

FIRST_RUN_MESSAGES = 21  # the explorer's first run, everything from new_session to script_finished


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as base:
        yield base


async def _join(base: str, query: str):
    s = Session(base)
    await s.connect()
    try:
        return await s.rerun(query)
    finally:
        await s.close()


def _messages(base: str, query: str) -> int:
    """Every forward message of one session's first run."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    async def go():
        s = Session(base)
        await s.connect()
        msg = BackMsg()
        msg.rerun_script.query_string = query
        await s.ws.send(msg.SerializeToString())
        n = 0
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(s.ws.recv(), 60))
            n += 1
            if fwd.WhichOneof("type") == "script_finished":
                await s.close()
                return n

    return stclient.run(go())


@pytest.mark.parametrize("query", ["", "heads=8&mask=causal", "view=head&head=2", "view=query&query=1",
                                   "mask=window&window=2",
                                   "seed=7&dropout=0.1&colors=Magma"])  # behind More settings: named, not drawn
def test_the_explorers_first_run_stays_within_its_message_budget(server, query):
    assert _messages(server, query) <= FIRST_RUN_MESSAGES


def test_thirty_sessions_joining_at_once_all_get_their_page(server):
    rng = random.Random(5)
    queries = [f"text={'+'.join(rng.choice('abcdefgh') for _ in range(rng.randint(3, 60)))}"
               f"&heads={rng.choice([1, 2, 4, 8])}&mask={rng.choice(['none', 'causal', 'window'])}" for _ in range(30)]

    async def go():
        return await asyncio.gather(*(_join(server, q) for q in queries))

    reports = stclient.run(go())
    assert [r.error for r in reports if not r.ok] == []
    assert all(r.charts >= 1 for r in reports)
