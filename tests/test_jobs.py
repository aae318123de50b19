"""attnviz.jobs: one job per key however many ask, its progress, its error as words, a failed job
started again, the last ``keep`` kept."""

from __future__ import annotations

import threading

import pytest

from attnviz import jobs, limits
from attnviz.jobs import Busy, Jobs


def test_one_job_per_key_however_many_ask_and_its_progress():
    jobs, gate, calls = Jobs("test", share=(1, 8, 4)), threading.Event(), []

    def work(job):
        calls.append(1)
        job.report(0.5, "half")
        gate.wait(10)
        return 42

    first = jobs.start("k", work, "starting")
    assert all(jobs.start("k", work) is first for _ in range(5))
    gate.set()
    assert first.done.wait(10) and first.value == 42 and first.fraction == 1.0 and first.words == "half"
    assert calls == [1] and jobs.get("k") is first and not first.failed


def test_an_error_is_kept_as_words_and_a_failed_job_starts_again():
    jobs, tries = Jobs("test", share=(1, 8, 4)), []

    def work(job):
        tries.append(1)
        if len(tries) == 1:
            raise ValueError("the prompt is empty")
        if len(tries) == 2:
            raise KeyError("x")
        return "fine"

    j1 = jobs.start("k", work)
    assert j1.done.wait(10) and j1.failed and j1.error == "the prompt is empty"
    j2 = jobs.start("k", work)
    assert j2 is not j1 and j2.done.wait(10) and j2.error == "KeyError: 'x'"
    j3 = jobs.start("k", work)
    assert j3.done.wait(10) and j3.value == "fine" and jobs.start("k", work) is j3


def test_the_last_keep_jobs_are_kept_least_recently_asked_first_out():
    jobs = Jobs("test", share=(1, 8, 2))
    a = jobs.start("a", lambda job: 1)
    b = jobs.start("b", lambda job: 2)
    assert a.done.wait(10) and b.done.wait(10)
    assert jobs.start("a", lambda job: 3) is a  # asked again: now the most recent
    jobs.start("c", lambda job: 4)
    assert jobs.get("b") is None and jobs.get("a") is a and len(jobs.jobs()) == 2
    jobs.forget("a")
    assert jobs.get("a") is None


def test_a_result_larger_than_every_kinds_share_is_not_kept_and_its_job_says_so(small_caches):
    """Not kept, yet not started again by whoever asks next (a page polling it would start it for ever): its
    job ends with a message, kept in its place."""
    import numpy as np

    from attnviz.jobs import KEPT

    jobs, share = Jobs("test-large", share=(1, 4, 8)), limits.cache_bytes("jobs")
    big = jobs.start("big", lambda job: np.zeros(share // 8 + 1))  # float64: one element past the share
    assert big.done.wait(10) and big.failed and big.value is None
    assert "not kept" in big.error and "ATTNVIZ_CACHE_MB" in big.error and jobs.get("big") is big
    small = jobs.start("small", lambda job: np.zeros(1000))
    assert small.done.wait(10) and jobs.get("small") is small and KEPT.total_bytes <= share


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"attnviz-{name}")]


def test_a_kind_runs_and_queues_within_its_share_and_refuses_past_it():
    """Jobs running or waiting are bounded, not only those kept: past the share a new job is
    refused with words that say the server is busy, and the waiting ones hold no thread."""
    jobs, gate, order = Jobs("bounded", share=(1, 2, 16)), threading.Event(), []

    def work(i):
        def run(job):
            gate.wait(10)
            order.append(i)
            return i
        return run

    started = [jobs.start(i, work(i), "working") for i in range(3)]
    assert jobs.busy() == 3 and len(_threads("bounded")) == 1  # one runs, two wait without a thread
    assert started[1].words == "waiting for its turn"
    with pytest.raises(Busy, match="busy.*Try again"):
        jobs.start(3, work(3))
    assert jobs.start(0, work(0)) is started[0]  # asking for one already there is no new job
    gate.set()
    assert all(j.done.wait(10) for j in started) and order == [0, 1, 2]
    for _ in range(100):  # its thread ends once nothing waits
        if not _threads("bounded"):
            break
        threading.Event().wait(0.02)
    assert not _threads("bounded") and jobs.busy() == 0
    assert jobs.start(3, work(3)).done.wait(10)  # room again


def test_every_kind_has_a_declared_share_and_a_load_never_waits_behind_sweeps():
    assert set(jobs.KIND_NAMES) == set(limits.JOB_SHARES)  # the busy message names every kind in words
    assert limits.MAX_JOB_THREADS == sum(r for k, (r, _w, _k) in limits.JOB_SHARES.items() if k != "training") <= 24
    sweeps, loads, gate = Jobs("patching"), Jobs("load"), threading.Event()
    running, waiting, _kept = limits.JOB_SHARES["patching"]
    held = [sweeps.start(("sweep", i), lambda job: gate.wait(10)) for i in range(running + waiting)]
    with pytest.raises(Busy):
        sweeps.start(("sweep", "one more"), lambda job: 1)
    load = loads.start("gpt2", lambda job: "loaded")
    assert load.done.wait(10) and load.value == "loaded"  # its own share: not behind the sweeps
    gate.set()
    assert all(j.done.wait(10) for j in held)


def test_the_product_makes_its_jobs_and_caches_through_the_one_registry():
    """Process-wide state in one place: each kind of job is one ``Jobs`` of the registry with its share
    from ``limits.JOB_SHARES``, each cache one of ``attnviz.cache``'s, bounded by its share of
    ``ATTNVIZ_CACHE_MB`` (the models: ``ATTNVIZ_MAX_LOADED_MB``); no module makes its own."""
    import re
    from pathlib import Path

    import ui.compute  # noqa: F401 - the app's figures
    from attnviz import cache, jobs
    from attnviz.views import pages  # noqa: F401 - every page's module, through the table
    from attnviz.views.catalogue import PAGES
    from attnviz.views.pages import module_of

    for p in PAGES:
        module_of(p.name)
    root = Path(__file__).resolve().parent.parent
    own = [f"{path.relative_to(root)}:{n + 1}" for folder in ("attnviz", "ui", "app_pages")
           for path in sorted((root / folder).rglob("*.py")) if path.name not in ("jobs.py", "cache.py")
           for n, line in enumerate(path.read_text(encoding="utf-8").splitlines())
           if re.search(r"\b(Jobs|ByteBudgetCache)\(", line)]
    assert not own, own
    assert set(jobs.REGISTRY) == set(limits.JOB_SHARES) - {"training"}  # a training is a process (learn.worker)
    for name, kind in jobs.REGISTRY.items():
        assert (kind.running, kind.waiting, kind.keep) == limits.JOB_SHARES[name] and jobs.kind(name) is kind
    assert set(cache.CACHES) == {*limits.CACHE_SHARES, "models"}
    assert all(c.max_bytes == limits.cache_bytes(name) for name, c in cache.CACHES.items())
    shared = sum(c.max_bytes for name, c in cache.CACHES.items() if name != "models")
    assert shared <= limits.cache_budget_bytes() and cache.CACHES["models"].max_bytes == limits.max_loaded_bytes()


def test_a_training_past_its_share_gets_the_busy_message(tmp_path, monkeypatch):
    from attnviz.learn import worker
    from attnviz.learn.train import LearnSettings

    class Running:  # a training process that has not ended
        def poll(self):
            return None

    monkeypatch.setattr(worker, "runs_dir", lambda: tmp_path)
    trainings = worker.Trainings()
    trainings._jobs = {f"k{i}": Running() for i in range(limits.MAX_TRAININGS)}
    with pytest.raises(Busy, match="server is busy: .* training jobs"):
        trainings.start(LearnSettings(seed=12345))
