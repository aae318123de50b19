"""python -m attnviz render --page logit-lens: every number the Logit lens page draws in JSON (the reading, the
grid, the answer's chart, the opened step in parts), the grid as PNG and every figure as HTML, offline; the page's
own model and example where none is given; bad input (an encoder, a lens folder that does not fit the model, a
lens given by path, an answer of several tokens, a position out of range) in one line and exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

import attnviz
from attnviz.plots import export
from tests.support import hfmodels
from tests.support.clirun import run_cli, run_process

TEXT = "the cat sat on the mat because it"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lens-cli")
    folder = hfmodels.perturbed(root, "gpt2")[0]
    hfmodels.save(root, "bert")
    attnviz.train_lens(str(folder), steps=2, out=root / "lens" / "mine")
    small = attnviz.train_lens(str(folder), steps=1)
    small.config["d_model"] = 16  # as if tuned for a narrower model
    small.save(root / "lens" / "narrow")
    return root


def _cli(*args, cwd, env, process=False):
    code, _out, err = (run_process if process else run_cli)("render", "--page", "logit-lens", *args, cwd=cwd, env=env)
    return code, err


def _env(dirs) -> dict:
    return {"ATTNVIZ_MODEL_DIRS": str(dirs)}


def test_the_json_holds_every_number_the_page_draws(dirs, tmp_path):
    code, err = _cli("--model", "gpt2", "--text", TEXT, "--lens-answer", "was", "--lens-cell", "0.6", "--out",
                     "l.json", cwd=tmp_path, env=_env(dirs))
    assert code == 0, err
    rec = json.loads((tmp_path / "l.json").read_text(encoding="utf-8"))
    want = attnviz.logit_lens(str(dirs / "gpt2"), TEXT, answer="was")
    np.testing.assert_allclose(rec["lens"]["kl"], want.kl, atol=1e-6)
    np.testing.assert_allclose(rec["grid"]["values"], want.top_probs[:, :, 0], atol=1e-6)
    np.testing.assert_allclose(rec["answer_chart"]["probability"], want.answer_prob[:, 6], atol=1e-6)
    step = rec["step"]
    assert step["point"] == "layer 0 end" and step["previous"] == "layer 0 middle" and step["position"] == 6
    assert [p["kind"] for p in step["parts"]] == ["mlp"]
    assert step["step"] == pytest.approx(want.answer_logit[2, 6] - want.answer_logit[1, 6], abs=1e-4)
    assert rec["config"] | {"model": "gpt2", "text": TEXT, "mode": "final-scale", "cell": "0.6"} == rec["config"]
    assert set(rec["definitions"]) >= {"final-scale", "per-layer", "tuned", "numbers"}


def test_the_pages_own_model_and_example_and_a_tuned_lens(learned_defaults, dirs, tmp_path):
    env = {"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"]), **_env(dirs)}
    code, err = _cli("--out", "t.json", cwd=tmp_path, env=env)  # no flag: the page's first model, its example
    assert code == 0, err
    rec = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    pair = attnviz.example_pair("watch-it-learn")
    assert rec["config"]["model"] == "watch-it-learn" and rec["config"]["text"] == pair["clean"]
    assert (rec["config"]["answer"], rec["config"]["wrong"]) == (pair["answer"], pair["wrong"])
    assert rec["cell"]["position"] == len(pair["clean"].split()) - 1 and rec["step"]["step"] > 0  # the answer arrives
    code, err = _cli("--model", "gpt2", "--text", TEXT, "--lens-tuned", "mine", "--out", "m.json", cwd=tmp_path,
                     env=env)
    assert code == 0, err
    rec = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert rec["lens"]["mode"] == "tuned" and rec["step"] is None and "tuned lens" in rec["step_note"]


@pytest.mark.skipif(export.find_chromium() is None, reason=export.HOW_TO_GET_CHROMIUM)
def test_the_grid_as_png(dirs, tmp_path):
    code, err = _cli("--model", "gpt2", "--text", TEXT, "--out", "l.png", cwd=tmp_path, env=_env(dirs))
    assert code == 0, err
    assert (tmp_path / "l.png").read_bytes()[:4] == b"\x89PNG"


def test_every_figure_as_html_offline(dirs, tmp_path):
    code, err = _cli("--model", "gpt2", "--text", TEXT, "--lens-answer", "was", "--out", "l.html", cwd=tmp_path,
                     env=_env(dirs))
    assert code == 0, err
    html = (tmp_path / "l.html").read_text(encoding="utf-8")
    assert '<script src="http' not in html
    assert "top token at each point" in html and "point by point" in html and "the sum of these parts" in html


@pytest.mark.parametrize("args, says", [
    (["--model", "bert"], "Model bert is an encoder: it has no unembedding (no language-model head)"),
    (["--model", "gpt2", "--lens-tuned", "narrow"], "was tuned for a model of 2 layers and width 16; gpt2 has 2 "
                                                    "layers and width 32"),
    (["--model", "gpt2", "--lens-tuned", "../lens/mine"],
     'Setting lens_tuned="../lens/mine" is not a tuned lens this server offers (none, trained, mine, narrow).'),
    (["--model", "gpt2", "--lens-answer", "was tired"], "is not one token for gpt2"),
    (["--model", "gpt2", "--lens-cell", "1.99"], "Position 99 is out of range: the text has 8 tokens"),
])
def test_bad_input_is_one_line_and_exit_code_2(dirs, tmp_path, args, says):
    code, err = _cli(*args, "--text", TEXT, "--out", "x.json", cwd=tmp_path, env=_env(dirs))
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.json").exists()


def test_an_encoder_folder_by_path_as_a_process(dirs, tmp_path):
    code, err = _cli("--model", str(dirs / "bert"), "--text", TEXT, "--out", "x.json", cwd=tmp_path, env=_env(dirs),
                     process=True)
    assert code == 2 and "is an encoder: it has no unembedding" in err and len(err.strip().splitlines()) == 1, err
