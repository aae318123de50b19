"""The Logit lens page's data (attnviz.views.lens) on a tiny GPT-2 folder with every norm and bias perturbed: the
record holds every number the page draws (and the figures draw those numbers); a final-scale step's bars sum to
the step, which is the lens's own step; per-layer and a tuned lens say why theirs cannot; the default cell is
where the answer's logit rises most; tuned lenses are named, never given by path, and one that does not fit
the model is refused in one sentence; the grid holds 24 positions × 12 layers and their middles on one
projector screen."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import attnviz
from attnviz.analysis.lens import lens_step
from attnviz.plots.style import FigureStyle
from attnviz.views import lens as V
from attnviz.views.catalogue import page, why_not
from attnviz.views.state import DEFAULTS, parse_url
from tests.support import hfmodels

TEXT, ANSWER = "the cat sat on the mat because it", "was"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A folder of models as an operator lists it: a perturbed GPT-2, a BERT; under lens/, a tuned lens trained
    for the GPT-2 and one whose config says 3 layers."""
    root = tmp_path_factory.mktemp("lens-models")
    folder = hfmodels.perturbed(root, "gpt2")[0]
    hfmodels.save(root, "bert")
    attnviz.train_lens(str(folder), steps=2, out=root / "lens" / "mine")
    attnviz.train_lens(str(folder), steps=1, out=root / "lens" / "other")
    config = root / "lens" / "other" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "num_hidden_layers": 3}))
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNVIZ_MODEL_DIRS", str(root))
    yield root
    mp.undo()


def _state(**changes):
    return DEFAULTS.with_(**{"model": "gpt2", "text": TEXT, "lens_answer": ANSWER, **changes})


def _record(state) -> dict:
    return json.loads(V.numbers(state, "json"))


def test_the_record_holds_every_number_the_page_draws(dirs):
    state = _state(lens_cell="1m.5", lens_colour="entropy")
    rec = _record(state)
    want = attnviz.logit_lens(str(dirs / "gpt2"), TEXT, answer=ANSWER)
    assert rec["lens"]["points"] == want.points == ["embeddings", "layer 0 middle", "layer 0 end", "layer 1 middle",
                                                    "layer 1 end"]
    for name in ("top_probs", "entropy", "kl", "answer_logit", "answer_prob", "answer_rank"):
        np.testing.assert_allclose(rec["lens"][name], getattr(want, name), atol=1e-6, err_msg=name)
    assert rec["lens"]["top_tokens"] == want.top_tokens
    assert rec["config"]["cell"] == "1m.5" and rec["cell"]["point"] == "layer 1 middle" and rec["cell"]["position"] == 5
    np.testing.assert_allclose(rec["grid"]["values"], want.entropy, atol=1e-6)  # the colour chosen
    chart = rec["answer_chart"]
    assert chart["position"] == 5
    np.testing.assert_allclose(chart["probability"], want.answer_prob[:, 5], atol=1e-6)
    assert chart["rank"] == want.answer_rank[:, 5].tolist()
    # the figures draw these numbers
    _s, reading = V.cli_reading(state)
    cell = V.opened_cell(reading, state.lens)
    grid = V.lens_grid_figure(reading, state.lens, FigureStyle(), cell)
    np.testing.assert_allclose(np.asarray(grid.data[0].z, dtype=float), rec["grid"]["values"], atol=1e-5)
    assert grid.layout.shapes[0].x0 == 4.5 and grid.layout.shapes[0].y0 == 2.5  # the opened cell, outlined
    lines = V.answer_figure(reading, cell, FigureStyle())
    np.testing.assert_allclose(lines.data[0].y, chart["probability"], atol=1e-6)
    np.testing.assert_allclose(np.asarray(lines.data[1].y) - 1, chart["rank"])
    bars = V.lens_step_figure(V.step_of("gpt2", reading, cell), FigureStyle())
    np.testing.assert_allclose(bars.data[0].x, [p["logits"] for p in rec["step"]["parts"]] + [rec["step"]["step"]])


@pytest.mark.parametrize("cell", ["e.0", "0m.3", "0.3", "1m.7", "1.7"])
def test_final_scale_bars_sum_to_the_step_of_the_lens(dirs, cell):
    rec = _record(_state(lens_cell=cell, lens_wrong="tired"))
    step, lens = rec["step"], rec["lens"]
    row, position = lens["points"].index(rec["cell"]["point"]), rec["cell"]["position"]
    logit = np.asarray(lens["answer_logit"])[:, position]
    own = logit[row] - (logit[row - 1] if row else 0.0)  # the embeddings: its value, from nothing
    assert abs(sum(p["logits"] for p in step["parts"]) - step["step"]) < 1e-9
    assert abs(step["step"] - own) <= 1e-4 * max(1, abs(own))
    kinds = [p["kind"] for p in step["parts"]]
    assert kinds == (["embeddings", "biases"] if cell.startswith("e") else
                     ["head"] * 4 + ["attention biases"] if "m" in cell else ["mlp"])
    assert rec["step_note"] is None and step["answer"] == ANSWER and step["wrong"] == "tired"


def test_the_cells_of_one_position_share_its_attribution_and_each_step_is_its_own(dirs, monkeypatch):
    state = _state(lens_wrong="tired")
    _s, reading = V.cli_reading(state)
    calls = []
    real = V.logit_attribution_of
    monkeypatch.setattr(V, "logit_attribution_of", lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    V.RESULTS.clear()
    steps = [V.step_of("gpt2", reading, (point, 3)) for point in range(1, 5)]  # four points at position 3
    assert calls == [4]  # one attribution, of the prefix up to position 3
    direct = [lens_step(V.subject_of("gpt2", "lens"), reading.ids, reading.result.points, point,
                                              3, answer=reading.answer, wrong=reading.wrong) for point in range(1, 5)]
    assert [s.to_dict() for s in steps] == [d.to_dict() for d in direct]
    V.step_of("gpt2", reading, (2, 5))
    assert calls == [4, 6]  # another position: another prefix


def test_the_default_cell_is_where_the_answer_rises_most_at_the_last_position(dirs):
    rec = _record(_state())
    logit = np.asarray(rec["lens"]["answer_logit"])[:, -1]
    assert rec["cell"]["position"] == 7 and rec["lens"]["points"].index(rec["cell"]["point"]) == \
        int(np.argmax(np.diff(logit))) + 1


def test_without_an_answer_the_answer_is_the_models_own_top_token(dirs):
    rec = _record(DEFAULTS.with_(model="gpt2", text=TEXT))
    assert rec["config"]["answer_given"] is False
    assert rec["config"]["answer"] == rec["lens"]["top_tokens"][-1][-1][0]  # the last point: the model's own


@pytest.mark.parametrize("changes, says", [
    ({"lens_mode": "per-layer", "lens_cell": "1m.5"}, "Per-layer divides each point by its own norm scale"),
    ({"lens_tuned": "mine", "lens_cell": "1.5"}, "A tuned lens translates each point"),
])
def test_per_layer_and_a_tuned_lens_say_why_their_steps_are_not_the_parts(dirs, changes, says):
    rec = _record(_state(**changes))
    assert rec["step"] is None and rec["step_note"].startswith(says)
    if "lens_mode" in changes:  # and indeed: the parts (final-scale's) do not sum to a per-layer step
        final = _record(_state(lens_cell="1m.5"))["step"]["step"]
        logit = np.asarray(rec["lens"]["answer_logit"])[:, 5]
        assert abs((logit[3] - logit[2]) - final) > 1e-3
    else:
        assert rec["lens"]["mode"] == "tuned" and rec["lens"]["points"] == ["embeddings", "layer 0 end", "layer 1 end"]
        assert rec["tuned_lens"]["config"]["num_hidden_layers"] == 2


def test_tuned_lenses_are_offered_by_name_and_a_path_is_no_name(dirs):
    assert set(V.listed_lenses()) == {"mine", "other"}
    assert V.LensSettings.__dataclass_fields__  # declared
    state, warnings = parse_url("lens_tuned=mine&lens_cell=3m.7")
    assert not warnings and state.lens.tuned == "mine" and state.lens.cell == "3m.7"
    for bad in ("../gpt2/lens/mine", str(dirs / "lens" / "mine"), "nowhere"):
        state, warnings = parse_url("lens_tuned=" + bad)
        assert state.lens.tuned == "none" and [w.name for w in warnings] == ["lens_tuned"]
    with pytest.raises(ValueError, match=r"was tuned for a model of 3 layers and width 32; gpt2 has 2 layers"):
        V.numbers(_state(lens_tuned="other"), "json")


@pytest.mark.parametrize("changes, says", [
    ({"lens_answer": "was tired"}, "is not one token for gpt2"),
    ({"lens_cell": "e.40"}, "Position 40 is out of range: the text has 8 tokens (positions 0 to 7)."),
    ({"lens_cell": "2m.1"}, "The point 2m is not drawn here"),
    ({"lens_cell": "0m.1", "lens_tuned": "mine"}, "The point 0m is not drawn here"),  # a tuned lens: no middles
    ({"model": "bert"}, "bert is an encoder: it has no unembedding"),
])
def test_bad_input_is_one_sentence(dirs, changes, says):
    with pytest.raises(ValueError) as e:
        V.numbers(_state(**changes), "json")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_an_encoder_is_refused_by_what_it_is(dirs):
    assert why_not(page("logit-lens"), "bert").startswith("is an encoder: it has no unembedding")
    assert why_not(page("patching"), "bert") == "has no next token to patch toward"


def test_a_tuned_lens_trained_here_is_one_shared_background_job(dirs):
    job = V.training_job("gpt2", 3)
    assert V.training_job("gpt2", 3) is job
    job.done.wait(120)
    assert not job.error and job.value.fit["steps"] == 3 and job.value.layers == 2
    assert V.TRAININGS.get(V.training_key("gpt2", 3)) is job


def test_a_click_names_its_cell():
    assert V.clicked_grid_cell({"customdata": 13}, 8) == (1, 5)
    assert V.clicked_grid_cell({"customdata": [2]}, 8) == (0, 2)
    assert V.clicked_grid_cell({"x": "a"}, 8) is None


def test_the_grid_of_a_30_layer_model_on_a_projector_thins_its_rows_and_keeps_its_text_readable_or_off():
    """SmolLM2's 61 points on a 1024 × 768 projector: rows of about 6 px. A label or a cell's token smaller than
    readable text would cover its neighbours: the rows are labelled one in k, no two labels closer than their
    font, the cells show their colour only, and the title says which rows are labelled."""
    points = ["embeddings"] + [f"layer {layer} {w}" for layer in range(30) for w in ("middle", "end")]
    P, n = len(points), 10
    r = SimpleNamespace(model="smollm2-135m", mode="final-scale", points=points, positions=list(range(n)),
                        tokens=["Ġthe"] * n, top_tokens=[[["Ġcity"] * 3] * n] * P, top_probs=np.full((P, n, 3), 0.3),
                        entropy=np.ones((P, n)), kl=np.ones((P, n)))
    fig = V.lens_grid_figure(SimpleNamespace(result=r), V.LensSettings(), FigureStyle(font_size=24), (3, 9))
    layout, heat = fig.layout, fig.data[0]
    rows_px = (layout.height - layout.margin.t - layout.margin.b) / P
    kept = list(layout.yaxis.tickvals)
    every = list(heat.y).index(kept[1]) - list(heat.y).index(kept[0])
    assert 1 < every < P and kept == list(heat.y)[::every]
    assert every * rows_px >= layout.yaxis.tickfont.size  # no label covers the next one
    assert heat.text is None  # each cell its colour only: no 3-pixel text
    assert f"one row in {every}" in layout.title.text


def test_the_grid_holds_24_positions_and_12_layers_with_their_middles_on_one_projector_screen():
    points = ["embeddings"] + [f"layer {layer} {w}" for layer in range(12) for w in ("middle", "end")]
    words = ["Ġthe", "Ġcat", "Ġsat", "Ġon", "Ġmat", "Ġbecause"]
    P, n = len(points), 24
    r = SimpleNamespace(model="gpt2-small", mode="final-scale", points=points, positions=list(range(n)),
                        tokens=[words[i % 6] for i in range(n)], top_tokens=[[[words[(i + j) % 6]] * 3
                                                                              for j in range(n)] for i in range(P)],
                        top_probs=np.full((P, n, 3), 0.3), entropy=np.ones((P, n)), kl=np.ones((P, n)))
    fig = V.lens_grid_figure(SimpleNamespace(result=r), V.LensSettings(), FigureStyle(font_size=24), (3, 23))
    layout = fig.layout
    assert layout.height <= 680  # a 1024 × 768 projector's chart, whole
    assert list(layout.yaxis.tickvals) == list(fig.data[0].y) and len(layout.yaxis.tickvals) == P  # every row named
    assert list(layout.xaxis.tickvals) == list(fig.data[0].x)  # every position named
    assert fig.data[0].textfont.size >= 9 and fig.data[0].text[0][0] == "·the"  # each cell's token, readable
    laptop = V.lens_grid_figure(SimpleNamespace(result=r), V.LensSettings(), FigureStyle(), None).layout
    assert laptop.yaxis.title.text == "point of the residual stream" and layout.yaxis.title.text is None
