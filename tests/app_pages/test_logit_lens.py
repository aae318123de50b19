"""The Logit lens page (app_pages/logit_lens.py) through AppTest: on the model Watch it learn trains it adopts the
model's own example (the repeat, its answer and wrong token), draws the grid, the answer through the points and
the step where the answer arrives, in parts; a link restores the form, the colour, the lens and the cell; a
tuned lens folder and one trained here; bad input (an answer of several tokens, a position out of range, a lens
that does not fit the model, a lens given by path, an encoder) is a message, never a traceback."""

from __future__ import annotations

import json

import pytest

import attnviz
from attnviz.views import lens as L
from tests.support import hfmodels
from tests.support.apphelp import after_loads, app, figures, no_errors, shown, warnings_shown, z

PAGE = "app_pages/logit_lens.py"
TEXT = "the cat sat on the mat because it"


@pytest.fixture(autouse=True)
def trained(learned_defaults, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lens-app")
    folder = hfmodels.perturbed(root, "gpt2")[0]
    hfmodels.save(root, "bert")
    attnviz.train_lens(str(folder), steps=2, out=root / "lens" / "mine")
    config = root / "lens" / "wide" / "config.json"
    attnviz.train_lens(str(folder), steps=1, out=config.parent)
    config.write_text(json.dumps({**json.loads(config.read_text()), "d_model": 64}))
    return root


def _run(query: str = ""):
    """The page, waited for: the model's load, a tuned lens's training (AppTest runs no polling fragment)."""
    at = app(query, page=PAGE, timeout=300)
    for _ in range(4):
        if not at.get("progress"):
            break
        for job in L.TRAININGS.jobs():
            job.done.wait(300)
        at.run()
    return after_loads(at, 300)


def _titles(at) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(at)]


def test_the_default_model_opens_on_its_example_and_the_step_where_the_answer_arrives():
    at = _run()
    no_errors(at)
    pair = attnviz.example_pair("watch-it-learn")
    q = dict(at.query_params)
    assert q["model"] == "watch-it-learn" and q["text"] == pair["clean"]
    assert (q["lens_answer"], q["lens_wrong"]) == (pair["answer"], pair["wrong"])
    assert at.text_area(key="text").value == pair["clean"]  # the sidebar shows the sentence read
    titles = _titles(at)
    assert titles[0].startswith("watch-it-learn: the top token at each point, coloured by its probability")
    assert titles[1].startswith(f"“{pair['answer']}” (against “{pair['wrong']}”) at position 18")
    assert titles[2].startswith("L0 end → L1 end at position 18")  # the induction head's layer: the answer arrives
    grid, _lines, bars = figures(at)
    n = len(pair["clean"].split())
    assert grid["layout"]["yaxis"]["ticktext"] == ["embed", "L0 end", "L1 end"]  # no MLP: no middles
    assert len(grid["layout"]["xaxis"]["ticktext"]) == n and grid["layout"]["xaxis"]["ticktext"][0] == "0: BOS"
    *parts, step = z({"z": bars["data"][0]["x"]})
    assert abs(sum(parts) - step) < 1e-6 and step > 1
    # every definition named, its formula rendered, its words under it
    names = [m.value.strip("*") for m in at.markdown if m.value.startswith("**") and m.value.endswith("**")]
    assert names == [L.DEFINITION_NAMES[k] for k in L.DEFINITIONS]
    assert [x.value.strip("$\n") for x in at.latex] == list(L.FORMULAS.values())


def test_a_link_restores_the_form_the_colour_and_the_cell():
    at = _run("model=watch-it-learn&lens_mode=per-layer&lens_colour=kl&lens_cell=1.4&lens_mid=0")
    no_errors(at)
    assert at.text_input(key="lens_cell").value == "1.4" and at.toggle(key="lens_mid").value is False
    grid = figures(at)[0]
    assert grid["layout"]["title"]["text"].endswith("the final norm recomputed at every point")
    assert "coloured by the KL from the model's own" in grid["layout"]["title"]["text"]
    shape = grid["layout"]["shapes"][0]
    assert (shape["x0"], shape["y0"]) == (3.5, 1.5)  # L0 end at position 4, outlined
    assert len(figures(at)) == 2  # no bars: per-layer's step is not the sum of the parts
    assert any(shown(i.value).startswith("Per-layer divides each point by its own norm scale") for i in at.info)
    q = dict(at.query_params)
    assert (q["lens_mode"], q["lens_colour"], q["lens_cell"], q["lens_mid"]) == ("per-layer", "kl", "1.4", "0")


def test_a_tuned_lens_folder_and_one_trained_here(dirs, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(dirs))
    at = _run(f"model=gpt2&text={TEXT}&lens_tuned=mine&lens_cell=1.7")
    no_errors(at)
    assert _titles(at)[0].endswith("<br>a tuned lens")
    assert figures(at)[0]["layout"]["yaxis"]["ticktext"] == ["embed", "L0 end", "L1 end"]
    assert any("A tuned lens translates each point" in shown(i.value) for i in at.info)
    assert at.segmented_control(key="lens_mode").disabled
    at = _run(f"model=gpt2&text={TEXT}&lens_tuned=trained&lens_steps=3")
    no_errors(at)
    assert any(c.value.startswith("Trained here on") for c in at.caption)
    assert L.TRAININGS.get(L.training_key("gpt2", 3)).value.fit["steps"] == 3


def test_an_answer_the_model_cannot_read_falls_back_to_its_own_top_token(dirs, monkeypatch):
    """The warning says why; the grid and the answer's chart stay, on the model's own top token; the field keeps
    what was typed."""
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(dirs))
    at = _run(f"model=gpt2&text={TEXT}&lens_answer=was tired")
    no_errors(at)
    assert any("is not one token for gpt2" in w and "Showing the model's own top token" in w
               for w in warnings_shown(at)), warnings_shown(at)
    assert len(figures(at)) >= 2 and at.session_state["lens_answer"] == "was tired"


@pytest.mark.parametrize("query, says", [
    ("lens_cell=e.40", "Position 40 is out of range: the text has 8 tokens (positions 0 to 7)."),
    ("lens_tuned=wide", "was tuned for a model of 2 layers and width 64; gpt2 has 2 layers and width 32."),
])
def test_bad_input_is_a_message(dirs, monkeypatch, query, says):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(dirs))
    at = _run(f"model=gpt2&text={TEXT}&{query}")
    assert not at.exception
    assert [e.value for e in at.error if says in shown(e.value)], [e.value for e in at.error]


def test_a_lens_given_by_path_and_an_encoder_fall_back_saying_why(dirs, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(dirs))
    at = _run(f"model=gpt2&text={TEXT}&lens_tuned={dirs / 'lens' / 'mine'}")
    no_errors(at)
    assert any(w.startswith("URL parameter lens_tuned=") and "is not a tuned lens this server offers" in w
               for w in warnings_shown(at))
    assert at.selectbox(key="lens_tuned").value == "none"
    at = _run("model=bert&text=BOS 5 9 12 5 9")
    no_errors(at)
    assert at.selectbox(key="model").value == "watch-it-learn" and len(figures(at)) == 3
    assert any("bert is an encoder: it has no unembedding" in shown(t.value) for t in at.toast)
    # With the default text the page adopts the trained model's example, a rerun: the toast is shown again in it
    at = _run("model=bert")
    assert at.query_params["text"] == attnviz.example_pair("watch-it-learn")["clean"]
    assert any("bert is an encoder: it has no unembedding" in shown(t.value) for t in at.toast)


def test_in_chinese_nothing_is_left_in_english():
    from tests.test_i18n import texts, untranslated

    at = _run("lang=zh")
    no_errors(at)
    found = texts(at)
    assert any("每一层会预测什么：logit 透镜" in t for t in found)  # the heading
    assert _titles(at)[0].startswith("watch-it-learn：每个点排第一的词元，按其概率着色")
    assert not untranslated(found), untranslated(found)[:5]
