"""python -m attnviz render --page circuit: every number the Circuit page draws (the circuit, its edges, the
composition scores, the opened edge's two patterns, the opened cell's terms), a figure offline; bad input
(an encoder, prompts of different lengths, an answer of several tokens, a masked cell, a receiver not after
its sender) in one line and exit code 2."""

import json

import numpy as np
import pytest

import attnviz
from tests.support import hfmodels
from tests.support.clirun import run_cli, run_process


def _cli(*args, cwd, env=None, process=False):
    """(exit code, stderr) of ``render --page circuit args``: in this process, or as one (``process``)."""
    code, _out, err = (run_process if process else run_cli)("render", "--page", "circuit", *args, cwd=cwd, env=env)
    return code, err


@pytest.fixture()
def learned(learned_defaults, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))
    return {"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"])}


def test_the_json_holds_every_number_the_page_draws(learned, tmp_path):
    code, err = _cli("--model", "watch-it-learn", "--circuit-cell", "18.10", "--circuit-threshold", "0.3",
                     "--out", "c.json", cwd=tmp_path, env=learned)
    assert code == 0, err
    rec = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    pair = attnviz.example_pair("watch-it-learn", "break")  # the page's own pair, where none is given
    assert {k: rec["config"][k] for k in pair} == pair
    c = rec["circuit"]
    assert c["receiver"] == [1, 0] and c["through"] == "k" and rec["threshold"] == 0.3
    edge = rec["edge"]  # the circuit's own edge, opened
    assert edge["name"] == f"k:{c['sender'][0]}.{c['sender'][1]}-1.0" and edge["receiver"] == [1, 0]
    before, after = np.array(edge["before"]), np.array(edge["after"])
    assert before.shape == after.shape == (19, 19)
    assert np.allclose(before.sum(-1), 1, atol=1e-5) and np.allclose(after.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(before, 1) == 0)  # causal
    assert not np.allclose(before, after)  # the key path moves the induction head's attention
    cell = rec["cell"]
    assert (cell["layer"], cell["head"], cell["query"], cell["key"]) == (1, 0, 18, 10)
    assert abs(np.sum(cell["terms"]) - cell["score"]) <= 1e-4 * max(1, abs(cell["score"]))
    want = attnviz.score_attribution("watch-it-learn", pair["clean"], layer=1, head=0, query=18, key=10)
    assert abs(want.score - cell["score"]) < 1e-6 and cell["top_terms"] == want.words(5)


def test_a_figure_offline(learned, tmp_path):
    code, err = _cli("--model", "watch-it-learn", "--out", "c.html", cwd=tmp_path, env=learned)
    assert code == 0, err
    html = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert '<script src="http' not in html and "edges of largest |score|" in html  # the page's first figure


def test_the_json_holds_every_edge_score_and_the_curve(learned, tmp_path):
    code, err = _cli("--model", "watch-it-learn", "--circuit-method", "eap-ig-inputs", "--circuit-steps", "3",
                     "--circuit-top", "4", "--circuit-link", "a0.h1->a1.h0<k>", "--out", "c.json", cwd=tmp_path,
                     env=learned)
    assert code == 0, err
    rec = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    pair = attnviz.example_pair("watch-it-learn", "break")
    want = attnviz.edge_attribution("watch-it-learn", pair["clean"], pair["corrupted"], answer=pair["answer"],
                                    wrong=pair["wrong"], method="eap-ig-inputs", steps=3)
    a = rec["attribution"]
    assert a["method"] == "eap-ig-inputs" and a["steps"] == 3 and a["scores"].keys() == dict(want).keys()
    assert max(abs(a["scores"][n] - want[n]) for n in want) < 1e-9
    assert a["drawn"] == [n for n, _s in want.top(4)]
    curve = attnviz.faithfulness_curve("watch-it-learn", pair["clean"], pair["corrupted"], answer=pair["answer"],
                                       wrong=pair["wrong"], attribution=want)
    assert [c["edges"] for c in a["curve"]] == [c.edges for c in curve]
    assert np.allclose([c["fraction"] for c in a["curve"]], [c.fraction for c in curve])
    exact = attnviz.path_patch("watch-it-learn", pair["clean"], pair["corrupted"], answer=pair["answer"],
                               wrong=pair["wrong"], edges=["a0.h1->a1.h0<k>"])
    assert rec["link"]["edge"] == "a0.h1->a1.h0<k>"
    assert abs(rec["link"]["exact_effect"] - exact["a0.h1->a1.h0<k>"]) < 1e-6
    assert set(a["exact"]["effects"]) == {n for n, _s in want.top(20)} and -1 <= a["rank_agreement"] <= 1
    assert rec["circuit"]["receiver"] == [1, 0]  # the tiny model is small enough for the exact sweep too


@pytest.mark.parametrize("args, words", [
    (("--circuit-edge", "k:1.0-0.1"), "is not after its sender"),
    (("--circuit-cell", "3.10"), "is masked"),
    (("--circuit-edge", "x:1"), "must be empty (the circuit's own edge) or component:layer.head-layer.head"),
    (("--clean", "BOS 10 28 11"), "The clean prompt has 4 tokens and the corrupted one 19"),
    (("--answer", "12 13"), "is not one of watch-it-learn's tokens"),
    (("--circuit-threshold", "2"), "must be between 0.0 and 1.0"),
    (("--circuit-method", "acdc"), "circuit_method=\"acdc\" must be one of eap, eap-ig-inputs"),
    (("--circuit-steps", "0"), "circuit_steps=\"0\" must be between 1 and 256"),
    (("--circuit-link", "a0.h1-a1.h0"), "must be empty (the top edge) or sender->receiver"),
    (("--circuit-link", "a1.h0->a0.h1<q>"), "is not an edge of watch-it-learn's graph"),
])
def test_bad_input_exits_2_with_one_line(learned, tmp_path, args, words):
    code, err = _cli("--model", "watch-it-learn", *args, "--out", "c.json", cwd=tmp_path, env=learned)
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert "Traceback" not in err and not list(tmp_path.glob("c.*"))


def test_an_encoder_and_the_random_layer_are_refused_in_one_line(tmp_path):
    folder = hfmodels.save(tmp_path, "bert")[0]
    for model in (str(folder), "random"):
        code, err = _cli("--model", model, "--clean", "the cat sat", "--corrupted", "the mat sat", "--answer", "on",
                         "--out", "c.json", cwd=tmp_path, process=model == "random")  # once as a process
        assert code == 2 and len(err.strip().splitlines()) == 1 and "no next token to patch toward" in err, err
