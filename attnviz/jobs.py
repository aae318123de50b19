"""Long work in a background thread, shared by everyone who asks for the same thing, with its
progress: the one mechanism behind a model's load, the Q/K map's overview and the patching
sweep.

A page never does long work in its own run (Streamlit's request thread): it asks ``Jobs.start``
for the job of a key (plain values: a model's folder, a corpus and a layer, two prompts), gets
the one job of that key (started now if no one started it, or started again if it failed), shows
``fraction`` and ``words`` while it runs, and reads ``value`` (or ``error``) once ``done`` is set.
A classroom opening the same link starts one job, not thirty.

May import: nothing of attnviz.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Job:
    """One piece of long work: how far it is, what it is doing, and then its value or its error."""

    fraction: float = 0.0  # 0 … 1
    words: str = ""  # what it is doing now (marked for translation, translated where shown)
    value: Any = None
    error: str = ""
    done: threading.Event = field(default_factory=threading.Event)

    def report(self, fraction: float, words: str | None = None) -> None:
        """Called by the work as it goes."""
        self.fraction = min(1.0, max(0.0, float(fraction)))
        if words is not None:
            self.words = words

    @property
    def failed(self) -> bool:
        return self.done.is_set() and bool(self.error)


class Jobs:
    """Jobs by key, the last ``keep`` kept (least recently asked for leave first)."""

    def __init__(self, keep: int, name: str) -> None:
        self.keep, self.name = int(keep), name
        self._jobs: OrderedDict[Hashable, Job] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def start(self, key: Hashable, work: Callable[[Job], Any], words: str = "", label: str = "") -> Job:
        """The job of ``key``: running or finished, or started now by a daemon thread that
        calls ``work(job)`` and keeps its result as ``job.value``; ``words``: what it does first;
        ``label``: the end of the thread's name (attnviz-load-gpt2).
        A failed job is started again. An error is kept as its message (a ``ValueError``'s own
        words; otherwise its type too)."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not job.failed:
                self._jobs.move_to_end(key)
                return job
            job = self._jobs[key] = Job(words=words)
            while len(self._jobs) > self.keep:
                self._jobs.popitem(last=False)

        def run() -> None:
            try:
                job.value = work(job)
                job.fraction = 1.0
            except Exception as e:  # noqa: BLE001 - shown to whoever asked, never a traceback
                job.error = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            finally:
                job.done.set()

        threading.Thread(target=run, name=f"attnviz-{self.name}" + (f"-{label}" if label else ""), daemon=True).start()
        return job

    def jobs(self) -> list[Job]:
        """Every job kept now, running or finished."""
        with self._lock:
            return list(self._jobs.values())

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._jobs.pop(key, None)
