"""python -m attnviz render --page qk-map: the record and the figure, offline; bad input in one line."""

import json

import pytest

from attnviz.analysis import qkmap as Q
from attnviz.views import qkmap as V
from attnviz.views.state import ViewState
from tests.support.clirun import run_cli, run_process


def _cli(*args, cwd, process=False):
    """(exit code, stderr) of ``render --page qk-map args``: in this process, or as one (``process``)."""
    code, _out, err = (run_process if process else run_cli)("render", "--page", "qk-map", *args, cwd=cwd)
    return code, err


@pytest.mark.minilm
def test_cli_writes_the_record_offline(tmp_path):
    code, err = _cli("--model", "minilm-l6", "--layer", "0", "--head", "3", "--out", "map.json", cwd=tmp_path)
    assert code == 0, err
    rec = json.loads((tmp_path / "map.json").read_text(encoding="utf-8"))
    assert rec["model"] == "minilm-l6" and rec["head"] == 3 and rec["k"] == Q.K_NEIGHBOURS
    assert rec["agreement"] > rec["baseline"]
    n = rec["queries"]
    assert [p["kind"] for p in rec["points"]] == ["query"] * n + ["key"] * n
    assert {"kind", "token", "sentence", "position", "x", "y"} <= set(rec["points"][0])


def test_cli_html_and_a_bad_head_offline(tmp_path):
    code, err = _cli("--qk-color", "kind", "--heads", "2", "--d-model", "16", "--out", "map.html", cwd=tmp_path)
    assert code == 0, err
    html = (tmp_path / "map.html").read_text(encoding="utf-8")
    assert "<script src=\"http" not in html and "diamond" in html
    code, err = _cli("--head", "9", "--out", "x.json", cwd=tmp_path, process=True)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Head 9 does not exist" in err
    assert "Traceback" not in err and not (tmp_path / "x.json").exists()
    code, err = _cli("--qk-method", "umap", "--out", "x.json", cwd=tmp_path)
    assert code == 2 and "qk_method" in err.replace("-", "_")
    code, err = _cli("--qk-norm", "cosine", "--out", "x.json", cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "qk_norm" in err.replace("-", "_")
    assert "Traceback" not in err and not (tmp_path / "x.json").exists()


@pytest.mark.minilm
def test_cli_record_says_when_the_map_does_not_follow_attention(tmp_path):
    """Layer 4 head 5 of MiniLM sends its queries to keys of large norm: AttentionViz's map puts
    those far away (agreement near 0 against a baseline of about 0.27), the reduction's near."""
    said = {}
    for norm in ("attentionviz", "mips"):
        code, err = _cli("--model", "minilm-l6", "--layer", "4", "--head", "5", "--qk-norm", norm,
                         "--out", f"{norm}.json", cwd=tmp_path)
        assert code == 0, err
        rec = json.loads((tmp_path / f"{norm}.json").read_text(encoding="utf-8"))
        assert rec["normalisation"]["name"] == norm and rec["head"] == 5 and rec["layer"] == 4
        below = rec["agreement"] - rec["baseline"] < Q.TRUST_MARGIN
        assert (rec["warning"] is not None) == below
        said[norm] = rec["warning"]
    assert said["attentionviz"] and f"{Q.TRUST_MARGIN * 100:.0f} points" in said["attentionviz"]
    assert said["mips"] is None


def test_tokens_and_sentences_are_escaped_in_the_figure():
    from attnviz.plots.qkmap import map_figure

    lines = ["<b>bold</b> and <a href='x'>link</a>", "plain words here"]
    rec = V.head_record(ViewState.of(heads=2, d_model=16), lines)
    fig = map_figure(rec, "kind")
    texts = [t for trace in fig.data for t in trace.text]
    assert texts and not any("<b>" in t or "<a " in t for t in texts)
    assert any("&lt;b&gt;" in t for t in texts)


def test_cli_opens_on_a_language_model_as_the_app_does_and_keeps_a_named_one(tmp_path, monkeypatch):
    """With a causal LM offered, ``render --page qk-map`` and a link that names no model render on it; a link or a
    flag naming the random layer keeps it."""
    from attnviz.models import registry
    from tests.support import longmodels

    longmodels.save(tmp_path, "llama", 512)
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path))
    runs = {"page alone": ("--page", "qk-map"), "link": ("--from-url", "http://localhost:8501/qk-map?head=1"),
            "link naming random": ("--from-url", "http://localhost:8501/qk-map?model=random&head=1"),
            "flag naming random": ("--page", "qk-map", "--model", "random")}
    models = {}
    for name, args in runs.items():
        code, _out, err = run_cli("render", *args, "--out", "m.json", cwd=tmp_path)
        assert code == 0, (name, err)
        models[name] = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))["model"]
    assert models == {"page alone": "llama", "link": "llama", "link naming random": "random",
                      "flag naming random": "random"}
