"""Page runs take turns (ui/admission.py): first come first served, one at a time, no run
waits behind another for longer than the lease, and nothing can hang."""

import threading

import pytest

from ui.admission import PAGE_RUNS, TurnQueue

WAIT = 10  # seconds any step below may take before the test fails instead of hanging


def _wait_until(cond) -> None:
    done = threading.Event()
    for _ in range(WAIT * 1000):
        if cond():
            return
        done.wait(0.001)
    pytest.fail("the condition never held")


def test_turns_go_in_arrival_order_one_at_a_time():
    q = TurnQueue(lease=WAIT)
    order, inside, most = [], [0], [0]
    lock = threading.Lock()

    def run(i):
        with q.turn():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            order.append(i)
            with lock:
                inside[0] -= 1

    first = q.enter()  # hold the queue while five runs line up, in a known order
    threads = []
    for i in range(5):
        t = threading.Thread(target=run, args=(i,))
        t.start()
        _wait_until(lambda n=i + 1: len(q._waiting) == n)
        threads.append(t)
    q.leave(first)
    for t in threads:
        t.join(WAIT)
    assert order == [0, 1, 2, 3, 4]
    assert most[0] == 1
    assert q.revoked == 0


def test_a_turn_past_its_lease_lets_the_next_run_in():
    q = TurnQueue(lease=0.05)
    waiter_in = threading.Event()
    holder_may_go = threading.Event()

    def long_run():
        with q.turn():
            holder_may_go.wait(WAIT)  # holds its turn until the waiter is in

    def next_run():
        with q.turn():
            waiter_in.set()

    h = threading.Thread(target=long_run)
    h.start()
    _wait_until(lambda: q._holder is not None)
    w = threading.Thread(target=next_run)
    w.start()
    got_in = waiter_in.wait(WAIT)  # while the long run still holds its turn
    holder_may_go.set()
    h.join(WAIT)
    w.join(WAIT)
    assert got_in
    assert q.revoked == 1
    assert q._holder is None and not q._waiting


def test_an_error_inside_a_turn_ends_it():
    q = TurnQueue(lease=WAIT)
    with pytest.raises(RuntimeError), q.turn():
        raise RuntimeError("a page failed")
    assert q._holder is None
    entered = threading.Event()

    def next_run():
        with q.turn():
            entered.set()

    threading.Thread(target=next_run).start()
    assert entered.wait(WAIT)


def test_many_threads_all_get_their_turns():
    q = TurnQueue(lease=0.001)  # revocations and hand-overs all the time
    count = [0]
    lock = threading.Lock()

    def run():
        for _ in range(200):
            with q.turn():
                with lock:
                    count[0] += 1

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert count[0] == 8 * 200
    assert q._holder is None and not q._waiting


@pytest.mark.parametrize("query", ["", "text=a+b&heads=3&d_model=64", "heads=0"])
def test_every_app_run_gives_its_turn_back(query):
    from tests.support.apphelp import app

    at = app(query)  # a page, a bad link's message (st.stop), a fallback
    assert not at.exception
    assert PAGE_RUNS._holder is None and not PAGE_RUNS._waiting
