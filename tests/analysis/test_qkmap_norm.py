"""The Q/K map's two normalisations: the max-inner-product reduction keeps every query's order
of its keys as distance order (before any projection), AttentionViz's keeps its own properties
when chosen, and a map not above its random baseline by TRUST_MARGIN says so."""

import numpy as np
import pytest

import attnviz
from attnviz.analysis import qkmap as Q
from attnviz.i18n import use
from attnviz.views.state import ViewState, parse


def sink_case(seed: int = 0, n: int = 24, d: int = 6):
    """Keys of very different norms: key 0 is long (a [CLS]-like sink) and pointed away from
    the queries' mean, so it wins many dot products while lying far from the queries."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, d)) + np.array([2.0, 0, 0, 0, 0, 0])[:d]
    k = rng.normal(size=(n, d)) * 0.5
    k[0] = np.array([12.0, 0, 0, 0, 0, 3.0])[:d]
    return q, k


def test_mips_turns_each_querys_dot_product_order_into_distance_order():
    q, k = sink_case()
    norm = Q.mips_augment(q, k)
    M = np.linalg.norm(k, axis=1).max()
    assert norm.queries.shape == (24, 7) and norm.keys.shape == (24, 7)
    assert np.allclose(norm.queries[:, :6], q) and np.allclose(norm.keys[:, :6], k)  # the original coordinates kept
    assert np.allclose(norm.queries[:, 6], 0.0)
    assert np.allclose(np.linalg.norm(norm.keys, axis=1), M)  # every augmented key has the norm M
    dots = q @ k.T  # (24, 24)
    dist2 = ((norm.queries[:, None, :] - norm.keys[None, :, :]) ** 2).sum(-1)  # (24, 24)
    assert np.allclose(dist2, (q**2).sum(1)[:, None] + M**2 - 2 * dots)  # ‖q − k‖² = ‖q‖² + M² − 2 q·k
    for i in range(len(q)):  # the nearest key is the largest dot product, and so on down the list
        assert np.array_equal(np.argsort(dist2[i], kind="stable"), np.argsort(-dots[i], kind="stable"))
    # the case is one where that is not so without the reduction: the raw and AttentionViz's distances disagree
    av = Q.scale_and_translate(q, k)
    av_dist = ((av.queries[:, None, :] - av.keys[None, :, :]) ** 2).sum(-1)  # (24, 24)
    assert (dots.argmax(1) == 0).sum() > 12  # the sink wins most queries' dot product…
    assert (av_dist.argmin(1) != dots.argmax(1)).sum() > 6  # …but is not their nearest key there


def test_mips_on_a_key_set_of_equal_norms_adds_a_zero_coordinate():
    k = np.eye(4) * 3.0
    norm = Q.mips_augment(np.ones((4, 4)), k)
    assert np.allclose(norm.keys[:, 4], 0.0) and np.isfinite(norm.keys).all()


def test_the_record_names_the_normalisation_and_attentionviz_is_unchanged_when_chosen():
    q, k = sink_case(1)
    tokens = [f"t{i}" for i in range(24)]
    av = attnviz.qk_map(q, k, tokens, normalisation="attentionviz")
    mips = attnviz.qk_map(q, k, tokens, normalisation="mips")
    assert av["normalisation"]["name"] == "attentionviz" and mips["normalisation"]["name"] == "mips"
    assert av["normalisation"]["method"].startswith("queries × c, keys ÷ c")
    assert mips["normalisation"]["max_key_norm"] == pytest.approx(np.linalg.norm(k, axis=1).max())
    # AttentionViz's map is the projection of scale_and_translate's vectors, as before the choice existed
    n = Q.scale_and_translate(q, k)
    xy, _ = Q.pca_2d(np.concatenate([n.queries, n.keys]))
    assert np.allclose([[p["x"], p["y"]] for p in av["points"]], xy, atol=1e-5)
    assert av["normalisation"]["scale"] == pytest.approx(n.scale)
    # both keep every attention weight's argmax: the same most-attended keys, the same baseline
    assert av["baseline"] == mips["baseline"] and av["baseline_expected"] == mips["baseline_expected"]
    assert attnviz.qk_map(q, k, tokens)["normalisation"]["name"] == Q.DEFAULT_NORMALISATION
    with pytest.raises(ValueError, match="Unknown normalisation 'cosine'"):
        attnviz.qk_map(q, k, tokens, normalisation="cosine")


def test_on_the_sink_case_the_reductions_map_follows_attention_better():
    """Many sentences like the sink case: each query's most-attended key is mostly the long one.
    The reduction's PCA map puts it among the nearest keys far more often than AttentionViz's."""
    parts = [sink_case(s, n=12) for s in range(20)]
    q = np.concatenate([p[0] for p in parts])
    k = np.concatenate([p[1] for p in parts])
    sentences = np.repeat(np.arange(20), 12)
    tokens = [str(i) for i in range(len(q))]
    av = attnviz.qk_map(q, k, tokens, sentences=sentences, normalisation="attentionviz")
    mips = attnviz.qk_map(q, k, tokens, sentences=sentences, normalisation="mips")
    assert mips["agreement"] > av["agreement"] + 0.2
    assert mips["agreement"] > mips["baseline"] + Q.TRUST_MARGIN and mips["warning"] is None


def test_a_map_not_above_its_baseline_by_the_margin_says_so_in_one_line():
    def rec(a, b):
        return {"agreement": a, "baseline": b}

    assert Q.trust_warning(rec(0.40, 0.27)) is None
    assert Q.trust_warning(rec(0.27 + Q.TRUST_MARGIN, 0.27)) is None  # by exactly the margin: above it
    for a in (0.30, 0.27, 0.0):
        line = Q.trust_warning(rec(a, 0.27))
        assert line and "\n" not in line and f"{a:.1%}" in line and "27.0%" in line and "5 points" in line
    english = Q.trust_warning(rec(0.1, 0.27))
    with use("zh"):  # in the reader's language (the CLI's --lang, the page's)
        chinese = Q.trust_warning(rec(0.1, 0.27))
    assert chinese != english and "10.0%" in chinese and "27.0%" in chinese


def test_the_setting_is_declared_once_and_read_alike_by_link_and_state():
    assert ViewState().qk_map.qk_norm == Q.DEFAULT_NORMALISATION
    state, warnings = parse({"qk_norm": "attentionviz"})
    assert state.qk_map.qk_norm == "attentionviz" and not warnings
    state, warnings = parse({"qk_norm": "cosine"})
    assert state.qk_map.qk_norm == Q.DEFAULT_NORMALISATION and any("qk_norm" in w.text for w in warnings)
