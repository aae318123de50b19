"""The Q/K map: the corpus and its bounds, the normalisation, the projections, the
neighbourhood agreement against its baseline, the record, the CLI, the page."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import AttentionConfig, limits
from attnviz.analysis import qkmap as Q
from attnviz.inputs.corpus import default_corpus, read_corpus
from attnviz.models import registry as M
from attnviz.views import qkmap as V
from attnviz.views.state import ViewState, parse

from .apphelp import app, figures

ROOT = Path(__file__).resolve().parent.parent
INSTALLED = M._package_dir() is not None
needs_model = pytest.mark.skipif(not INSTALLED, reason=f"the model's files are not installed: {M.INSTALL}")


# --- the corpus ----------------------------------------------------------------------


def test_the_shipped_corpus_is_a_few_hundred_varied_sentences():
    lines = default_corpus()
    assert 200 <= len(lines) <= limits.MAX_CORPUS_LINES and len(set(lines)) == len(lines)
    cjk = [s for s in lines if any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af"
                                   for c in s)]
    assert len(cjk) >= 20
    repeated = [s for s in lines if any(n > 1 for n in
                                        np.unique([w.strip(",.!?").lower() for w in s.split()
                                                   if w.strip(",.!?").lower() not in ("the", "a", "and")],
                                                  return_counts=True)[1])]
    assert len(repeated) >= 20
    assert max(map(len, lines)) <= limits.MAX_CORPUS_LINE_CHARS


@pytest.mark.parametrize("text, words", [
    ("\n".join(["a b"] * (limits.MAX_CORPUS_LINES + 1)), f"the limit is {limits.MAX_CORPUS_LINES}"),
    ("x" * (limits.MAX_CORPUS_LINE_CHARS + 1), f"the limit is {limits.MAX_CORPUS_LINE_CHARS} per sentence"),
    ("   \n\n ", "empty"),
    ("é" * (limits.MAX_CORPUS_BYTES // 2 + 1), "KB"),
])
def test_corpus_bounds_are_refused_with_a_message(text, words):
    with pytest.raises(ValueError, match=words):
        read_corpus(text)


def test_an_upload_must_be_utf8_and_small():
    with pytest.raises(ValueError, match="not UTF-8"):
        read_corpus(b"\xff\xfe caf\xe9")
    with pytest.raises(ValueError, match="limit"):
        read_corpus(b"a\n" * (limits.MAX_CORPUS_BYTES // 2 + 1))
    assert read_corpus("  one\ttwo \n\n three ".encode()) == ["one two", "three"]


def test_a_corpus_over_the_token_bound_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "MAX_CORPUS_TOKENS", 50)
    with pytest.raises(ValueError, match="the limit is 50"):
        Q.corpus_run(AttentionConfig(), default_corpus()[:40])


# --- the numbers ----------------------------------------------------------------------


def test_normalisation_scales_to_one_mean_norm_then_makes_the_centroids_coincide():
    """The stated property on a toy input: after scaling (queries × c, keys ÷ c) the mean
    norms are equal; after the translation the key centroid is the query centroid; and every
    query's scores move by one constant, so its softmax row is the same."""
    rng = np.random.default_rng(1)
    q = rng.normal(3.0, 1.0, (30, 8))
    k = rng.normal(-2.0, 4.0, (40, 8))
    n = Q.normalise(q, k)
    assert np.allclose(n.queries.mean(0), n.keys.mean(0), atol=1e-12)  # the centroids coincide
    assert not np.allclose(q.mean(0), k.mean(0))  # they did not before
    scaled_q, scaled_k = q * n.scale, n.keys - n.shift  # before the translation
    assert np.allclose(scaled_k, k / n.scale)
    nq, nk = np.linalg.norm(scaled_q, axis=1).mean(), np.linalg.norm(scaled_k, axis=1).mean()
    assert abs(nq - nk) / nq < 1e-12  # one mean norm, from the origin
    assert abs(np.linalg.norm(q, axis=1).mean() - np.linalg.norm(k, axis=1).mean()) > 1.0  # not so before
    diff = n.queries @ n.keys.T - q @ k.T  # (30, 40)
    assert np.allclose(diff, diff[:, :1])  # a constant per query: softmax removes it
    record = Q.qk_map(q[:30], k[:30], [str(i) for i in range(30)])
    assert record["normalisation"]["method"].startswith("queries × c, keys ÷ c")


def test_pca_is_deterministic_and_exact():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 6)) * np.array([5, 3, 1, 0.5, 0.2, 0.1])
    a, ea = Q.pca_2d(x)
    b, eb = Q.pca_2d(x.copy())
    assert np.array_equal(a, b) and ea == eb
    # the two axes are the two largest-variance directions: their variances are the top eigenvalues
    cov = np.cov(x - x.mean(0), rowvar=False, bias=True)
    top = np.sort(np.linalg.eigvalsh(cov))[::-1][:2]
    assert np.allclose(a.var(0), top)
    # a sign flip of the input's axes gives the same map (the signs are fixed by the loadings)
    c, _ = Q.pca_2d(-x)
    assert np.allclose(np.abs(c), np.abs(a))


def test_tsne_is_seeded():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 5))
    assert np.array_equal(Q.tsne_2d(x, seed=4), Q.tsne_2d(x, seed=4))


def test_agreement_is_one_when_each_query_sits_on_its_key_and_the_baseline_is_chance():
    """A known case: each query's most-attended key is its own token, and the map puts them together."""
    rng = np.random.default_rng(5)
    sentence = np.repeat(np.arange(20), 10)  # 20 sentences of 10 tokens
    xy = rng.normal(size=(200, 2)) * 10
    best = np.arange(200)
    assert Q.agreement(xy, xy + 0.01, sentence, best, k=1) == 1.0
    # the key of another token of the sentence, far away: never the nearest
    far = np.where(np.arange(200) % 10 == 9, np.arange(200) - 9, np.arange(200) + 1)
    assert Q.agreement(xy, xy + 0.01, sentence, far, k=1) < 0.3
    base = Q.random_baseline(sentence, best, k=3, seed=0, draws=50)
    assert Q.expected_baseline(sentence, 3) == pytest.approx(0.3)
    assert base == pytest.approx(0.3, abs=0.03)


def test_qk_map_of_vectors_you_bring():
    """Queries equal to their keys, one sentence: the head attends to the token itself
    when the keys are far apart, and the map keeps that."""
    rng = np.random.default_rng(6)
    keys = rng.normal(size=(40, 16)) * 3
    queries = keys + rng.normal(size=(40, 16)) * 0.01
    tokens = [f"t{i}" for i in range(40)]
    sentences = np.repeat(np.arange(4), 10)
    rec = attnviz.qk_map(queries, keys, tokens, sentences=sentences)
    assert [p["kind"] for p in rec["points"]] == ["query"] * 40 + ["key"] * 40
    assert [p["token"] for p in rec["points"][:40]] == tokens and [p["token"] for p in rec["points"][40:]] == tokens
    assert [p["position"] for p in rec["points"][:12]] == [*range(10), 0, 1]
    assert rec["k"] == Q.K_NEIGHBOURS and rec["agreement"] > rec["baseline"]
    assert set(rec["points"][0]) == {"kind", "token", "token_kind", "sentence", "position", "x", "y"}
    json.dumps(rec)  # plain
    with pytest.raises(ValueError, match="one label per row"):
        attnviz.qk_map(queries, keys, tokens[:-1])
    with pytest.raises(ValueError, match="same shape"):
        attnviz.qk_map(queries, keys[:, :3], tokens)
    with pytest.raises(ValueError, match="finite"):
        attnviz.qk_map(np.full((40, 16), np.nan), keys, tokens)


def test_token_kinds():
    assert [Q.token_kind(t) for t in ("[CLS]", "cat", "##ing", ",", "。", "<s>", "?!", "猫")] == [
        "special", "word", "word", "punctuation", "punctuation", "special", "punctuation", "word"]


def test_the_random_models_record_holds_every_real_token_of_the_corpus():
    lines = default_corpus()[:30]
    state = ViewState.of(heads=4, d_model=32, mask="causal")
    rec = V.head_record(state, lines)
    n = rec["queries"]
    from attnviz.inputs.text import tokenize_lines

    seqs = tokenize_lines(lines, state.tokenize, state.config.max_tokens)
    assert n == sum(len(s) for s in seqs) and len(rec["points"]) == 2 * n
    assert [p["token"] for p in rec["points"][:len(seqs[0])]] == list(seqs[0])
    assert rec["sentences"] == lines and rec["head"] == 0 and rec["layer"] == 0
    # under a causal mask a query's most-attended key is never after it: token 0 attends to itself
    crun = Q.cached_corpus_run(state.config, lines)
    assert (crun.best[:, 0] <= np.arange(n)).all() and (crun.best[crun.position == 0, 0] ==
                                                        np.flatnonzero(crun.position == 0)).all()


@needs_model
def test_minilm_layer0_head3_pca_agrees_above_its_baseline():
    """Head 3 of layer 0 looks at the previous token: its map puts most queries beside the key they
    attend to (about 50 %, against 27 % for random placement). Head 0's PCA map is at its baseline."""
    rec = V.head_record(ViewState.of(model="minilm-l6", layer=0, head=3))
    assert rec["queries"] > 2000 and rec["method"] == "pca"
    assert rec["agreement"] > rec["baseline"] + 0.15
    assert rec["points"][0]["token"] == "[CLS]" and rec["points"][0]["token_kind"] == "special"


@needs_model
def test_minilm_overview_maps_every_head():
    records = V.overview_records(ViewState.of(model="minilm-l6", layer=0))
    assert len(records) == 12 and all(len(r["points"]) <= limits.QK_OVERVIEW_POINTS + 2 for r in records)
    assert len({round(r["agreement"], 6) for r in records}) > 6  # the heads differ


def test_a_weights_only_model_says_so(tmp_path, monkeypatch):
    class WeightsOnly:
        name, layers, heads, width, honours_masks = "gpt", 1, 2, 8, False

        def read_text(self, lines, **kw):
            from attnviz.inputs.text import text_input, tokenize_lines

            return text_input(tokenize_lines(lines, "auto", 64), d_model=8, positional=True, pad_to=0)

        def plan(self, N, L, S):
            return "full"

        def forward(self, inp, source, mask, **kw):
            import torch

            from attnviz.core.attention import AttentionSteps
            from attnviz.core.multihead import MultiHeadSteps
            from attnviz.models.base import ModelRun

            N, L = len(inp.tokens), inp.L
            w = torch.full((N, 2, L, L), 1.0 / L)
            att = AttentionSteps(None, None, None, w, w, torch.zeros(N, 2, L, 0), 1.0, None)
            z = torch.zeros(N, 2, L, 0)
            return ModelRun(MultiHeadSteps(z, z, z, att, torch.zeros(N, L, 0), torch.zeros(N, L, 0)), None,
                            torch.zeros(N, L, 0), w[None])

    import attnviz.run.run as R

    monkeypatch.setattr(R, "model_for", lambda config: WeightsOnly())
    with pytest.raises(ValueError, match="gives attention weights only"):
        Q.corpus_run(AttentionConfig(), ["a b c"])


def test_the_explorer_link_of_a_point_opens_its_sentence_at_that_head_and_query():
    lines = ["the cat sat", "dog eats dog again"]
    state = ViewState.of(heads=2, d_model=16, head=1)
    rec = V.head_record(state, lines)
    i = rec["queries"] + 5  # a key: the second sentence's third token
    p = rec["points"][i]
    assert (p["kind"], p["sentence"], p["position"]) == ("key", 1, 2)
    opened, warnings = parse(dict(__import__("urllib.parse").parse.parse_qsl(
        V.explorer_link(rec, i, state).split("?", 1)[1])))
    assert not warnings
    assert (opened.text, opened.head, opened.query, opened.view, opened.seq) == ("dog eats dog again", 1, 2, "head", 0)


# --- the CLI -------------------------------------------------------------------------


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "attnviz", "render", "--page", "qk-map", *args], capture_output=True,
                       text=True, cwd=cwd, timeout=300, env=env)
    return p.returncode, p.stderr


@needs_model
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
    code, err = _cli("--head", "9", "--out", "x.json", cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Head 9 does not exist" in err
    assert "Traceback" not in err and not (tmp_path / "x.json").exists()
    code, err = _cli("--qk-method", "umap", "--out", "x.json", cwd=tmp_path)
    assert code == 2 and "qk_method" in err.replace("-", "_")


def test_tokens_and_sentences_are_escaped_in_the_figure():
    from attnviz.plots.qkmap import map_figure

    lines = ["<b>bold</b> and <a href='x'>link</a>", "plain words here"]
    rec = V.head_record(ViewState.of(heads=2, d_model=16), lines)
    fig = map_figure(rec, "kind")
    texts = [t for trace in fig.data for t in trace.text]
    assert texts and not any("<b>" in t or "<a " in t for t in texts)
    assert any("&lt;b&gt;" in t for t in texts)


# --- the page ------------------------------------------------------------------------


@needs_model
@pytest.mark.parametrize("lang, title", [("en", "Q/K map"), ("zh", "Q/K 映射图")])
def test_page_draws_minilm_head0_and_a_click_opens_the_explorer(lang, title):
    at = app(f"model=minilm-l6&layer=0&lang={lang}", page="app_pages/qk_map.py")
    assert not at.exception and not at.error
    assert at.markdown[0].value.startswith(f"# {title}")
    figs = figures(at)
    assert len(figs) == 1 and {t["marker"]["symbol"] for t in figs[0]["data"]} == {"circle", "diamond"}
    said = " ".join(m.value for m in at.markdown)
    assert "k = 3" in said and ("%" in said)
    rec = V.head_record(ViewState.of(model="minilm-l6"))
    assert f"{rec['agreement']:.1%}" in said and f"{rec['baseline']:.1%}" in said
    # a click on a point leaves its index for the next run (ui.picks.open_point): the explorer opens
    i = rec["queries"] + 7
    at.session_state["_attnviz_open_point"] = i
    at.run()
    p = rec["points"][i]
    assert at.session_state["text"] == rec["sentences"][p["sentence"]]
    assert (at.session_state["head"], at.session_state["query"], at.session_state["view"]) == (0, p["position"], "head")
    assert not at.exception and not at.markdown[0].value.startswith(f"# {title}")  # the explorer's own title
    assert len(figures(at)) >= 1


def test_page_overview_on_the_random_model_and_own_lines():
    at = app("heads=4&d_model=32&qk_part=overview", page="app_pages/qk_map.py")
    for job in list(V._JOBS.values()):
        job.done.wait(60)
    at.run()
    assert not at.exception and not at.error
    fig = figures(at)[0]
    assert sum("head " in a["text"] for a in fig["layout"]["annotations"]) == 4
    at.segmented_control(key="qk_source").set_value("own").run()
    at.text_area(key="qk_lines").input("\n".join(["a b c"] * (limits.MAX_CORPUS_LINES + 1))).run()
    assert at.error and f"the limit is {limits.MAX_CORPUS_LINES}" in at.error[0].value


def test_the_overview_is_computed_once_for_everyone_who_asks(monkeypatch):
    calls = []
    real = V.overview_records

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(V, "overview_records", counted)
    state = ViewState.of(heads=2, d_model=16, seed=11)
    lines = ["the cat sat on the mat", "dog eats dog", "猫看见了另一只猫。"]
    jobs = [V.overview_in_background(state, lines) for _ in range(5)]
    assert all(j is jobs[0] for j in jobs)
    assert jobs[0].done.wait(60) and not jobs[0].error
    assert V.overview_in_background(state, lines) is jobs[0] and len(calls) == 1
    assert len(jobs[0].records) == 2 and jobs[0].fraction == 1.0


def test_page_maps_your_own_lines():
    at = app("heads=2&d_model=16", page="app_pages/qk_map.py")
    at.segmented_control(key="qk_source").set_value("own").run()
    lines = ["the cat saw the other cat", "猫看见了另一只猫。", "again and again"]
    at.text_area(key="qk_lines").input("\n".join(lines)).run()
    assert not at.exception and not at.error
    assert any("3 sentences" in c.value for c in at.caption)
    fig = figures(at)[0]
    assert sum(len(t["text"]) for t in fig["data"]) == 2 * V.head_record(ViewState.of(heads=2, d_model=16),
                                                                          lines)["queries"]
