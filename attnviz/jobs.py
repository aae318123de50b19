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

A finished job is kept to answer whoever asks again, at most ``kept`` of a kind, and the results of every
kind together in the byte-bounded cache's ``jobs`` share (``KEPT``, ``limits.CACHE_SHARES["jobs"]`` of
``ATTNVIZ_CACHE_MB``), sized as that cache sizes its entries; the least recently asked for leave first. A
result larger than the whole share is not kept: its job ends with a message saying so, rather than being
started again by the next page run that asks for it and finds nothing.

May import: attnviz.limits, attnviz.i18n, attnviz.cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from attnviz import cache
from attnviz.i18n import N_, _
from attnviz.limits import JOB_SHARES, cache_budget_bytes

# Every kind's finished jobs, by (their Jobs, key), each sized with its value (cache.nbytes): so the results a
# server keeps between requests count against ATTNVIZ_CACHE_MB, in its "jobs" share.
KEPT = cache.named("jobs")


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
    """Jobs of one kind by key, run within the kind's share, the last ``keep`` finished ones kept (least
    recently asked for leave first) while their results fit the jobs' share of the cache (``KEPT``):
    ``JOB_SHARES[name]`` (running, waiting, kept), or ``share``. The product's kinds are the registry's
    (``kind``)."""

    def __init__(self, name: str, share: tuple[int, int, int] | None = None) -> None:
        self.name = name
        self.running, self.waiting, self.keep = JOB_SHARES[name] if share is None else share
        self._jobs: dict[Hashable, Job] = {}  # running or waiting: at most running + waiting
        # The finished ones' keys, least recently asked for first; their jobs are in KEPT, which lets the
        # least recently asked for of every kind go when their bytes pass the share.
        self._done: OrderedDict[Hashable, None] = OrderedDict()
        self._queue: deque[tuple[Hashable, Job, Callable[[Job], Any], str]] = deque()
        self._workers = 0  # threads taking this kind's jobs now
        self._lock = threading.Lock()

    def _kept(self, key: Hashable) -> Job | None:
        """The finished job of ``key`` (now the most recently asked for), or None; the caller holds the lock."""
        job = KEPT.get((self, key))
        if job is None:
            self._done.pop(key, None)  # let go for the bytes of other kinds' results, if it was kept
        else:
            self._done.move_to_end(key)
        return job

    def _let_go(self, key: Hashable) -> None:
        self._done.pop(key, None)
        KEPT.discard((self, key))

    def _trim(self) -> None:
        """At most ``keep`` jobs of this kind, running, waiting and finished: the least recently asked for of
        the finished ones leave (one still to finish stays: it is someone's answer)."""
        for gone in [k for k in self._done if (self, k) not in KEPT]:
            del self._done[gone]
        while self._done and len(self._jobs) + len(self._done) > self.keep:
            self._let_go(next(iter(self._done)))

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            job = self._jobs.get(key)
            return job if job is not None else self._kept(key)

    def start(self, key: Hashable, work: Callable[[Job], Any], words: str = "", label: str = "") -> Job:
        """The job of ``key``: running, waiting or finished, or queued now for a thread of this
        kind that calls ``work(job)`` and keeps its result as ``job.value``; ``words``: what it
        does first; ``label``: the end of the thread's name (attnviz-load-gpt2).
        A failed job is started again. An error is kept as its message (a ``ValueError``'s own
        words; otherwise its type too). ``Busy`` when the kind's share is taken."""
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                job = self._kept(key)
            if job is not None and not job.failed:
                return job
            if self._workers + len(self._queue) >= self.running + self.waiting:
                raise refusal(self.name, self._workers + len(self._queue))
            self._let_go(key)  # a failed one, started again
            job = self._jobs[key] = Job(words=words if self._workers < self.running else N_("waiting for its turn"))
            self._queue.append((key, job, work, words))
            self._trim()
            spawn = self._workers < self.running
            if spawn:
                self._workers += 1
        if spawn:
            threading.Thread(target=self._take, name=f"attnviz-{self.name}" + (f"-{label}" if label else ""),
                             daemon=True).start()
        return job

    def ask(self, key: Hashable, work: Callable[[Job], Any], words: str = "", label: str = "") -> Job:
        """``start``, but a failed job of ``key`` is given back, its message kept, not started again: a page asks at
        every rerun, and inputs that failed once fail again until they change (and ``key`` with them)."""
        failed = self.get(key)
        if failed is not None and failed.failed:
            return failed
        return self.start(key, work, words, label)

    def _take(self) -> None:
        """A worker of this kind: the waiting jobs in turn, then it ends."""
        while True:
            with self._lock:
                if not self._queue:
                    self._workers -= 1
                    return
                key, job, work, words = self._queue.popleft()
            job.words = words or job.words
            try:
                job.value = work(job)
                job.fraction = 1.0
            except Exception as e:  # noqa: BLE001 - shown to whoever asked, never a traceback
                job.error = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            finally:
                self._finish(key, job)

    def _finish(self, key: Hashable, job: Job) -> None:
        """``job`` kept among the finished (a result larger than the jobs' whole share: its message instead),
        then done: whoever polls it finds it kept when they ask again."""
        try:
            size = cache.nbytes(job)  # outside the lock: a large result takes a while to walk
            if size > KEPT.max_bytes:
                job.value, job.error = None, too_large(size, KEPT.max_bytes)
                size = cache.nbytes(job)
            with self._lock:
                if self._jobs.get(key) is job:  # not forgotten meanwhile
                    del self._jobs[key]
                    if KEPT.put((self, key), job, size=size):
                        self._done[key] = None
                    self._trim()
        finally:
            job.done.set()

    def busy(self) -> int:
        """Jobs of this kind running or waiting now."""
        with self._lock:
            return self._workers + len(self._queue)

    def jobs(self) -> list[Job]:
        """Every job kept now: the finished ones, least recently asked for first, then those running or waiting."""
        with self._lock:
            finished = [KEPT.peek((self, k)) for k in self._done]
            return [j for j in finished if j is not None] + list(self._jobs.values())

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._jobs.pop(key, None)
            self._let_go(key)


def too_large(size: int, share: int) -> str:
    """Why a finished job's result was not kept: it alone is larger than every kind's results may hold."""
    return (f"Its result holds about {size / 2**20:,.0f} MB, more than this server keeps for finished background "
            f"work ({share / 2**20:,.0f} MB of the {cache_budget_bytes() / 2**20:,.0f} MB of ATTNVIZ_CACHE_MB), so "
            "it was not kept. Ask for less (a shorter text or prompt, fewer blocks, a smaller model), or give the "
            "server a larger ATTNVIZ_CACHE_MB.")


# Each kind's name in the busy message, marked for translation.
KIND_NAMES = {"load": N_("model-loading"), "patching": N_("patching"), "qk-overview": N_("Q/K overview"),
              "long-cost": N_("cost-measuring"), "long-context": N_("long-context"), "circuit": N_("circuit"),
              "edge-attribution": N_("edge-attribution"), "training": N_("training"),
              "lens-training": N_("lens-training"), "lens-warm": N_("reading-ahead"),
              "vision-language": N_("vision-language")}


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
