"""The circuit's data and record (attnviz.views.circuit) on the trained model: every number the
picture draws in plain JSON (no path: null), the edges the paths past the threshold, the
composition scores the library's; one shared job per plain key, a failed one keeping its message."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import attnviz
from attnviz.analysis.examples import example_prompts
from attnviz.learn.trained import subject_of
from attnviz.views import circuit as V


@pytest.fixture(scope="module")
def pair(learned_defaults):
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model, not a new one
    yield example_prompts(subject_of("watch-it-learn"), "break")
    mp.undo()


def _threshold(pair) -> float:
    """Just under the strongest path into the receiver: it, and the paths as strong, are drawn."""
    job = V.circuit_job("watch-it-learn", pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"])
    assert job.done.wait(300) and not job.error, job.error
    return 0.9 * float(np.nanmax(job.value.found.into(job.value.found.through)))


def test_the_json_holds_every_number_the_picture_draws(pair):
    t = _threshold(pair)
    data = json.loads(V.circuit_json("watch-it-learn", pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"],
                                     V.CircuitSettings(threshold=t)))
    c = data["circuit"]
    assert c["receiver"] == [1, 0] and c["through"] == "k" and c["key_part"] == f"L{c['sender'][0]}H{c['sender'][1]}"
    k = np.array([[np.nan if v is None else v for v in row] for row in np.array(c["paths"]["k"], dtype=object)
                  .reshape(-1, 2 * 2)]).reshape(2, 2, 2, 2)
    assert np.isnan(k[1]).all() and not np.isnan(k[0, :, 1]).any()  # no path from the last layer: null
    want = [(e["component"], *e["sender"], *e["receiver"]) for e in data["edges"]]
    got = [("qkv"[i], *ix) for i, comp in enumerate("qkv")
           for ix in zip(*np.nonzero(np.abs(np.nan_to_num(np.array(c["paths"][comp], dtype=float))) >= t),
                         strict=True)]
    assert sorted(want) == sorted((a, *map(int, rest)) for a, *rest in got)
    assert ("k", *c["sender"], *c["receiver"]) in want
    for mode in "qkv":
        np.testing.assert_allclose(data["composition"][mode], attnviz.composition_scores("watch-it-learn", mode),
                                   atol=1e-6)
    assert set(data["definitions"]) == {"attribution", "faithfulness", "effect", "paths", "composition",
                                        "score_attribution"}
    assert all(not isinstance(v, float) or math.isfinite(v) for v in json.loads(json.dumps(c["heads"]))[0])


def test_one_job_per_plain_key_and_a_failed_one_keeps_its_message(pair):
    args = ("watch-it-learn", pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"])
    jobs = [V.circuit_job(*args) for _ in range(3)]
    assert all(j is jobs[0] for j in jobs) and jobs[0].done.wait(120) and not jobs[0].error, jobs[0].error
    assert jobs[0].value.found.receiver == (1, 0) and jobs[0].fraction == 1.0
    bad = V.circuit_job("watch-it-learn", pair["clean"], pair["corrupted"], "99")
    assert bad.done.wait(60) and "“99” is not one of watch-it-learn's tokens" in bad.error
    assert V.circuit_job("watch-it-learn", pair["clean"], pair["corrupted"], "99") is bad


def test_a_threshold_outside_0_1_is_refused(pair):
    run = V.circuit_job("watch-it-learn", pair["clean"], pair["corrupted"], pair["answer"], pair["wrong"])
    assert run.done.wait(120)
    with pytest.raises(ValueError, match="threshold must be between 0 and 1"):
        V.circuit_record(run.value, 1.5)
    fig = V.draw(run.value, _threshold(pair))
    assert [t.name for t in fig.data] == ["composition (weights)", "path into k", "edges", "heads"]
    edges = fig.data[2]  # a diamond at each drawn edge's middle, its click naming the edge
    assert [V.clicked_edge({"customdata": list(c)}) for c in edges.customdata] == \
        [f"{c}:{s}.{h}-{r}.{g}" for c, s, h, r, g in edges.customdata]
    assert V.clicked_edge({"customdata": [1, 0]}) is None and V.clicked_edge({}) is None
