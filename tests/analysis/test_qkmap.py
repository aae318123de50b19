"""The Q/K map: the corpus and its bounds, the normalisation, the projections, the
neighbourhood agreement against its baseline, the record, the CLI, the page."""

import json

import numpy as np
import pytest

import attnviz
from attnviz import AttentionConfig, limits
from attnviz.analysis import qkcorpus as QC
from attnviz.analysis import qkmap as Q
from attnviz.inputs.corpus import default_corpus
from attnviz.views import qkmap as V
from attnviz.views.state import ViewState, parse

# --- the numbers ----------------------------------------------------------------------


def test_normalisation_scales_to_one_mean_norm_then_makes_the_centroids_coincide():
    """The stated property on a toy input: after scaling (queries × c, keys ÷ c) the mean
    norms are equal; after the translation the key centroid is the query centroid; and every
    query's scores move by one constant, so its softmax row is the same."""
    rng = np.random.default_rng(1)
    q = rng.normal(3.0, 1.0, (30, 8))
    k = rng.normal(-2.0, 4.0, (40, 8))
    n = Q.scale_and_translate(q, k)
    assert np.allclose(n.queries.mean(0), n.keys.mean(0), atol=1e-12)  # the centroids coincide
    assert not np.allclose(q.mean(0), k.mean(0))  # they did not before
    scaled_q, scaled_k = q * n.scale, n.keys - n.shift  # before the translation
    assert np.allclose(scaled_k, k / n.scale)
    nq, nk = np.linalg.norm(scaled_q, axis=1).mean(), np.linalg.norm(scaled_k, axis=1).mean()
    assert abs(nq - nk) / nq < 1e-12  # one mean norm, from the origin
    assert abs(np.linalg.norm(q, axis=1).mean() - np.linalg.norm(k, axis=1).mean()) > 1.0  # not so before
    diff = n.queries @ n.keys.T - q @ k.T  # (30, 40)
    assert np.allclose(diff, diff[:, :1])  # a constant per query: softmax removes it
    record = Q.qk_map(q[:30], k[:30], [str(i) for i in range(30)], normalisation="attentionviz")
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
    crun = QC.cached_corpus_run(state.config, lines)
    assert (crun.best[:, 0] <= np.arange(n)).all() and (crun.best[crun.position == 0, 0] ==
                                                        np.flatnonzero(crun.position == 0)).all()


@pytest.mark.minilm
def test_minilm_layer0_head3_pca_agrees_above_its_baseline():
    """Head 3 of layer 0 looks at the previous token: its map puts most queries beside the key they
    attend to (about 63 % with the default normalisation, 50 % with AttentionViz's, against 27 % for
    random placement)."""
    rec = V.head_record(ViewState.of(model="minilm-l6", layer=0, head=3))
    assert rec["queries"] > 2000 and rec["method"] == "pca"
    assert rec["agreement"] > rec["baseline"] + 0.15
    assert rec["points"][0]["token"] == "[CLS]" and rec["points"][0]["token_kind"] == "special"


@pytest.mark.minilm
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

    monkeypatch.setattr(QC, "model_for", lambda config: WeightsOnly())
    with pytest.raises(ValueError, match="gives attention weights only"):
        QC.corpus_run(AttentionConfig(), ["a b c"])


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


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_causal_lms_queries_and_keys_are_those_its_scores_use(tmp_path, monkeypatch, name):
    """A transformers causal LM (LLaMA: rotary, grouped-query heads; GPT-2) maps its own q and k: softmax of
    q·k / √d under its causal mask is its own ``output_attentions`` at that layer, each query's most-attended key
    its argmax, sentence by sentence."""
    import torch

    from attnviz.models import registry
    from tests.support import longmodels

    folder = longmodels.save(tmp_path, name, 512)
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path))
    lines = ["the cat sat on the mat", "a dog ran"]
    crun = QC.corpus_run(AttentionConfig(model=name, layer=1), lines)
    model = registry.load(name)
    for i, line in enumerate(lines):
        ids = model.read_text([line]).ids[0].tolist()
        mine = crun.sentence == i
        assert int(mine.sum()) == len(ids) and list(crun.position[mine]) == list(range(len(ids)))
        want = longmodels.eager_weights(folder, ids)[1]  # (H, L, L)
        q, k = torch.from_numpy(crun.q[mine]), torch.from_numpy(crun.k[mine])  # (L, H, D)
        s = torch.einsum("ihd,jhd->hij", q, k).double() / q.shape[-1] ** 0.5
        s = s.masked_fill(torch.ones(len(ids), len(ids), dtype=torch.bool).triu(1), float("-inf"))
        assert np.abs(torch.softmax(s, -1).numpy() - want).max() < 1e-5
        offset = int(np.flatnonzero(mine)[0])
        assert (crun.best[mine] - offset == want.argmax(-1).T).all()
