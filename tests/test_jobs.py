"""attnviz.jobs: one job per key however many ask, its progress, its error as words, a failed job
started again, the last ``keep`` kept."""

from __future__ import annotations

import threading

from attnviz.jobs import Jobs


def test_one_job_per_key_however_many_ask_and_its_progress():
    jobs, gate, calls = Jobs(keep=4, name="test"), threading.Event(), []

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
    jobs, tries = Jobs(keep=4, name="test"), []

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
    jobs = Jobs(keep=2, name="test")
    a = jobs.start("a", lambda job: 1)
    jobs.start("b", lambda job: 2)
    assert jobs.start("a", lambda job: 3) is a  # asked again: now the most recent
    jobs.start("c", lambda job: 4)
    assert jobs.get("b") is None and jobs.get("a") is a and len(jobs.jobs()) == 2
    jobs.forget("a")
    assert jobs.get("a") is None
