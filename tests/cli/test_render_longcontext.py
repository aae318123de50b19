"""python -m attnviz render --page long-context: every number the view draws as JSON, the figures
offline, and bad input (no file, not text, empty, over the bounds, a policy's bad ratio, an encoder)
as one line and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnviz import limits
from attnviz.analysis.longcontext import long_attention
from attnviz.cli import main
from attnviz.models.hub import HF_CACHE_ENV
from attnviz.plots.longcontext import multiples_side
from attnviz.views import longcontext as V
from tests.support import fakehub, hfmodels, longmodels

ROOT = Path(__file__).resolve().parents[2]
TEXT = "the cat sat on the mat because it was tired " * 12  # 120 words


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-long")
    return {"llama": longmodels.save(root / "llama", "llama", 4096),
            "roberta": hfmodels.save(root, "roberta")[0]}


def _text(tmp_path, content: str | bytes = TEXT, name="doc.txt") -> Path:
    p = tmp_path / name
    p.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return p


def test_json_holds_every_number_the_view_draws(folders, tmp_path):
    out = tmp_path / "long.json"
    code = main(["render", "--page", "long-context", "--model", str(folders["llama"]), "--text-file",
                 str(_text(tmp_path)), "--long-blocks", "12", "--long-policy", "snapkv", "--long-ratio", "0.5",
                 "--out", str(out)])
    assert code == 0
    rec = json.loads(out.read_text())
    N = len(rec["tokens"])
    assert N == 120 and (rec["layers"], rec["heads"]) == (2, 4)
    # every head's small multiple; the chosen head's (layer 0, head 0) overviews and received attention in full
    assert np.asarray(rec["small_multiples"]).shape[:2] == (2, 4) and np.asarray(rec["overview"]).shape == (12, 12)
    assert np.asarray(rec["received"]).shape == (N,) and np.isclose(np.sum(rec["received"]), N, rtol=1e-5)
    assert set(np.asarray(rec["labels"]).ravel()) <= {"sink", "local", "far"}
    pol = rec["policy"]
    assert pol["name"] == "snapkv" and pol["n_kept"] == 60 and len(pol["kept"]) == 2 and len(pol["kept"][0]) == 2
    assert pol["kl"] >= 0 and np.asarray(pol["lost"]).shape == (2, 4)
    assert set(rec["definitions"]) == {"overview", "overview_mean", "received", "sink", "distance", "entropy"}


def test_html_has_the_figures_offline(tmp_path):
    out = tmp_path / "long.html"
    assert main(["render", "--page", "long-context", "--text-file", str(_text(tmp_path)), "--out", str(out)]) == 0
    html = out.read_text()
    assert '<script src="http' not in html  # plotly.js inline: offline
    assert html.count('class="plotly-graph-div"') == 4  # small multiples, the head, its close-up, the policy's strip


def test_the_module_runs_as_a_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "attnviz", "render", "--page", "long-context", "--text-file",
                        str(_text(tmp_path)), "--out", str(tmp_path / "x.json")], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "x.json").read_text())["model"] == "random"


@pytest.fixture()
def hub_home(folders, tmp_path, monkeypatch):
    """The llama folder in a local hub cache as tiny-org/tiny-llama, named by HF_HOME (HF_HUB_CACHE would win
    over it), with cache names allowed: what the API finds it by."""
    home = tmp_path / "hf-home"
    fakehub.cache(home, "tiny-org/tiny-llama", folders["llama"])
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(HF_CACHE_ENV, raising=False)
    return home


def test_a_hugging_face_id_in_the_local_cache_renders_as_the_api_reads_it(hub_home, tmp_path):
    out = tmp_path / "cached.json"
    p = subprocess.run([sys.executable, "-m", "attnviz", "render", "--page", "long-context", "--model",
                        "tiny-org/tiny-llama", "--text-file", str(_text(tmp_path)), "--long-blocks", "6",
                        "--out", str(out)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert p.returncode == 0, p.stderr
    rec = json.loads(out.read_text())
    api = long_attention("tiny-org/tiny-llama", TEXT, blocks=6)
    assert rec["model"] == api.model == "tiny-org/tiny-llama"
    assert np.allclose(np.asarray(rec["overview"]), api.overview[0, 0], rtol=1e-5)
    assert np.allclose(np.asarray(rec["overview_mean"]), api.overview_mean[0, 0], rtol=1e-5)


@pytest.mark.parametrize("model,cache_names,words", [
    ("tiny-org/not-cached", None, "no model tiny-org/not-cached is in the local Hugging Face cache"),
    ("tiny-org/tiny-llama", "0", "Model folder tiny-org/tiny-llama does not exist"),  # a server's setting
    ("no-such-model", None, "Model folder no-such-model does not exist (the models named here: random"),
])
def test_a_model_that_is_no_folder_here_is_one_line_and_exit_2(hub_home, tmp_path, capsys, monkeypatch, model,
                                                               cache_names, words):
    if cache_names is not None:
        monkeypatch.setenv(HF_CACHE_ENV, cache_names)
    code = main(["render", "--page", "long-context", "--model", model, "--text-file", str(_text(tmp_path)),
                 "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("make,extra,words", [
    (lambda t: t / "missing.txt", [], "no such file"),
    (lambda t: _text(t, b"\x89PNG\r\n\x1a\n\x00\x00", "img.txt"), [], "not a text file"),
    (lambda t: _text(t, b"\xff\xfe\xfa", "bad.txt"), [], "not UTF-8 text"),
    (lambda t: _text(t, "   \n"), [], "empty"),
    (lambda t: _text(t, "a" * (limits.MAX_LONG_TEXT_BYTES + 1)), [], "MAX_LONG_TEXT_BYTES"),
    (lambda t: _text(t), ["--long-ratio", "1.0"], "long_ratio"),
    (lambda t: _text(t), ["--long-policy", "h2o"], "long_policy"),
    (lambda t: _text(t), ["--long-blocks", "0"], "long_blocks"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, make, extra, words):
    code = main(["render", "--page", "long-context", "--text-file", str(make(tmp_path)), *extra,
                 "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err


def test_over_the_models_positions_and_an_encoders_policy(folders, tmp_path, capsys):
    words = " ".join(["the cat"] * 2100)  # 4,200 tokens against 4,096 positions
    code = main(["render", "--page", "long-context", "--model", str(folders["llama"]), "--text-file",
                 str(_text(tmp_path, words)), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and "4,096 positions" in err and "MAX_MODEL_LONG_TOKENS" in err, err
    out = tmp_path / "enc.json"
    assert main(["render", "--page", "long-context", "--model", str(folders["roberta"]), "--text-file",
                 str(_text(tmp_path, "the cat sat on the mat")), "--long-blocks", "4", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert not rec["causal"] and "policy" not in rec and any("no cache to evict" in n for n in rec["notes"])
    # No text given: the page's default, the first shipped text, as a link without long_text opens it.
    assert main(["render", "--page", "long-context", "--long-blocks", "8", "--out", str(out)]) == 0
    tokens, first_word = json.loads(out.read_text())["tokens"], V.long_text(V.LONG_TEXTS[0]).split()[0]
    assert "".join(tokens[:len(first_word)]).startswith(first_word)  # the random layer splits off punctuation


def test_a_shipped_text_by_name_and_an_own_text_without_its_file(tmp_path, capsys):
    out = tmp_path / "shipped.json"
    assert main(["render", "--page", "long-context", "--long-text", "constitution", "--long-blocks", "8",
                 "--long-ratio", "0.25", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["tokens"][:2] == V.long_text("constitution").split()[:2]  # the random layer reads its words
    assert rec["policy"]["ratio"] == 0.25 and len(rec["tokens"]) > 1000
    for own in ("paste", "upload"):
        assert main(["render", "--page", "long-context", "--long-text", own, "--out", str(tmp_path / "o.json")]) == 2
        assert "--text-file" in capsys.readouterr().err


@pytest.mark.parametrize("corner", [None, (30, 5)])
def test_json_holds_the_close_up_at_the_settings_corner(folders, tmp_path, corner):
    out = tmp_path / "long.json"
    flags = [] if corner is None else ["--long-q0", str(corner[0]), "--long-k0", str(corner[1])]
    assert main(["render", "--page", "long-context", "--model", str(folders["llama"]), "--text-file",
                 str(_text(tmp_path)), "--long-blocks", "12", "--long-head", "3", *flags, "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    N, size = len(rec["tokens"]), V.CLOSE_UP
    q0, k0 = (N - size, 0) if corner is None else corner  # by default the last queries on the first keys
    close = rec["close_up"]
    w = np.asarray(close["weights"])
    assert (close["q0"], close["k0"]) == (q0, k0) and w.shape == (min(size, N - q0), min(size, N - k0))
    rows, cols = np.meshgrid(np.arange(w.shape[0]) + q0, np.arange(w.shape[1]) + k0, indexing="ij")
    assert np.all(w[cols > rows] == 0) and np.all(w[cols <= rows] > 0)  # causal: no key after its query
    assert np.all(w.sum(-1) <= 1 + 1e-5)  # a window holds part of each row, whose whole sums to 1


def test_the_record_holds_the_chosen_head_in_full_and_every_head_pooled(folders, tmp_path):
    """The JSON grows with the heads' small multiples, not with layers × heads × blocks²: the chosen head's
    overviews at full resolution are the API's for that head."""
    out = tmp_path / "head.json"
    assert main(["render", "--page", "long-context", "--model", str(folders["llama"]), "--text-file",
                 str(_text(tmp_path)), "--long-blocks", "24", "--long-layer", "1", "--long-head", "2",
                 "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    api = long_attention(str(folders["llama"]), TEXT, blocks=24)
    assert rec["chosen"] == {"layer": 1, "head": 2}
    assert np.allclose(np.asarray(rec["overview"]), api.overview[1, 2], rtol=1e-5)
    assert np.allclose(np.asarray(rec["received"]), api.received[1, 2], rtol=1e-5)
    side = multiples_side(2, 4, 24)  # bounded by the cells of every head together, not by the blocks
    assert np.asarray(rec["small_multiples"]).shape == (2, 4, side, side)
    assert multiples_side(30, 9, 24) < 24  # a 30-layer model's multiples are pooled coarser
