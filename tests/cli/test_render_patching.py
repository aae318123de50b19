"""python -m attnviz render --page patching: every number the page draws, a figure, offline; bad
input (prompts of different lengths, an answer that is not one token, an encoder) in one line."""

import json

import numpy as np
import pytest

import attnviz
from tests.support import hfmodels
from tests.support.clirun import run_cli, run_process

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"


def _cli(*args, cwd, env=None, process=False):
    """(exit code, stderr) of ``render --page patching args``: in this process, or as one (``process``)."""
    code, _out, err = (run_process if process else run_cli)("render", "--page", "patching", *args, cwd=cwd, env=env)
    return code, err


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-patching")
    return {kind: hfmodels.save(root, kind)[0] for kind in ("gpt2", "bert")}


def test_the_json_holds_every_number_the_page_draws(folders, tmp_path):
    code, err = _cli("--model", str(folders["gpt2"]), "--clean", CLEAN, "--corrupted", CORRUPTED, "--answer", "it",
                     "--wrong", "was", "--patched", "1.2", "--out", "p.json", cwd=tmp_path)
    assert code == 0, err
    rec = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    want = attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CORRUPTED, answer="it", wrong="was")
    p = rec["patching"]
    np.testing.assert_allclose(p["heads"], want.heads, atol=1e-6)
    np.testing.assert_allclose(p["heads_normalised"], want.normalised(want.heads), atol=1e-5)
    assert np.asarray(p["residual"]).shape == (2, 6) and p["differ"] == [1, 5]
    assert rec["config"] == {"model": str(folders["gpt2"]), "clean": CLEAN, "corrupted": CORRUPTED, "answer": "it",
                             "wrong": "was"}
    assert (rec["head"]["layer"], rec["head"]["head"]) == (1, 2)
    assert np.asarray(rec["head"]["difference"]).shape == (6, 6)
    a = rec["logit_attribution"]
    assert np.asarray(a["heads"]).shape == (2, 4)
    assert a["sum_of_parts"] == pytest.approx(a["logit_difference"], abs=1e-4)
    assert "(patched − corrupted) / (clean − corrupted)" in rec["definition"]


def test_a_figure_and_a_page(folders, tmp_path):
    code, err = _cli("--model", str(folders["gpt2"]), "--clean", CLEAN, "--corrupted", CORRUPTED, "--answer", "it",
                     "--wrong", "", "--out", "p.html", cwd=tmp_path)
    assert code == 0, err
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "share brought back" in html and "<script src=\"http" not in html


@pytest.mark.parametrize("args, words", [
    (("--corrupted", "the mat sat on the"), "The clean prompt has 6 tokens and the corrupted one 5"),
    (("--answer", "cat sat"), "is not one token"),
])
def test_bad_input_exits_2_with_one_line(folders, tmp_path, args, words):
    base = {"--model": str(folders["gpt2"]), "--clean": CLEAN, "--corrupted": CORRUPTED, "--answer": "it",
            "--out": "p.json"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    code, err = _cli(*[x for kv in base.items() for x in kv], cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert "Traceback" not in err and not list(tmp_path.glob("p.*"))


def test_a_prompt_over_patchings_bound_is_refused_in_one_line(tmp_path):
    from attnviz import limits

    folder = hfmodels.reading(hfmodels.save(tmp_path, "llama")[0], 4 * limits.MAX_PATCH_TOKENS)
    words = "the " * limits.MAX_PATCH_TOKENS
    code, err = _cli("--model", str(folder), "--answer", "it", "--clean", words + "cat", "--corrupted", words + "mat",
                     "--out", "p.json", cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"has {limits.MAX_PATCH_TOKENS + 1} tokens; patching takes at most {limits.MAX_PATCH_TOKENS}" in err, err


def test_an_encoder_is_refused_in_one_line(folders, tmp_path):
    code, err = _cli("--model", str(folders["bert"]), "--answer", "it", "--clean", CLEAN, "--corrupted", CORRUPTED,
                     "--out", "p.json", cwd=tmp_path, process=True)  # once as a process of its own
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no next token to patch toward" in err, err


def test_the_trained_model_by_default(learned_defaults, tmp_path):
    code, err = _cli("--model", "watch-it-learn", "--out", "p.json", cwd=tmp_path,
                     env={"ATTNVIZ_LEARN_DIR": str(learned_defaults["dir"])})
    assert code == 0, err
    rec = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert rec["config"]["model"] == "watch-it-learn" and (rec["head"]["layer"], rec["head"]["head"]) == (1, 0)
