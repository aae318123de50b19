"""Long work in a background thread, shared by everyone who asks for the same thing, with its
progress: the one mechanism behind a model's load, the Q/K map's overview and the patching
sweep.

A page never does long work in its own run (Streamlit's request thread): it asks ``Jobs.start``
for the job of a key (plain values: a model's folder, a corpus and a layer, two prompts), gets
the one job of that key (started now if no one started it, or started again if it failed), shows
``fraction`` and ``words`` while it runs, and reads ``value`` (or ``error``) once ``done`` is set.
A classroom opening the same link starts one job, not thirty.

A process has one registry of jobs (``kind``, ``REGISTRY``): one ``Jobs`` per kind, each with its share
of the server, declared once (``attnviz.limits.JOB_SHARES``): at most ``running`` jobs of that kind run
at once, each on a thread that takes the kind's waiting jobs
in turn and ends when none is left, and at most ``waiting`` more wait, holding no thread. Past
that, a new job is refused with ``Busy`` (a ``ValueError`` whose words say the server is busy and
to try again shortly): nothing waits silently, a client sending many prompts cannot make a thread
per prompt, and a model's load, with a share of its own, never waits behind sweeps.

May import: attnviz.limits, attnviz.i18n.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from attnviz.i18n import N_, _
from attnviz.limits import JOB_SHARES


class Busy(ValueError):
    """As many jobs of a kind run and wait as the server gives that kind: try again shortly."""


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
    """Jobs of one kind by key, run within the kind's share and the last ``keep`` finished ones kept
    (least recently asked for leave first): ``JOB_SHARES[name]`` (running, waiting, kept), or ``share``.
    The product's kinds are the registry's (``kind``)."""

    def __init__(self, name: str, share: tuple[int, int, int] | None = None) -> None:
        self.name = name
        self.running, self.waiting, self.keep = JOB_SHARES[name] if share is None else share
        self._jobs: OrderedDict[Hashable, Job] = OrderedDict()
        self._queue: deque[tuple[Job, Callable[[Job], Any]]] = deque()
        self._workers = 0  # threads taking this kind's jobs now
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def start(self, key: Hashable, work: Callable[[Job], Any], words: str = "", label: str = "") -> Job:
        """The job of ``key``: running, waiting or finished, or queued now for a thread of this
        kind that calls ``work(job)`` and keeps its result as ``job.value``; ``words``: what it
        does first; ``label``: the end of the thread's name (attnviz-load-gpt2).
        A failed job is started again. An error is kept as its message (a ``ValueError``'s own
        words; otherwise its type too). ``Busy`` when the kind's share is taken."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not job.failed:
                self._jobs.move_to_end(key)
                return job
            if self._workers + len(self._queue) >= self.running + self.waiting:
                raise refusal(self.name, self._workers + len(self._queue))
            job = self._jobs[key] = Job(words=words if self._workers < self.running else N_("waiting for its turn"))
            self._queue.append((job, work, words))
            while len(self._jobs) > self.keep:
                old_key, old = next(iter(self._jobs.items()))
                if not old.done.is_set():  # a job still to finish stays: it is someone's answer
                    break
                del self._jobs[old_key]
            spawn = self._workers < self.running
            if spawn:
                self._workers += 1
        if spawn:
            threading.Thread(target=self._take, name=f"attnviz-{self.name}" + (f"-{label}" if label else ""),
                             daemon=True).start()
        return job

    def _take(self) -> None:
        """A worker of this kind: the waiting jobs in turn, then it ends."""
        while True:
            with self._lock:
                if not self._queue:
                    self._workers -= 1
                    return
                job, work, words = self._queue.popleft()
            job.words = words or job.words
            try:
                job.value = work(job)
                job.fraction = 1.0
            except Exception as e:  # noqa: BLE001 - shown to whoever asked, never a traceback
                job.error = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            finally:
                job.done.set()

    def busy(self) -> int:
        """Jobs of this kind running or waiting now."""
        with self._lock:
            return self._workers + len(self._queue)

    def jobs(self) -> list[Job]:
        """Every job kept now, running, waiting or finished."""
        with self._lock:
            return list(self._jobs.values())

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._jobs.pop(key, None)


# Each kind's name in the busy message, marked for translation.
KIND_NAMES = {"load": N_("model-loading"), "patching": N_("patching"), "qk-overview": N_("Q/K overview"),
              "long-cost": N_("cost-measuring"), "long-context": N_("long-context"), "circuit": N_("circuit"),
              "training": N_("training")}


def refusal(kind: str, n: int) -> Busy:
    """The one refusal past a kind's share, in the page, the CLI and the API alike."""
    return Busy(_("The server is busy: {n} {kind} jobs are running or waiting, as many as it takes at once. Try "
                  "again in a moment.").format(n=n, kind=_(KIND_NAMES.get(kind, kind))))


REGISTRY: dict[str, Jobs] = {}  # the process's one job of each key, by kind
_REGISTERING = threading.Lock()


def kind(name: str) -> Jobs:
    """The process's ``Jobs`` of kind ``name`` (made now, with its share from ``JOB_SHARES``, if it is the
    first to ask)."""
    with _REGISTERING:
        if name not in REGISTRY:
            REGISTRY[name] = Jobs(name)
        return REGISTRY[name]
