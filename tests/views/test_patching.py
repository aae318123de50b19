"""The Patching page's data (attnviz.views.patching): one run of the sweep with its attention on
both prompts, the chosen head (the best, or the link's, bounded by the run), the record that holds
every number the page draws, one shared sweep per plain key."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnviz.analysis.subjects import TinySubject
from attnviz.learn.trained import trained_model
from attnviz.plots import FigureStyle
from attnviz.views import patching as V
from attnviz.views.state import DEFAULTS


@pytest.fixture(scope="module")
def trained(learned_defaults):
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model, not a new one
    yield
    mp.undo()


@pytest.fixture(scope="module")
def run(trained):
    return V.run_of(DEFAULTS.with_(model="watch-it-learn"))


def test_the_default_example_has_its_induction_head_bring_the_answer_back(run):
    p = run.patching
    assert p.differ == [2, 10] and p.clean > 0 > p.corrupted
    share = V.normalised_heads(run)
    assert share.shape == (2, 2) and share[1, 0] >= 0.5 and np.abs(share[0]).max() < 0.1
    assert V.chosen(run, DEFAULTS.with_(model="watch-it-learn")) == (1, 0)
    assert "L1 H0 brings back the most" in V.describe(run, DEFAULTS)


def test_the_attention_on_both_prompts_is_the_models(run):
    model = trained_model()
    pair = DEFAULTS.pair
    for prompt, weights in ((pair.clean, run.clean_weights), (pair.corrupted, run.corrupted_weights)):
        ids = torch.tensor([TinySubject(model, "m").ids(prompt)])
        with torch.no_grad():
            want = torch.stack([w[0] for w in model(ids)[1]]).numpy()
        np.testing.assert_allclose(weights, want, atol=1e-6)


@pytest.mark.parametrize("patched, want", [("best", (1, 0)), ("0.1", (0, 1)), ("9.9", (1, 1))])
def test_the_chosen_head_is_the_links_bounded_by_the_run(run, patched, want):
    assert V.chosen(run, DEFAULTS.with_(patched=patched)) == want


def test_the_record_holds_every_number_the_page_draws(run):
    state = DEFAULTS.with_(model="watch-it-learn", patched="0.1")
    record = V.record(run, state)
    p = record["patching"]
    np.testing.assert_allclose(p["heads"], run.patching.heads)
    np.testing.assert_allclose(p["heads_normalised"], V.normalised_heads(run))
    np.testing.assert_allclose(p["residual_normalised"], run.patching.normalised(run.patching.residual))
    assert (record["head"]["layer"], record["head"]["head"]) == (0, 1)
    np.testing.assert_allclose(record["head"]["difference"], run.clean_weights[0, 1] - run.corrupted_weights[0, 1])
    a = record["logit_attribution"]
    assert a["sum_of_parts"] == pytest.approx(a["logit_difference"], abs=1e-4)
    assert json.loads(json.dumps(record)) == record  # plain numbers only


def test_the_figures_are_the_records_numbers(run):
    state = DEFAULTS.with_(model="watch-it-learn")
    heads = V.draw_heads(run, state, FigureStyle())
    np.testing.assert_allclose(np.asarray(heads.data[0].z, dtype=float), V.normalised_heads(run), atol=1e-6)
    assert heads.data[0].zmid == 0 and heads.data[0].zmin == -heads.data[0].zmax
    markers = heads.data[1]  # a click on a cell's marker reports its head
    assert list(markers.customdata) == [0, 1, 2, 3] and list(markers.y) == ["L0", "L0", "L1", "L1"]
    positions = V.draw_positions(run, state, FigureStyle())
    assert [x.startswith("✱") for x in positions.data[0].x].count(True) == 2
    bars = V.draw_attribution(run, state, FigureStyle())
    assert list(bars.data[0].x) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]


def test_two_prompts_with_nothing_to_bring_back_say_so(trained):
    state = DEFAULTS.with_(model="watch-it-learn", corrupted=DEFAULTS.pair.clean)
    run = V.run_of(state)
    assert "give the same logit difference" in V.problem(run, state)


def test_one_sweep_per_plain_key_shared_by_everyone(trained, monkeypatch):
    calls = []
    real = V.run_of
    monkeypatch.setattr(
        V, "run_of", lambda state, progress=None, step=None: calls.append(1) or real(state, progress, step))
    state = DEFAULTS.with_(model="watch-it-learn", answer="25", wrong="")
    V.SWEEPS.forget(V.sweep_key(state))  # another test's
    jobs = [V.sweep_job(state) for _ in range(4)]
    assert all(j is jobs[0] for j in jobs) and jobs[0].done.wait(60) and not jobs[0].error
    assert V.sweep_job(state) is jobs[0] and len(calls) == 1 and jobs[0].fraction == 1.0
    assert jobs[0].value.patching.metric_name == "log p(answer)" and jobs[0].value.attribution is None
    assert V.sweep_key(state) != V.sweep_key(state.with_(answer="12"))


def test_a_sweep_that_fails_keeps_its_message(trained):
    state = DEFAULTS.with_(model="watch-it-learn", answer="99")
    job = V.sweep_job(state)
    assert job.done.wait(60) and "“99” is not one of watch-it-learn's tokens" in job.error
    assert V.sweep_job(state) is job  # kept, not started again at the page's every poll


def test_a_sweep_holds_the_compute_workers_one_layer_at_a_time(trained):
    """compute_with runs each layer's batch, not the whole sweep: the explorer's runs take turns."""
    state = DEFAULTS.with_(model="watch-it-learn", answer="25", wrong="")
    V.SWEEPS.forget(V.sweep_key(state))
    V.RESULTS.clear()  # its sweeps, kept there by an earlier test's
    calls = []
    job = V.sweep_job(state, compute_with=lambda work: calls.append(1) or work())
    assert job.done.wait(60) and not job.error, job.error
    assert len(calls) == 2 * job.value.layers  # heads and residual, a layer each


# --- work done once: each prompt runs through the model once per sweep ------------------------

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"


@pytest.fixture(scope="module")
def gpt2_state(tmp_path_factory):
    from tests.support import hfmodels

    folder = hfmodels.save(tmp_path_factory.mktemp("shared"), "gpt2")[0]
    return DEFAULTS.with_(model=str(folder), clean=CLEAN, corrupted=CORRUPTED, answer="it", wrong="was")


def _counted(monkeypatch, model_class) -> list:
    """Every whole forward pass of the model (a run from a layer on does not call it)."""
    calls, real = [], model_class.forward
    monkeypatch.setattr(model_class, "forward", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    return calls


def _the_old_way(state) -> tuple:
    """The sweep as it was run before its traces were shared: every part on runs of its own."""
    from attnviz.analysis.patching import logit_attribution_of, patch
    from attnviz.learn.trained import subject_of

    subject = subject_of(state.model)
    wrong = state.pair.wrong.strip() or None
    pair = state.pair
    p = patch(subject, pair.clean, pair.corrupted, answer=pair.answer, wrong=wrong, heads=True, residual=True)
    a = logit_attribution_of(subject, pair.clean, answer=pair.answer, wrong=wrong) if wrong else None
    weights = [torch.stack([w[0] for w in subject.stack.run(torch.tensor([subject.ids(t)]), weights=True).weights])
               for t in (state.pair.clean, state.pair.corrupted)]
    return p, a, weights


@pytest.mark.parametrize("which", ["gpt2", "tiny"])
def test_a_sweep_on_shared_runs_is_the_same_to_the_last_bit(which, gpt2_state, trained):
    state = gpt2_state if which == "gpt2" else DEFAULTS.with_(model="watch-it-learn")
    V.RESULTS.clear()
    shared = V.run_of(state)
    p, a, weights = _the_old_way(state)
    for part in ("heads", "residual"):
        assert np.array_equal(getattr(shared.patching, part), getattr(p, part))
    assert (shared.patching.clean, shared.patching.corrupted) == (p.clean, p.corrupted)
    for part in ("heads", "attention_biases", "mlps"):
        assert np.array_equal(getattr(shared.attribution, part), getattr(a, part))
    assert (shared.attribution.embeddings, shared.attribution.biases) == (a.embeddings, a.biases)
    assert torch.equal(torch.from_numpy(shared.clean_weights), weights[0])
    assert torch.equal(torch.from_numpy(shared.corrupted_weights), weights[1])
    assert np.ptp(p.heads) > 1e-4 and np.ptp(p.residual) > 1e-4  # numbers that could differ


def test_the_page_runs_each_prompt_through_the_model_once(gpt2_state, monkeypatch):
    """Its offered answers (the top next tokens after each prompt), the sweep of heads and
    positions, the attribution and the heads drawn: one whole run of the clean prompt and one of
    the corrupted (they were 4 and 3)."""
    from attnviz.learn.trained import subject_of

    calls = _counted(monkeypatch, type(subject_of(gpt2_state.model).hf.model))
    V.RESULTS.clear()
    V.top_next(gpt2_state.model, gpt2_state.pair.clean)
    V.top_next(gpt2_state.model, gpt2_state.pair.corrupted)
    run = V.run_of(gpt2_state)
    assert len(calls) == 2 and run.attribution is not None
    V.run_of(gpt2_state)  # and a second sweep of the same prompts runs neither again
    assert len(calls) == 2


def test_the_tiny_models_sweep_runs_each_prompt_once(trained, monkeypatch):
    from attnviz.models.tiny import AttentionOnly

    calls = []
    real = AttentionOnly.inputs  # the start of every whole run of the model
    monkeypatch.setattr(AttentionOnly, "inputs", lambda self, ids: calls.append(1) or real(self, ids))
    V.RESULTS.clear()
    V.run_of(DEFAULTS.with_(model="watch-it-learn"))
    assert len(calls) == 2


def _counted_sweeps(monkeypatch) -> list:
    """Every head sweep (``patching.sweep_heads``), by the prompts' ids it sweeps."""
    from attnviz.analysis import patching as A

    calls, real = [], A.sweep_heads
    monkeypatch.setattr(A, "sweep_heads", lambda stack, clean, corrupted, *a: calls.append(
        (tuple(clean.logits.shape), float(corrupted.logits.sum()))) or real(stack, clean, corrupted, *a))
    return calls


def test_patching_and_circuit_sweep_a_pairs_heads_once(gpt2_state, monkeypatch):
    """The Patching page's sweep and the Circuit page's on the same pair: both prompts run once, the
    heads swept once (they were 2 sweeps), and a rerun of either runs nothing."""
    from attnviz.learn.trained import subject_of
    from attnviz.views import circuit as C

    forwards = _counted(monkeypatch, type(subject_of(gpt2_state.model).hf.model))
    sweeps = _counted_sweeps(monkeypatch)
    V.RESULTS.clear()
    s = gpt2_state
    patched = V.run_of(s)
    found = C.circuit_run(s.model, s.pair.clean, s.pair.corrupted, s.pair.answer, s.pair.wrong).found
    assert (len(forwards), len(sweeps)) == (2, 1)
    np.testing.assert_array_equal(found.heads, patched.patching.normalised(patched.patching.heads))
    V.run_of(s)
    C.circuit_run(s.model, s.pair.clean, s.pair.corrupted, s.pair.answer, s.pair.wrong)
    assert (len(forwards), len(sweeps)) == (2, 1)


def test_watch_it_learns_patching_and_circuit_run_each_prompt_once(trained, learned_defaults, monkeypatch):
    """Watch it learn's patching of the repeat and its circuit read the kept runs by the training's
    key: the clean repeat runs once for both, and again nothing on a rerun."""
    from attnviz.analysis.examples import example_prompts
    from attnviz.learn.trained import subject_of
    from attnviz.models.tiny import AttentionOnly
    from attnviz.views import learn as L

    model, key = subject_of("watch-it-learn").model, learned_defaults["keys"][0]
    pair = example_prompts(TinySubject(model, "model"), "break")
    distinct = {L.REPEAT["clean"], L.REPEAT["corrupted"], pair["clean"], pair["corrupted"]}
    calls = []
    real = AttentionOnly.inputs  # the start of every whole run of the model
    monkeypatch.setattr(AttentionOnly, "inputs", lambda self, ids: calls.append(tuple(ids[0].tolist()))
                        or real(self, ids))
    sweeps = _counted_sweeps(monkeypatch)
    V.RESULTS.clear()
    L.carry_repeat(model, None, (key, None))
    L.learned_circuit(model, None, (key, None))
    whole = [c for c in calls if len(c) == len(L.REPEAT["clean"].split())]
    assert len(whole) == len(set(whole)) == len(distinct) == 3  # the clean repeat is the circuit's clean prompt
    assert len(sweeps) == 2  # a sweep of each pair's heads
    before = (len(calls), len(sweeps))
    L.carry_repeat(model, None, (key, None))
    L.learned_circuit(model, None, (key, None))
    assert (len(calls), len(sweeps)) == before
