"""Watch it learn: head scores on hand-made weights, the tasks, a deterministic training that
forms an induction head (and a one-layer control that cannot), the worker, the CLI, the page."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import pytest
import torch

from attnviz.analysis.induction import copying, prefix_matching, previous_token
from attnviz.learn import tasks as K
from attnviz.learn import trained as T
from attnviz.learn.train import LENGTH, LearnSettings, best, phase_change, train
from attnviz.learn.worker import Trainings, key_of
from tests.support.apphelp import app, figures


def test_previous_token_of_a_shifted_identity_is_one():
    w = torch.zeros(6, 6)
    w[0, 0] = 1
    for i in range(1, 6):
        w[i, i - 1] = 1
    assert previous_token(w) == 1.0
    assert previous_token(torch.eye(6)) == 0.0


def test_prefix_matching_reads_the_position_after_the_earlier_occurrence():
    L, first, period = 12, 6, 4  # tokens 2..5 repeat at 6..9
    w = torch.zeros(L, L)
    for i in range(first, first + period):
        w[i, i - period + 1] = 1.0  # the induction stripe
    assert prefix_matching(w, first, period) == 1.0
    w2 = torch.zeros(L, L)
    w2[torch.arange(L), torch.arange(L)] = 1.0  # attends to itself: no induction
    assert prefix_matching(w2, first, period) == 0.0


def test_copying_is_positive_when_the_head_raises_what_it_attends_to():
    ids = torch.tensor([3, 4, 5, 6])
    w = torch.eye(4)  # each position attends to itself
    raise_own = torch.zeros(4, 10)
    raise_own[torch.arange(4), ids] = 5.0
    assert copying(w, raise_own, ids) > 1.0
    assert copying(w, -raise_own, ids) < -1.0


def test_the_induction_task_repeats_a_block_at_varying_offsets():
    b = K.batch("induction", 32, LENGTH, 32, torch.Generator().manual_seed(0))
    assert (b.ids[:, 0] == K.BOS).all()
    for row in range(32):
        f, p = b.first[row], b.period[row]
        assert 6 <= p <= 14 and torch.equal(b.ids[row, f:f + p], b.ids[row, f - p:f])
        assert b.focus[row].sum() == p - 1 and b.focus[row, f:f + p - 1].all()
    assert len(set(b.first)) > 5  # the offset varies: no head can solve it by position alone


def test_the_marked_task_answers_with_the_marked_token():
    b = K.batch("marked", 8, LENGTH, 32, torch.Generator().manual_seed(1))
    for row in range(8):
        p = b.first[row]
        assert b.ids[row, p - 1] == K.MARK and b.ids[row, -2] == K.QUERY and b.ids[row, -1] == b.ids[row, p]
    with pytest.raises(ValueError, match="Unknown task"):
        K.batch("fly", 1, LENGTH, 32, torch.Generator())


def _numbers(record: dict) -> list:
    return [(c["step"], c["loss_repeat"], c["loss_other"], c["heads"]) for c in record["checkpoints"]]


def test_the_same_seed_gives_identical_numbers():
    a = train(LearnSettings(steps=100))
    b = train(LearnSettings(steps=100))
    c = train(LearnSettings(steps=100, seed=1))
    assert _numbers(a) == _numbers(b) and a["probe"] == b["probe"]
    assert _numbers(a) != _numbers(c)


@pytest.fixture(scope="module")
def default_runs(learned_defaults):
    """The default training and its one-layer control (4 heads), as the worker records them."""
    two, one = learned_defaults["records"]
    assert one["config"]["layers"] == 1 and one["config"]["heads"] == 4
    return two, one


def test_two_layers_form_an_induction_head_and_one_layer_does_not(default_runs):
    two, one = default_runs
    start, last = two["checkpoints"][0], two["checkpoints"][-1]
    assert two["status"] == "done" and two["phase_change"] is not None
    assert best(last, "prefix_matching", 1) >= 0.5
    assert best(last, "previous_token", 0) >= 0.4
    assert last["loss_repeat"] <= 0.4 * start["loss_repeat"]
    c0, c1 = one["checkpoints"][0], one["checkpoints"][-1]
    assert best(c1, "prefix_matching") <= 0.2
    assert c1["loss_repeat"] >= 0.7 * c0["loss_repeat"]
    assert phase_change(one["checkpoints"]) is None


def test_the_probe_weights_agree_with_the_scores(default_runs):
    two, _one = default_runs
    w = torch.tensor(two["probe"]["weights"])  # (layers, H, L, L)
    assert w.shape == (2, 2, LENGTH, LENGTH)
    p = two["probe"]
    for h in two["checkpoints"][-1]["heads"]:
        assert prefix_matching(w[h["layer"], h["head"]], p["first"], p["period"]) == pytest.approx(h["prefix_matching"])
        assert previous_token(w[h["layer"], h["head"]]) == pytest.approx(h["previous_token"])


def test_a_diverging_training_stops_and_says_so(monkeypatch):
    import attnviz.learn.train as L

    real = L.train_loss
    monkeypatch.setattr(L, "train_loss", lambda *a: real(*a) * float("nan"))
    record = train(LearnSettings(steps=100))
    assert record["status"].startswith("diverged at step 1")
    assert all(c["loss_repeat"] == c["loss_repeat"] for c in record["checkpoints"])  # no NaN was recorded


@pytest.mark.parametrize("change, words", [({"steps": 0}, "steps must be between"),
                                           ({"heads": 3}, "do not divide the width"),
                                           ({"lr": 0.0}, "lr must be between"),
                                           ({"lr": float("nan")}, "lr must be between"),
                                           ({"task": "fly"}, "task must be one of")])
def test_bad_settings_are_refused_with_a_message(change, words):
    with pytest.raises(ValueError, match=words):
        LearnSettings().with_(**change).validate()


def test_the_cli_writes_the_record(tmp_path):
    from attnviz import cli

    out = tmp_path / "run.json"
    assert cli.main(["learn", "--steps", "100", "--layers", "2", "--heads", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) >= {"config", "checkpoints", "probe"} and data["config"]["steps"] == 100
    c = data["checkpoints"][-1]
    assert set(c) >= {"step", "seconds", "loss_repeat", "loss_other", "heads"}
    assert set(c["heads"][0]) == {"layer", "head", "prefix_matching", "previous_token", "copying"}
    assert set(data["probe"]) == {"tokens", "first", "period", "weights"}


@pytest.mark.parametrize("args, words", [(["--steps", "0"], "--steps must be between"),
                                         (["--heads", "3"], "do not divide"), (["--lr", "0"], "--lr must be"),
                                         (["--task", "fly"], "--task must be one of"), ([], "Give --json")])
def test_the_cli_refuses_bad_settings_in_one_line(tmp_path, capsys, args, words):
    from attnviz import cli

    json_out = [] if not args else ["--json", str(tmp_path / "x.json")]
    assert cli.main(["learn", *args, *json_out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_one_training_per_settings_shared_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    runs = Trainings()
    s = LearnSettings(steps=100)
    k1, k2 = runs.start(s), runs.start(s)
    assert k1 == k2 == key_of(s) and len(runs._jobs) == 1
    worker = runs._jobs[k1]
    deadline = time.monotonic() + 120
    while not runs.progress(k1).done and time.monotonic() < deadline:
        time.sleep(0.5)
    p = runs.progress(k1)
    assert p.done and p.status == "done" and p.checkpoints[-1]["step"] == 100
    worker.wait(timeout=60)  # its record written, it ends: the next look lets it go
    assert runs.progress(k1) == p and not runs._jobs and worker.returncode == 0
    torch.set_num_threads(1)  # the worker's one thread: the same sums in the same order
    try:
        assert _numbers(p.record) == _numbers(train(s))  # the worker's numbers are the in-process ones
    finally:
        torch.set_num_threads(2)
    later = Trainings()  # a restarted server replays the finished run
    assert later.progress(k1).done and later.start(s) == k1 and not later._jobs
    # Train on a replay runs it again, live, to the same numbers; its weights stay meanwhile.
    assert later.start(s, again=True) == k1 and later._jobs
    assert not later.progress(k1).done and later.weights_file(k1) is not None
    deadline = time.monotonic() + 120
    while not later.progress(k1).done and time.monotonic() < deadline:
        time.sleep(0.5)
    again = later.progress(k1)
    assert again.status == "done" and _numbers(again.record) == _numbers(p.record)
    model = T.load_trained(s, later.weights_file(k1))
    top, weights = T.predict(model, [K.BOS, 5, 6, 7, 5, 6])
    assert len(top) == 10 and abs(sum(p for _t, p in top)) <= 1 and weights.shape == (2, 2, 6, 6)


def test_a_worker_that_ended_is_let_go_and_its_failure_still_said(tmp_path, monkeypatch):
    """A server keeps only the trainings running: one that ended is reaped and dropped at the next look, and
    a failure, said from its output, stays said (in its folder) after its process is gone."""
    import subprocess
    import sys

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    runs = Trainings()
    with open(tmp_path / "bad.log", "wb") as log:  # stand-ins started as a worker is: ... FOLDER KEY
        runs._jobs = {
            "bad": subprocess.Popen([sys.executable, "-c", "import sys; print('boom: no weights'); sys.exit(3)",
                                     str(tmp_path), "bad"], stdout=log, stderr=subprocess.STDOUT),
            "good": subprocess.Popen([sys.executable, "-c", "pass", str(tmp_path), "good"])}
    ended = list(runs._jobs.values())
    for worker in ended:
        worker.wait(timeout=60)
    with runs._lock:
        assert runs.busy() == 0
    assert not runs._jobs and [w.returncode for w in ended] == [3, 0]
    for asked in (runs, runs, Trainings()):  # again, and from a server that never ran it
        p = asked.progress("bad")
        assert p.done and p.status == "failed: boom: no weights"
    assert runs.progress("good").status == "not started"  # ended well, left no record: nothing to say
    s = LearnSettings(steps=100, seed=4242)
    (tmp_path / "bad.failed").rename(tmp_path / f"{key_of(s)}.failed")  # an earlier try of these settings failed
    assert runs.progress(key_of(s)).status.startswith("failed") and runs.start(s) == key_of(s)
    assert runs.progress(key_of(s)).status == "running"  # tried anew: the earlier failure is not this one's
    worker = runs._jobs[key_of(s)]
    assert _wait(runs, [key_of(s)])[0].status == "done" and worker.wait(timeout=60) == 0
    assert runs.progress(key_of(s)).status == "done" and not runs._jobs


def test_two_servers_on_one_runs_folder_train_a_key_once(tmp_path, monkeypatch):
    """Two servers (replicas, or fresh servers one after another) on one runs folder: the second finds the first's
    training by its lock and starts none, and watches it grow from the files; a worker that finds the key's lock
    held writes nothing; a key no one trained leaves no file behind a look at it."""
    from attnviz.learn import worker as W

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    first, second = Trainings(), Trainings()
    s = LearnSettings(steps=200, seed=77)
    key = first.start(s)
    job = first._jobs[key]
    deadline = time.monotonic() + 120
    while not W.training_elsewhere(tmp_path, key) and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the worker takes the key's lock once it has imported torch
    assert job.poll() is not None or W.training_elsewhere(tmp_path, key), "the worker never took its key's lock"
    assert second.start(s) == key and not second._jobs  # started nowhere else
    assert second.progress(key).status in ("running", "done")  # not "not started": the first one's, read
    assert job.wait(timeout=120) == 0
    p = second.progress(key)
    assert p.done and p.status == "done" and p.checkpoints[-1]["step"] == 200 and not second._jobs
    # held here, in this process, as a worker holds it: a worker started now writes nothing
    other = LearnSettings(steps=100, seed=78)
    k2 = key_of(other)
    with W._key_lock(tmp_path / k2, wait=True):
        assert W.training_elsewhere(tmp_path, k2) and second.start(other) == k2 and not second._jobs
        assert second.progress(k2).status == "running"
        assert W._train_to_files("learn", asdict(other), str(tmp_path), k2) == "running elsewhere"
        assert not (tmp_path / f"{k2}.jsonl").exists()
    assert not W.training_elsewhere(tmp_path, k2) and second.progress(k2).status == "not started"
    before = set(tmp_path.iterdir())
    assert second.progress("0" * 24).status == "not started" and set(tmp_path.iterdir()) == before


def test_a_finished_record_is_parsed_once_and_again_when_it_is_written_again(tmp_path, monkeypatch):
    """Watch it learn looks at its trainings several times a run: the finished record (3.8 MB of JSON for the
    default) is parsed at the first look only; a record written again is read again."""
    import json as real_json

    from attnviz.learn import worker as W

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    parsed = []
    monkeypatch.setattr(W, "json", type("CountingJson", (), {
        "loads": staticmethod(lambda text: parsed.append(1) or real_json.loads(text)),
        "dumps": staticmethod(real_json.dumps)}))
    done = tmp_path / "k.json"
    done.write_text(real_json.dumps({"checkpoints": [{"step": 1}], "status": "done"}), encoding="utf-8")
    runs = Trainings()
    first = [runs.progress("k") for _ in range(3)] + [Trainings().progress("k")]
    assert len(parsed) == 1 and all(p.done and p.checkpoints == [{"step": 1}] for p in first)
    done.write_text(real_json.dumps({"checkpoints": [{"step": 1}, {"step": 2}], "status": "done"}), encoding="utf-8")
    assert runs.progress("k").checkpoints == [{"step": 1}, {"step": 2}] and len(parsed) == 2


def test_a_typed_sequence_is_checked():
    assert T.parse_sequence("BOS 5, 9 mark", LENGTH) == [K.BOS, 5, 9, K.MARK]
    for bad, words in (("", "at least one"), ("5 x", "not a token"), ("99", "outside the vocabulary"),
                       (" ".join(["5"] * (LENGTH + 1)), "at most")):
        with pytest.raises(ValueError, match=words):
            T.parse_sequence(bad, LENGTH)


def test_the_page_trains_watches_and_knocks_out(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    at = app("learn_steps=200&knockout=1.0", page="app_pages/watch_it_learn.py", timeout=120)
    assert not at.exception and any("Press Train" in i.value for i in at.info)
    at.button(key="learn_train").click().run()
    deadline = time.monotonic() + 120
    while not any("The trained model" in h.value for h in at.subheader) and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert not at.exception and not at.error
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "loss as it learns" in titles and "every head on your sequence" in titles
    assert sum(t.startswith("every head on the probe") for t in titles) == 1
    loss = next(f for f in figures(at) if f["layout"]["title"]["text"] == "loss as it learns")
    assert {t["name"] for t in loss["data"]} >= {"loss on the repeat", "one-layer control: loss on the repeat"}
    assert any("Without head L1 H0 the loss on the repeat goes from" in m.value for m in at.markdown)


def test_bad_learn_links_fall_back_with_a_warning():
    from attnviz.views.state import parse

    _s, warnings = parse({"learn_layers": "9", "learn_lr": "nan", "knockout": "x", "sequence": "BOS 99"})
    assert sorted(w.name for w in warnings) == ["knockout", "learn_layers", "learn_lr", "sequence"]


def _idle(runs, seconds=240):
    """Every worker of ``runs`` finished: an earlier test's training would fill the slots."""
    for job in list(runs._jobs.values()):
        job.wait(timeout=seconds)


def _wait(runs, keys, seconds=240):
    deadline = time.monotonic() + seconds
    while not all(runs.progress(k).done for k in keys) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [runs.progress(k) for k in keys]


def test_a_fresh_servers_first_visitor_sees_the_default_training_finished(tmp_path, monkeypatch, learned_defaults):
    """The launcher starts the default training and its control at server start (in an empty runs folder: seen
    started in this server's workers, then stopped); where they have run (the run's own folder, trained as the
    worker trains them), it starts nothing, and the first visitor gets the finished curve, scores and heads at
    once, marked as a replay, with the checkpoint slider."""
    from attnviz.learn.worker import TRAININGS
    from attnviz.views.learn import default_trainings
    from ui.server import train_defaults

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    _idle(TRAININGS)
    train_defaults()
    keys = [key_of(s) for s in default_trainings()]
    assert all(k in TRAININGS._jobs and TRAININGS.progress(k).status == "running" for k in keys)
    for k in keys:
        TRAININGS.stop(k)
    _idle(TRAININGS)  # leave no worker writing into tmp_path
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))
    assert keys == learned_defaults["keys"]
    train_defaults()
    assert not any(k in TRAININGS._jobs for k in keys)
    assert all(p.done and p.status == "done" for p in _wait(TRAININGS, keys))
    at = app(page="app_pages/watch_it_learn.py", timeout=120)
    assert not at.exception and not any("Press Train" in i.value for i in at.info)
    assert any("A replay" in c.value for c in at.caption)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "loss as it learns" in titles and sum(t.startswith("every head on the probe") for t in titles) == 1
    assert at.slider(key="checkpoint").max == len(TRAININGS.progress(keys[0]).checkpoints) - 1
    at.slider(key="checkpoint").set_value(3).run()
    assert any(f["layout"]["title"]["text"].startswith("every head on the probe at step 150<br>") for f in figures(at))


def test_the_page_starts_the_default_training_itself_where_the_launcher_did_not(tmp_path, monkeypatch):
    from attnviz.learn.worker import TRAININGS
    from attnviz.views.learn import default_trainings

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    _idle(TRAININGS)
    at = app(page="app_pages/watch_it_learn.py", timeout=120)
    assert not at.exception and not any("Press Train" in i.value for i in at.info)
    keys = [key_of(s) for s in default_trainings()]
    assert all(TRAININGS.progress(k).status != "not started" for k in keys)
    deadline = time.monotonic() + 120
    while not any("Live" in c.value or "A replay" in c.value for c in at.caption) and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "loss as it learns" in titles, ([c.value for c in at.caption], titles)
    for k in keys:  # seen started: stopped, not trained to the end (the session's trainings are whole)
        TRAININGS.stop(k)
    _wait(TRAININGS, keys)  # leave no worker writing into tmp_path


def test_the_trained_tiny_model_shows_its_roles_on_the_probe(default_runs):
    import numpy as np

    from attnviz.analysis.roles import head_roles, head_scores

    two, _one = default_runs
    w = np.asarray(two["probe"]["weights"])[None] if np.asarray(two["probe"]["weights"]).ndim == 3 else \
        np.asarray(two["probe"]["weights"])  # (layers, H, L, L)
    tokens = [str(t) for t in two["probe"]["tokens"]]
    s = head_scores(w, tokens)
    roles = head_roles(s, s)
    assert "induction" in list(roles[1]), roles
    assert "previous_token" in list(roles[0]), roles
