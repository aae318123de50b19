"""Each forward pass once, page by page: a counter on every model's forward (the random layer, the
weights of a file, a Hugging Face folder, BERT) while a page is opened in a fresh server, and again
while it reruns with nothing changed.

On the first visit a page may run several distinct inputs (Mask lab's three masks, Verify's float64
copy), but never the same one twice; a rerun runs none. Patching, Circuit and Watch it learn run the
trained tiny model through its own seam, counted in ``tests/views/test_patching.py``."""

from __future__ import annotations

import hashlib

import pytest

from attnviz.views.catalogue import PAGES
from tests.support.apphelp import app, no_errors

COUNTED_ELSEWHERE = ("watch-it-learn", "patching", "circuit")


def _digest(t) -> str:
    return "" if t is None else hashlib.sha1(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:12]


@pytest.fixture
def forwards(monkeypatch):
    """Every model forward, as (model class, the input's vectors, the source's, the mask, layer, dropout)."""
    from attnviz.models.bert import BertModel
    from attnviz.models.given import GivenWeights
    from attnviz.models.hf import HFModel
    from attnviz.models.random import RandomLayer

    calls: list[tuple] = []
    for cls in (RandomLayer, GivenWeights, HFModel, BertModel):
        real = cls.forward

        def counted(self, inp, source, mask, *a, _real=real, **kw):
            vectors = inp.vectors() if hasattr(inp, "vectors") else None
            calls.append((type(self).__name__, _digest(vectors), None if source is None else _digest(source.vectors()),
                          _digest(mask), kw.get("layer", 0), kw.get("dropout", 0.0), str(kw.get("device"))))
            return _real(self, inp, source, mask, *a, **kw)
        monkeypatch.setattr(cls, "forward", counted)
    return calls


@pytest.mark.parametrize("entry", [p for p in PAGES if p.name not in COUNTED_ELSEWHERE], ids=lambda p: p.name)
def test_a_page_runs_each_input_once_and_a_rerun_runs_none(entry, forwards):
    from attnviz.cache import CACHES

    for kept in CACHES.values():  # a fresh server: nothing computed yet
        kept.clear()
    at = app(page=f"app_pages/{entry.script}", timeout=300)
    no_errors(at)
    first = list(forwards)
    assert len(first) == len(set(first)), [c for c in first if first.count(c) > 1]
    at.run()
    no_errors(at)
    assert forwards[len(first):] == []  # nothing changed: nothing runs again
    print(f"\n{entry.name}: {len(first)} forward pass(es) on the first visit, none on a rerun")  # the figure
    _wait_for_jobs()


def _wait_for_jobs() -> None:
    """Let a page's background work (Long sequences' cost sweep) end before the next test, or the process's
    exit, meets it: a job the page started is the page's, not this test's."""
    from attnviz import jobs

    for kind in list(jobs.REGISTRY.values()):
        for job in kind.jobs():
            job.done.wait(300)
