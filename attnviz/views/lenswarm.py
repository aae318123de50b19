"""The Logit lens page's work made ahead of a class: after a sentence's first reading, its other readings (each
form, with and without the middles) and the step attribution of its last positions (``LENS_WARM_POSITIONS``)
are made in one background job, once per model, sentence, answer and language, into the caches the page reads.
A class that then opens other forms and cells finds them made instead of each making one on its own turn while
the others wait (``bench/bench_lens_page.py`` measures it). A session that asks for a reading the job is making
waits for that one (``attnviz.cache``: computed once, however many ask).
"""

from __future__ import annotations

from collections.abc import Callable

from attnviz import jobs, limits
from attnviz.analysis.lens import MODES
from attnviz.jobs import Busy, Job
from attnviz.views.lens import NO_LENS, LensSettings, lens_reading, reading_key, step_of
from attnviz.views.patching import model_identity

WARMING = jobs.kind("lens-warm")


def warm_key(model: str, text: str, settings: LensSettings, language: str) -> tuple:
    return ("lens-warm", *model_identity(model), text, settings.answer, settings.wrong, language)


def variants(settings: LensSettings) -> list[LensSettings]:
    """The page's other readings of the same sentence and answer: each form, with and without the middles."""
    return [v for v in (settings.with_(mode=m, mid=mid) for m in MODES for mid in (False, True)) if v != settings]


def warm(model: str, text: str, settings: LensSettings, keep: Callable, job: Job | None = None) -> int:
    """Make ``settings``' other readings through ``keep(key, build)`` (the page's cache, bound to its language),
    then the step attribution of the last positions; returns how many things were made or found."""
    others = variants(settings)
    readings = [keep(reading_key(model, text, v), lambda v=v: lens_reading(model, text, v)) for v in others]
    report = job.report if job is not None else (lambda fraction: None)
    report(0.5)
    reading = next((r for r in readings if r.result.mode == "final-scale"), None)
    if reading is None:  # every variant is per-layer: the settings' own reading is the final-scale one
        reading = keep(reading_key(model, text, settings), lambda: lens_reading(model, text, settings))
    n = len(reading.result.positions)
    last = list(range(n - 1, max(-1, n - 1 - limits.LENS_WARM_POSITIONS), -1))  # the answer's position first
    for i, position in enumerate(last):
        step_of(model, reading, (0, position))
        report(0.5 + 0.5 * (i + 1) / len(last))
    return len(readings) + len(last)


def warm_job(model: str, text: str, settings: LensSettings, keep: Callable, language: str) -> Job | None:
    """The background job of ``warm`` for these values (one per model, sentence, answer and language), started
    now if it is not running or done; None for a tuned lens (its one reading is the page's) or where the
    kind's share is taken (the work is then made on demand, as without it)."""
    if settings.tuned != NO_LENS:
        return None
    try:
        return WARMING.ask(warm_key(model, text, settings, language),
                           lambda job: warm(model, text, settings, keep, job), "making the other readings ahead")
    except Busy:
        return None
