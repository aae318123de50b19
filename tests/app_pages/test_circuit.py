"""The Circuit page (app_pages/circuit.py) through AppTest: on the model Watch it learn trains it adopts the
circuit's repeat pair, scores every edge (the graph of the top edges, the faithfulness curve, the top edges'
exact effects), finds the induction circuit, opens its key path and the attended cell; a link reopens
another edge and cell, and another scored edge; bad edges, cells and links get a message; a GPT-2-like folder
gets its indirect-object pair, on Patching too; a model too large for the exact sweep keeps its graph."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.analysis.examples import example_prompts
from attnviz.learn.trained import subject_of
from attnviz.models import registry as R
from attnviz.views import attribution as A
from attnviz.views import circuit as C
from tests.support.apphelp import after_loads, app, figures

PAGE = "app_pages/circuit.py"


@pytest.fixture(autouse=True)
def trained(learned_defaults, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model


def _run(at):
    """Wait for the circuit job (AppTest does not run the polling fragment) and rerun."""
    for _ in range(6):
        if not at.get("progress"):
            return after_loads(at, 300)
        for job in [*A.ATTRIBUTIONS.jobs(), *C.CIRCUITS.jobs()]:
            job.done.wait(300)
        at.run()
    return at


def _titles(at) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(at)]


def test_the_default_link_finds_the_induction_circuit_and_opens_its_key_path():
    at = _run(app(page=PAGE, timeout=120))
    assert not at.exception and not at.error, [e.value for e in at.error]
    pair = example_prompts(subject_of("watch-it-learn"), "break")
    # the defaults mean something for the tiny model on Patching only: the circuit's own pair replaces them
    assert [at.text_input(key=k).value for k in ("clean", "corrupted", "answer", "wrong")] == \
        [pair[k] for k in ("clean", "corrupted", "answer", "wrong")]
    found = C.CIRCUITS.jobs()[-1].value.found
    assert found.receiver == (1, 0) and found.through == "k"
    message = next(i.value for i in at.info)
    assert message.replace("\\", "").startswith("L1 H0 brings back") and "through its keys" in message
    s, h = found.sender
    assert [x.value for x in at.subheader] == [
        "Head to head, exactly: the circuit by path patching", f"One path: L{s} H{h} → L1 H0, into its keys",
        f"Why it attends there: query {len(_tokens(pair)) - 1} · key {found.attended}, split into parts"]
    titles = _titles(at)
    assert titles[0].startswith("watch-it-learn: the 20 edges of largest |score|")
    assert titles[1] == "Faithfulness:<br>how much of the answer<br>the top edges keep"
    assert titles[2].startswith("watch-it-learn: the circuit found by the numbers")
    assert titles[3] == "L1 H0 on the corrupted prompt" and titles[4].startswith(f"…with L{s} H{h} → L1 H0")
    assert titles[5].startswith("L1 H0, query")
    graph = figures(at)[2]
    edges = next(t for t in graph["data"] if t.get("name") == "edges")
    assert ["k", s, h, 1, 0] in edges["customdata"]  # the diamond a click opens the path with
    # the definitions, each named, its formula rendered (LaTeX, not raw underscores) and its words under it
    names = [m.value.strip("*") for m in at.markdown if m.value.startswith("**") and m.value.endswith("**")]
    assert names == ["edge attribution", "faithfulness", "exact effect", "path patching", "composition score",
                     "score attribution"]
    formulas = [x.value.strip("$\n") for x in at.latex]  # st.latex wraps each in $$ lines
    assert formulas == list(C.FORMULAS.values()) and all("\\" in f for f in formulas)
    assert not any("W_OV^" in c.value for c in at.caption)
    q = dict(at.query_params)
    assert q["model"] == "watch-it-learn" and q["corrupted"] == pair["corrupted"]


def _tokens(pair) -> list[str]:
    return pair["clean"].split()


def test_a_link_reopens_its_edge_and_cell_and_the_patched_row_differs():
    at = _run(app("model=watch-it-learn&circuit_edge=k:0.1-1.1&circuit_cell=12.3&circuit_composition=none",
                  page=PAGE, timeout=120))
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.subheader[1].value == "One path: L0 H1 → L1 H1, into its keys"
    assert at.subheader[2].value.startswith("Why it attends there: query 12 · key 3")
    before, after = (np.array(f["data"][0]["z"], dtype=float) for f in figures(at)[3:5])
    assert before.shape == after.shape and np.allclose(np.nansum(after, -1), 1, atol=1e-5)
    graph = figures(at)[2]
    assert not any(t.get("name") == "composition (weights)" for t in graph["data"])  # composition none
    assert dict(at.query_params)["circuit_edge"] == "k:0.1-1.1"


@pytest.mark.parametrize("query,words", [
    ("circuit_edge=k:1.0-0.1", "is not after its sender"),
    ("circuit_edge=q:0.9-1.0", "does not exist"),
    ("circuit_cell=3.10", "is masked"),
    ("circuit_cell=99.1", "outside the prompt"),
    ("circuit_link=a1.h0->a0.h1<q>", "is not an edge of watch-it-learn's graph"),
    ("circuit_link=input->m0", "is not an edge of watch-it-learn's graph"),  # the tiny model has no MLP
])
def test_a_bad_edge_or_cell_falls_back_with_a_warning_and_the_page_stays_whole(query, words):
    """A mistyped edge or cell (in its field, or in a link, which a reload keeps) is a warning naming it; the
    page draws its own in its place, and every chart and field stays, so the value can be mended where it was
    typed."""
    at = _run(app("model=watch-it-learn&" + query, page=PAGE, timeout=120))
    assert not at.exception and not at.error, [e.value for e in at.error]
    warned = [w.value for w in at.warning]
    assert any(words in w and "instead" in w for w in warned), warned
    name = query.split("=")[0]
    assert at.text_input(key=name).value == query.split("=", 1)[1]  # the field, with what was typed
    whole = _run(app("model=watch-it-learn", page=PAGE, timeout=120))
    assert len(figures(at)) == len(figures(whole))  # every chart, as without the bad value


def test_a_malformed_link_value_falls_back_with_a_warning():
    at = _run(app("model=watch-it-learn&circuit_edge=nonsense&circuit_threshold=7", page=PAGE, timeout=120))
    assert not at.exception and not at.error
    warned = " ".join(w.value for w in at.warning).replace("\\", "")  # markdown escapes
    assert "circuit_edge" in warned and "circuit_threshold" in warned
    assert at.subheader[1].value.startswith("One path: L0 H")


def test_a_gpt2_like_folder_gets_its_indirect_object_pair_here_and_on_patching(tmp_path, monkeypatch):
    from tests.support.circuits import bpe_gpt2

    bpe_gpt2(tmp_path / "bpe")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    for page in (PAGE, "app_pages/patching.py"):
        at = _run(app("model=bpe", page=page, timeout=120))
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert at.text_input(key="clean").value == "When Mary and John went to the store, John gave a drink to"
        assert at.text_input(key="corrupted").value == "When Mary and John went to the store, Tom gave a drink to"
        assert (at.text_input(key="answer").value, at.text_input(key="wrong").value) == ("ĠMary", "ĠJohn")


def test_the_adopted_pair_is_in_the_link_even_when_the_sweep_is_cached():
    """The page adopts the model's pair while it runs, after app.py wrote the link: it writes the link again,
    so a session whose page finishes in its first run (the sweep cached) gets the pair in its link too."""
    _run(app(page=PAGE, timeout=120))  # the sweep is cached from here on
    at = app(page=PAGE, timeout=120)  # a new session, whose page runs once
    assert not at.get("progress") and not at.exception
    pair = example_prompts(subject_of("watch-it-learn"), "break")
    assert dict(at.query_params).get("corrupted") == pair["corrupted"]


def test_every_edge_scored_its_top_edges_exact_and_a_link_opens_another():
    at = _run(app("model=watch-it-learn&circuit_method=eap&circuit_top=7&circuit_link=a0.h0->a1.h0<k>", page=PAGE,
                  timeout=120))
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = A.ATTRIBUTIONS.jobs()[-1].value
    assert run.attribution.method == "eap" and run.attribution.steps is None
    graph = figures(at)[0]
    marks = next(t for t in graph["data"] if t.get("name") == "edges")
    drawn = [d[0] for d in marks["customdata"]]
    assert drawn == [n for n, _s in run.attribution.top(7)]  # the seven of largest |score|, in rank order
    pair = example_prompts(subject_of("watch-it-learn"), "break")
    import attnviz

    want = attnviz.path_patch("watch-it-learn", pair["clean"], pair["corrupted"], answer=pair["answer"],
                              wrong=pair["wrong"], edges=["a0.h0->a1.h0<k>"])["a0.h0->a1.h0<k>"]
    opened = next(m.value.replace("\\", "") for m in at.markdown
                  if m.value.replace("\\", "").startswith("**a0.h0->a1.h0<k>**"))
    assert f"exact effect {want:+.4g}" in opened and f"score {run.attribution['a0.h0->a1.h0<k>']:+.4g}" in opened
    table = at.dataframe[0].value
    assert list(table["edge"]) == [n for n, _s in run.attribution.top(A.EXACT_TOP)]
    assert np.allclose(table["exact effect"], [run.effects[n] for n in table["edge"]])
    curve = figures(at)[1]["data"][0]
    assert curve["x"][-1] == len(run.attribution) and abs(curve["y"][-1] - 1) < 1e-4  # every edge: the clean run


def test_a_model_too_large_for_the_exact_sweep_keeps_its_attribution_graph(tmp_path, monkeypatch):
    from attnviz import limits
    from tests.support.circuits import bpe_gpt2

    bpe_gpt2(tmp_path / "bpe")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    monkeypatch.setattr(limits, "MAX_EXACT_SWEEP_TOKENS", 10)
    at = _run(app("model=bpe", page=PAGE, timeout=120))
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert _titles(at)[0].startswith("bpe: the 20 edges of largest |score|") and len(figures(at)) == 2
    assert any("bound of 10:" in i.value.replace("\\", "") for i in at.info), [i.value for i in at.info]
    assert not at.subheader  # no exact sweep started
