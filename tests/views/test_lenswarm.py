"""The Logit lens page's work made ahead (attnviz.views.lenswarm), on a tiny perturbed GPT-2 folder: the job makes
the sentence's three other readings into the page's cache, equal to those the page would make, and the last
positions' attributions, so that a class's later steps make none; a tuned lens starts no job; one job per
model, sentence, answer and language."""

from __future__ import annotations

import pytest

from attnviz.analysis.lens import MODES
from attnviz.views import lens as V
from attnviz.views import lenswarm as W
from tests.support import hfmodels

TEXT = "the cat sat on the mat because it"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    root = tmp_path_factory.mktemp("warm-models")
    hfmodels.perturbed(root, "gpt2")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNVIZ_MODEL_DIRS", str(root))
    yield "gpt2"
    mp.undo()


def test_the_other_readings_and_the_last_positions_attributions_are_made_ahead(gpt2, monkeypatch):
    settings = V.LensSettings(answer="was")
    kept: dict = {}

    def keep(key, build):
        if key not in kept:
            kept[key] = build()
        return kept[key]

    calls = []
    real = V.logit_attribution_of
    monkeypatch.setattr(V, "logit_attribution_of", lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    V.RESULTS.clear()
    made = W.warm(gpt2, TEXT, settings, keep)
    others = {(v.mode, v.mid) for v in W.variants(settings)}
    assert others == {(m, mid) for m in MODES for mid in (False, True)} - {(settings.mode, settings.mid)}
    assert len(others) == 3 and len(kept) == 3
    for v in W.variants(settings):
        fresh = V.lens_reading(gpt2, TEXT, v)
        ahead = kept[V.reading_key(gpt2, TEXT, v)]
        assert ahead.result.to_dict() == fresh.result.to_dict()
    n = len(ahead.ids)
    assert n <= 16 and sorted(calls) == list(range(1, n + 1)) and made == 3 + n  # every position, the last first
    assert calls[0] == n
    reading = V.lens_reading(gpt2, TEXT, settings)  # the page's own (the first) reading
    for position in range(n):  # a class opening any cell now makes no attribution
        V.step_of(gpt2, reading, (2, position))
    assert len(calls) == n


def test_a_tuned_lens_starts_no_job_and_one_job_serves_a_sentence_and_language(gpt2, monkeypatch):
    assert W.warm_job(gpt2, TEXT, V.LensSettings(tuned=V.TRAINED_HERE), lambda k, b: b(), "en") is None
    started = []
    monkeypatch.setattr(W, "warm", lambda *a, **k: started.append(a[1]) or 0)
    one = W.warm_job(gpt2, TEXT, V.LensSettings(answer="sat"), lambda k, b: b(), "en")
    one.done.wait(60)
    again = W.warm_job(gpt2, TEXT, V.LensSettings(answer="sat", mode="per-layer", colour="kl"), lambda k, b: b(), "en")
    assert again is one and started == [TEXT]
    other = W.warm_job(gpt2, TEXT, V.LensSettings(answer="sat"), lambda k, b: b(), "zh")
    other.done.wait(60)
    assert other is not one and started == [TEXT, TEXT]
