"""attnviz.notebook: normalising attention from anywhere, the views, the BertViz and
CircuitsVis entry points, offline HTML, and attention files (never pickle)."""

from __future__ import annotations

import io
import json
import re
import struct
import sys
import types
import warnings
import zipfile

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from attnviz import limits
from attnviz import notebook as nb
from attnviz.analysis.heads import rollout
from attnviz.notebook import files
from attnviz.plots import DIVERGING, FigureStyle, colorscale, plain_label

from .apphelp import z  # figures decoded as a browser gets them (base64 "bdata")

LAYERS, H, L = 2, 3, 4
TOKENS = ["the", "cat", "sat", "down"]


def weights(layers=LAYERS, heads=H, q=L, k=L, seed=0) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(layers, heads, q, k, generator=g), -1).numpy()  # (layers, H, L, S)


W = weights()


def as_dict(fig: go.Figure) -> dict:
    assert isinstance(fig, go.Figure)
    return json.loads(fig.to_json())


def blocks_of(trace: dict) -> list[dict]:
    """A grid trace split back into its blocks, found through the block index (customdata)."""
    zz, head = z(trace), z({"z": trace["customdata"]}).astype(int)
    out = []
    for i in range(int(head.max()) + 1):
        rows, cols = np.nonzero(head == i)
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        out.append({"z": zz[r0:r1, c0:c1], "x": trace["x"][c0:c1], "y": trace["y"][r0:r1], "r0": r0, "c0": c0})
    return out


def script_tags(html: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>", html, flags=re.I)


def assert_offline(html: str) -> None:
    from plotly.offline import get_plotlyjs

    tags = script_tags(html)
    assert tags and not [t for t in tags if re.search(r"\bsrc\s*=|cdn|require|http", t, flags=re.I)]
    assert get_plotlyjs()[:2000] in html


def div_ids(html: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', html)


# -- normalise ---------------------------------------------------------------------------

def containers():
    t = torch.from_numpy(W)
    batch = np.stack([W, weights(seed=1)], axis=1)  # (layers, N=2, H, L, S), as torch.stack(outputs.attentions)
    return {
        "numpy 4-d": (W, 1), "torch 4-d": (t, 1), "list 4-d": (W.tolist(), 1),
        "torch float64": (t.double(), 1),
        "numpy 5-d": (batch, 2), "torch 5-d": (torch.from_numpy(batch), 2), "list 5-d": (batch.tolist(), 2),
        "tuple of torch (1, H, L, S)": (tuple(t[i].unsqueeze(0) for i in range(LAYERS)), 1),
        "list of numpy (N, H, L, S)": ([batch[i] for i in range(LAYERS)], 2),
        "tuple of torch (H, L, S)": (tuple(t[i] for i in range(LAYERS)), 1),
        "list of numpy (L, S) per head, per layer": ([[W[i, h] for h in range(H)] for i in range(LAYERS)], 1),
    }


@pytest.mark.parametrize("kind", list(containers()))
def test_every_shape_and_container_normalises_to_the_same_weights(kind):
    value, batch = containers()[kind]
    a = nb.normalise(value, TOKENS)
    assert a.weights.dtype == np.float32 and a.weights.shape == (LAYERS, H, L, L)
    np.testing.assert_array_equal(a.weights, W)
    assert a.batch == batch and a.tokens == TOKENS and a.source_tokens == TOKENS and a.normalised


def test_two_and_three_dimensions_are_one_layer_and_one_head():
    np.testing.assert_array_equal(nb.normalise(W[0, 1]).weights, W[:1, 1:2])  # (L, S)
    np.testing.assert_array_equal(nb.normalise(torch.from_numpy(W[1])).weights, W[1:])  # (H, L, S)
    assert nb.normalise(W[0, 0]).tokens == ["0", "1", "2", "3"]


def test_the_record_is_a_copy_and_cross_attention_keeps_its_key_tokens():
    mine = W.copy()
    a = nb.normalise(mine, TOKENS)
    mine[:] = 0
    np.testing.assert_array_equal(a.weights, W)
    c = nb.normalise(weights(q=2, k=3), ["a", "b"], source_tokens=["x", "y", "z"])
    assert (c.L, c.S, c.tokens, c.source_tokens, c.is_self) == (2, 3, ["a", "b"], ["x", "y", "z"], False)


def bad_inputs():
    t = torch.from_numpy(W)
    ragged = (t[0].unsqueeze(0), torch.softmax(torch.randn(1, H, 5, 5), -1))
    nan, inf, neg = W.copy(), W.copy(), W.copy()
    nan[1, 2, 3, 0] = np.nan
    inf[0, 1, 0, 0] = np.inf
    neg[0, 0, 1, 2] = -0.25
    return {
        "tokens length": ((W, TOKENS[:3]), r"3 tokens do not match the attention's L \(queries\) = 4"),
        "source tokens length": ((weights(q=2, k=3), ["a", "b"], ["x"]),
                                 r"1 source_tokens do not match .*S \(keys\) = 3"),
        "keys without tokens": ((weights(q=2, k=3), ["a", "b"]), "pass source_tokens"),
        "tokens a string": ((W, "the cat sat down"), "list of strings"),
        "ragged layers": ((ragged,), r"ragged: layer 0 has shape \(1, 3, 4, 4\) but layer 1 has \(1, 3, 5, 5\)"),
        "ragged lists": (([[0.5, 0.5], [1.0]],), "ragged"),
        "NaN": ((nan,), r"contains NaN .*layer 1, head 2, query 3, key 0"),
        "inf": ((inf,), r"contains inf .*layer 0, head 1, query 0, key 0"),
        "negative": ((neg,), r"negative weights .*signed=True"),
        "one dimension": ((W[0, 0, 0],), r"1 dimensions .*expected 2 to 5"),
        "six dimensions": ((W[None, None],), r"6 dimensions"),
        "per-layer 5-d": ((tuple(t[None, None]),), r"each layer must be \(N, H, L, S\)"),
        "not numbers": (([["a", "b"], ["c", "d"]],), "must hold numbers"),
        "a bool mask": ((torch.ones(4, 4, dtype=torch.bool),), "real numbers"),
        "empty": ((np.zeros((0, 4)),), "empty"),
    }


@pytest.mark.parametrize("case", list(bad_inputs()))
def test_each_bad_input_says_what_is_wrong(case):
    args, message = bad_inputs()[case]
    with pytest.raises(ValueError, match=message):
        nb.normalise(*args[:2], **({"source_tokens": args[2]} if len(args) > 2 else {}))


def test_signed_values_are_allowed_when_asked_for_and_never_warn():
    neg = W - 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = nb.normalise(neg, TOKENS, signed=True)
    assert a.signed and not a.normalised
    np.testing.assert_allclose(a.weights, neg)


def test_sizes_over_the_bounds_are_refused_from_the_shape(monkeypatch):
    monkeypatch.setattr(limits, "MAX_TOKENS", 3)
    with pytest.raises(ValueError, match=r"4 tokens along L \(queries\), over the bound of 3 tokens"):
        nb.normalise(W)
    with pytest.raises(ValueError, match=r"4 tokens along S \(keys\)"):
        nb.normalise(weights(q=2, k=4))
    monkeypatch.setattr(limits, "MAX_TOKENS", 2048)
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "1")
    huge = torch.zeros(1).expand(64, 16, 64, 64)  # 16 MB as float32, but never allocated: a view of one number
    with pytest.raises(ValueError, match=r"\(64, 16, 64, 64\) needs 16.0 MB as float32, over the memory budget of 1.0"):
        nb.normalise(huge)
    with pytest.raises(ValueError, match="over the memory budget"):
        nb.normalise(tuple(huge[i].unsqueeze(0) for i in range(64)))


def test_rows_that_do_not_sum_to_one_warn_and_fully_masked_rows_do_not():
    with pytest.warns(UserWarning, match=r"rows do not sum to 1 \(layer 0, head 0, query 0 sums to 0.5\).*dropout"):
        a = nb.normalise(W * 0.5, TOKENS)
    assert not a.normalised
    masked = W.copy()
    masked[:, :, 2] = 0.0  # a query that may see no key: all-zero weights, a defined case
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nb.normalise(masked, TOKENS).normalised


# -- show --------------------------------------------------------------------------------

def test_the_grid_shows_every_head_of_the_layer_with_escaped_tokens():
    tokens = ["<b>x</b>", "cat", "cat", "a&b"]
    fig = as_dict(nb.show(W, tokens, "grid", layer=1))
    (trace,) = [t for t in fig["data"] if t["type"] == "heatmap"]
    got = blocks_of(trace)
    assert len(got) == H
    for h, b in enumerate(got):
        np.testing.assert_array_equal(b["z"], W[1, h])
        assert [plain_label(s) for s in b["y"]] == ["&lt;b&gt;x&lt;/b&gt;", "cat", "cat", "a&amp;b"]
    assert fig["layout"]["coloraxis"]["colorscale"] == colorscale(FigureStyle().colors)
    assert "layer 1" in fig["layout"]["title"]["text"]


def test_the_head_model_and_query_views_show_the_input():
    head = as_dict(nb.show(W, TOKENS, "head", layer=1, head=2))
    np.testing.assert_array_equal(z(head["data"][0]), W[1, 2])
    model = as_dict(nb.show(W, TOKENS, "model"))
    rows = [t for t in model["data"] if t["type"] == "heatmap"]  # a trace per layer, its blocks numbered by head
    assert len(rows) == LAYERS and [t["hovertemplate"].split(" · ")[0] for t in rows] == [
        f"L{layer}" for layer in range(LAYERS)]
    for layer, trace in enumerate(rows):
        got = blocks_of(trace)
        assert len(got) == H
        for h, b in enumerate(got):
            np.testing.assert_array_equal(b["z"], W[layer, h])
    query = as_dict(nb.show(W, TOKENS, "query", layer=1))  # query=-1: the last
    assert len(query["data"]) == H
    for h, t in enumerate(query["data"]):
        np.testing.assert_allclose(z({"z": t["y"]}), W[1, h, L - 1], rtol=1e-6)


def test_the_analysis_view_and_table_measure_known_heads():
    known = np.stack([np.full((1, L, L), 1 / L), np.eye(L)[None]]).astype(np.float32)  # (layers=2, H=1, L, L)
    rows = nb.head_table(known, TOKENS)
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (1, 0)]
    assert rows[0]["entropy"] == pytest.approx(np.log(L)) and rows[1]["entropy"] == pytest.approx(0.0, abs=1e-9)
    assert rows[1]["distance"] == pytest.approx(0.0) and rows[1]["self"] == pytest.approx(1.0)
    fig = as_dict(nb.show(known, TOKENS, "analysis"))
    entropy, distance = (z(t) for t in fig["data"])
    np.testing.assert_allclose(entropy[:, 0], [np.log(L), 0.0], atol=1e-6)
    np.testing.assert_allclose(distance[:, 0], [rows[0]["distance"], 0.0], atol=1e-6)
    cross = nb.head_table(weights(q=2, k=3), ["a", "b"], source_tokens=["x", "y", "z"])
    assert len(cross) == LAYERS * H and set(cross[0]) == {"layer", "head", "entropy", "distance"}


def test_the_rollout_view_is_the_analysis_rollout():
    fig = as_dict(nb.show(W, TOKENS, "rollout"))
    np.testing.assert_allclose(z(fig["data"][0]), rollout(torch.from_numpy(W)).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="self-attention"):
        nb.show(weights(q=2, k=3), ["a", "b"], "rollout", source_tokens=["x", "y", "z"])


def test_signed_values_use_the_diverging_scale_centred_on_zero():
    signed = W - 0.3
    grid = as_dict(nb.show(signed, TOKENS, "grid", signed=True))["layout"]["coloraxis"]
    assert grid["colorscale"] == colorscale(DIVERGING) and grid["cmin"] == -grid["cmax"] > -1
    head = as_dict(nb.show(signed, TOKENS, "head", signed=True))["data"][0]
    assert head["colorscale"] == colorscale(DIVERGING) and head["zmin"] == -head["zmax"] and head["zmid"] == 0
    model = as_dict(nb.show(signed, TOKENS, "model", signed=True))["layout"]["coloraxis"]
    assert model["colorscale"] == colorscale(DIVERGING) and model["cmin"] == -model["cmax"]
    query = as_dict(nb.show(signed, TOKENS, "query", signed=True))["layout"]["yaxis"]["range"]
    assert query[0] == -query[1] < 0
    with pytest.raises(ValueError, match="signed values"):
        nb.show(signed, TOKENS, "analysis", signed=True)


def test_an_unknown_view_or_index_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unknown view 'heads'; the views are: grid, head, model, query, analysis"):
        nb.show(W, TOKENS, "heads")
    with pytest.raises(ValueError, match=r"layer 2 does not exist: there are 2 layers \(0–1\)"):
        nb.show(W, TOKENS, layer=2)
    with pytest.raises(ValueError, match="head 3 does not exist"):
        nb.show(W, TOKENS, "head", head=3)


# -- BertViz -----------------------------------------------------------------------------

def hf_attention(layers=LAYERS, heads=H, q=L, k=L, seed=0) -> tuple[torch.Tensor, ...]:
    """What a Hugging Face model returns with output_attentions=True: a tuple of (1, H, L, S)."""
    w = torch.from_numpy(weights(layers, heads, q, k, seed))
    return tuple(w[i].unsqueeze(0) for i in range(layers))


def test_a_bertviz_snippet_works_after_changing_only_the_import():
    from attnviz import notebook as bertviz

    attention, tokens = hf_attention(), TOKENS
    html = bertviz.head_view(attention, tokens, html_action="return")
    assert isinstance(html.data, str) and "plotly-graph-div" in html.data
    assert bertviz.model_view(attention, tokens, html_action="return").data


def test_head_view_takes_every_bertviz_argument_by_name_and_renders_offline():
    r = nb.head_view(attention=hf_attention(), tokens=TOKENS, sentence_b_start=None, prettify_tokens=True, layer=1,
                     heads=[0, 2], encoder_attention=None, decoder_attention=None, cross_attention=None,
                     encoder_tokens=None, decoder_tokens=None, include_layers=[0, 1], html_action="return")
    assert_offline(r.data)
    (fig,) = r.figures
    d = as_dict(fig)
    assert [t.get("visible") for t in d["data"]] == [False, True]  # layer 1 first, a menu for layer 0
    assert [b["label"] for b in d["layout"]["updatemenus"][0]["buttons"]] == ["layer 0", "layer 1"]
    for lay, trace in enumerate(d["data"]):
        got = blocks_of(trace)
        assert len(got) == 2
        for b, h in zip(got, [0, 2], strict=True):
            np.testing.assert_array_equal(b["z"], W[lay, h])


def test_model_view_takes_every_bertviz_argument_by_name():
    r = nb.model_view(attention=hf_attention(), tokens=TOKENS, sentence_b_start=None, prettify_tokens=True,
                      display_mode="light", encoder_attention=None, decoder_attention=None, cross_attention=None,
                      encoder_tokens=None, decoder_tokens=None, include_layers=[1], include_heads=[0, 1],
                      html_action="return")
    assert_offline(r.data)
    d = as_dict(r.figure)
    got = blocks_of(d["data"][0])
    assert len(got) == 2
    for b, h in zip(got, [0, 1], strict=True):
        np.testing.assert_array_equal(b["z"], W[1, h])
    assert d["layout"]["template"]["layout"]["paper_bgcolor"] == "white"
    dark = as_dict(nb.model_view(hf_attention(), TOKENS, html_action="return").figure)
    assert dark["layout"]["template"]["layout"]["paper_bgcolor"] != "white"


def test_two_views_in_one_notebook_never_share_an_id():
    one = nb.head_view(hf_attention(), TOKENS, html_action="return").data
    two = nb.model_view(hf_attention(), TOKENS, html_action="return").data
    ids_one, ids_two = div_ids(one), div_ids(two)
    assert ids_one and ids_two and not set(ids_one) & set(ids_two)
    three = nb.head_view(encoder_attention=hf_attention(), decoder_attention=hf_attention(), encoder_tokens=TOKENS,
                         decoder_tokens=TOKENS, html_action="return").data
    assert len(set(div_ids(three))) == 2


def test_sentence_b_start_draws_the_boundary_in_every_block():
    r = nb.head_view(hf_attention(), TOKENS, sentence_b_start=2, html_action="return")
    d = as_dict(r.figure)
    assert "sentence B = tokens 2–3" in d["layout"]["title"]["text"]
    shapes, got = d["layout"]["shapes"], blocks_of(d["data"][0])
    assert len(shapes) == 2 * len(got) == 2 * H
    for b, (column, row) in zip(got, zip(shapes[::2], shapes[1::2], strict=True), strict=True):
        assert column["x0"] == column["x1"] == b["c0"] + 1.5 and row["y0"] == row["y1"] == b["r0"] + 1.5
    m = as_dict(nb.model_view(hf_attention(), TOKENS, sentence_b_start=2, html_action="return").figure)
    assert len(m["layout"]["shapes"]) == 2 * LAYERS * H
    assert "shapes" not in as_dict(nb.head_view(hf_attention(), TOKENS, html_action="return").figure)["layout"]
    with pytest.raises(ValueError, match="sentence_b_start must be a position between 1 and 3"):
        nb.head_view(hf_attention(), TOKENS, sentence_b_start=4, html_action="return")


def test_prettify_tokens_strips_wordpiece_and_bpe_markers():
    raw = ["[CLS]", "Ġthe", "##ing", "▁cat"]
    for pretty, want in ((True, ["[CLS]", "the", "ing", "cat"]), (False, raw)):
        r = nb.head_view(hf_attention(), raw, prettify_tokens=pretty, html_action="return")
        block = blocks_of(as_dict(r.figure)["data"][0])[0]
        assert [plain_label(s) for s in block["y"]] == want
    assert nb.bertviz.prettify(["##", "Ġ"]) == ["##", "Ġ"]  # nothing left: the token stays


def test_encoder_decoder_and_cross_attention_are_three_figures():
    enc, dec = ["a", "b", "c"], ["x", "y"]
    r = nb.head_view(encoder_attention=hf_attention(q=3, k=3), decoder_attention=hf_attention(q=2, k=2, seed=1),
                     cross_attention=hf_attention(q=2, k=3, seed=2), encoder_tokens=enc, decoder_tokens=dec,
                     html_action="return")
    assert len(r.figures) == 3
    titles = [as_dict(f)["layout"]["title"]["text"] for f in r.figures]
    assert [t.split(":")[0] for t in titles] == ["Encoder", "Decoder", "Cross"]
    cross = blocks_of(as_dict(r.figures[2])["data"][0])[0]
    np.testing.assert_array_equal(cross["z"], weights(q=2, k=3, seed=2)[0, 0])
    assert [plain_label(s) for s in cross["y"]] == dec and [plain_label(s) for s in cross["x"]] == enc
    m = nb.model_view(encoder_attention=hf_attention(q=3, k=3), decoder_attention=hf_attention(q=2, k=2),
                      cross_attention=hf_attention(q=2, k=3), encoder_tokens=enc, decoder_tokens=dec,
                      html_action="return")
    assert len(m.figures) == 3
    with pytest.raises(ValueError, match="'decoder_tokens' required if 'cross_attention' is not None"):
        nb.head_view(cross_attention=hf_attention(q=2, k=3), encoder_tokens=enc, html_action="return")


def test_bertviz_errors_are_bertvizs():
    with pytest.raises(ValueError, match="'tokens' is required"):
        nb.head_view(hf_attention(), html_action="return")
    with pytest.raises(ValueError, match=r"Layer 1 is not in include_layers: \[0\]"):
        nb.head_view(hf_attention(), TOKENS, layer=1, include_layers=[0], html_action="return")
    with pytest.raises(ValueError, match="'html_action' parameter must be 'view' or 'return'"):
        nb.model_view(hf_attention(), TOKENS, html_action="show")
    with pytest.raises(ValueError, match="You must specify at least one attention argument"):
        nb.model_view(html_action="return")
    with pytest.raises(ValueError, match="attention: 3 tokens do not match"):
        nb.head_view(hf_attention(), TOKENS[:3], html_action="return")


def test_view_displays_through_ipython_when_there_and_returns_the_html_when_not(monkeypatch):
    shown = []
    display = types.ModuleType("IPython.display")
    display.HTML = lambda data: ("HTML", data)
    display.display = shown.append
    ipython = types.ModuleType("IPython")
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    assert nb.head_view(hf_attention(), TOKENS) is None
    ((kind, data),) = shown
    assert kind == "HTML" and "plotly-graph-div" in data
    monkeypatch.setitem(sys.modules, "IPython.display", None)  # not installed: import fails
    r = nb.head_view(hf_attention(), TOKENS)
    assert isinstance(r, nb.Rendered) and "plotly-graph-div" in r._repr_html_() and "plotly.js v" in r.data


def test_user_text_never_reaches_the_page_raw_and_to_html_is_one_page():
    r = nb.head_view(hf_attention(), ["</script><script>alert(1)</script>", "b", "c", "d"], html_action="return")
    assert "<script>alert(1)" not in r.data
    page = nb.to_html(r.figures + [nb.show(W, TOKENS)])
    assert page.startswith("<!DOCTYPE html>") and page.count("plotly.js v") == 1 and len(div_ids(page)) == 2
    assert_offline(page)


# -- CircuitsVis -------------------------------------------------------------------------

def test_attention_heads_masks_the_upper_triangle_and_draws_the_rest():
    r = nb.attention_heads(W[0], TOKENS, attention_head_names=["L0H0", "<i>b</i>", "c"], mask_upper_tri=True)
    assert isinstance(r.figure, go.Figure)
    d = as_dict(r.figure)
    got = blocks_of(d["data"][0])
    upper = np.triu(np.ones((L, L), dtype=bool), k=1)
    for h, b in enumerate(got):
        assert np.isnan(b["z"][upper]).all()
        np.testing.assert_array_equal(b["z"][~upper], W[0, h][~upper])
    assert "&lt;i&gt;b&lt;/i&gt;" in [a["text"] for a in d["layout"]["annotations"]]
    open_ = blocks_of(as_dict(nb.attention_heads(W[0], TOKENS, mask_upper_tri=False).figure)["data"][0])
    np.testing.assert_array_equal(open_[1]["z"], W[0, 1])
    default = blocks_of(as_dict(nb.attention_heads(W[0], TOKENS).figure)["data"][0])  # square: masked, as CircuitsVis
    assert np.isnan(default[0]["z"][upper]).all()
    with pytest.raises(ValueError, match="2 attention_head_names for 3 heads"):
        nb.attention_heads(W[0], TOKENS, attention_head_names=["a", "b"])


def test_a_long_masked_pattern_keeps_its_diagonal_after_pooling():
    n = 200
    w = np.tril(np.ones((1, n, n), dtype=np.float32))
    w /= w.sum(-1, keepdims=True)
    (b,) = blocks_of(as_dict(nb.attention_heads(w, [str(i) for i in range(n)], mask_upper_tri=True).figure)["data"][0])
    k = b["z"].shape[0]
    assert k < n and np.isfinite(np.diag(b["z"])).all() and np.isnan(b["z"][np.triu_indices(k, 1)]).all()


def test_attention_pattern_signed_and_coloured_as_asked():
    signed = W[0, 0] - 0.3
    r = nb.attention_pattern(TOKENS, signed, mask_upper_tri=False)
    t = as_dict(r.figure)["data"][0]
    assert t["colorscale"] == colorscale(DIVERGING) and t["zmin"] == -t["zmax"] and t["zmid"] == 0
    np.testing.assert_allclose(z(t), signed, rtol=1e-6)
    c = as_dict(nb.attention_pattern(TOKENS, signed, negative_color="red", positive_color="#00ff00",
                                     mask_upper_tri=True).figure)["data"][0]
    assert c["colorscale"][0][1] == "red" and c["colorscale"][-1][1] == "#00ff00"
    assert np.isnan(z(c)[0, 1]) and z(c)[1, 0] == pytest.approx(signed[1, 0])
    heads = as_dict(nb.attention_heads(W[0] - 0.3, TOKENS).figure)["layout"]["coloraxis"]
    assert heads["colorscale"] == colorscale(DIVERGING) and heads["cmin"] == -heads["cmax"]
    plain = as_dict(nb.attention_pattern(TOKENS, W[0, 0], max_value=0.5).figure)["data"][0]
    assert (plain["zmin"], plain["zmax"]) == (0.0, 0.5)
    with pytest.raises(ValueError, match=r"attention must be \(L, S\)"):
        nb.attention_pattern(TOKENS, W[0])
    with pytest.raises(ValueError, match="CSS colour"):
        nb.attention_pattern(TOKENS, W[0, 0], positive_color="url(javascript:x)")


def test_circuitsvis_html_is_self_contained():
    html = nb.attention_heads(W[0], TOKENS).data  # returned HTML: self-contained (notebook outputs are light)
    assert_offline(html)
    assert str(nb.attention_pattern(TOKENS, W[0, 0])) != html


# -- files -------------------------------------------------------------------------------

def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def npz_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def npy(shape, dtype="<f4", data: bytes | None = None) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue() + (data if data is not None else b"")


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_attention_files_round_trip(tmp_path, ext):
    cross = weights(q=2, k=3)
    path = tmp_path / f"run.{ext}"
    nb.save_attention(path, tuple(torch.from_numpy(cross[i]).unsqueeze(0) for i in range(LAYERS)), ["a", "b"],
                      source_tokens=["x", "y", "中文"], meta={"model": "tiny", "step": 3})
    for source in (path, str(path), path.read_bytes(), io.BytesIO(path.read_bytes())):
        a = nb.load_attention(source, name=None if not isinstance(source, bytes) else path.name)
        np.testing.assert_array_equal(a.weights, cross)
        assert (a.tokens, a.source_tokens) == (["a", "b"], ["x", "y", "中文"])
    if ext == "safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "numpy") as f:
            meta = f.metadata()
            assert f.get_tensor("attention").dtype == np.float32
        assert meta["format"] == "attnviz-attention-1" and json.loads(meta["tokens"]) == ["a", "b"]
    else:
        with np.load(path, allow_pickle=False) as f:
            assert f["tokens"].dtype.kind == "U" and f["attention"].shape == (LAYERS, H, 2, 3)


@pytest.mark.parametrize("ext", files.PICKLE_SUFFIXES)
def test_pickle_formats_are_refused_with_how_to_convert(tmp_path, ext):
    message = r"pickles, and loading a pickle runs code.*save_attention\("
    path = tmp_path / f"attention{ext}"
    path.write_bytes(b"\x80\x04K\x01.")  # a pickle: never opened
    with pytest.raises(ValueError, match=message):
        nb.load_attention(path)
    with pytest.raises(ValueError, match=message):
        nb.load_attention(b"\x80\x04K\x01.", name=f"upload{ext}")
    with pytest.raises(ValueError, match=message):
        nb.save_attention(path, W, TOKENS)


def good_header(shape, nbytes, tokens=None):
    meta = {"format": files.FORMAT, **({"tokens": json.dumps(tokens)} if tokens is not None else {})}
    return {"__metadata__": meta, "attention": {"dtype": "F32", "shape": shape, "data_offsets": [0, nbytes]}}


def test_a_lying_safetensors_header_is_refused():
    data = np.full((1, 1, 2, 2), 0.5, dtype="<f4").tobytes()
    claims_less = good_header([1, 1, 2, 2], 8)
    with pytest.raises(ValueError, match=r"lying header: shape \[1, 1, 2, 2\] of F32 needs 16 bytes.*span 8"):
        nb.load_attention(safetensors_bytes(claims_less, data[:8]), name="a.safetensors")
    with pytest.raises(ValueError, match="lying header: the file holds 32 bytes of data, the header declares 16"):
        nb.load_attention(safetensors_bytes(good_header([1, 1, 2, 2], 16), data * 2), name="a.safetensors")
    with pytest.raises(ValueError, match="the header claims .* bytes, over"):
        nb.load_attention(struct.pack("<Q", 2**40) + b"{}", name="a.safetensors")


def test_a_lying_npz_header_is_refused():
    member = npy((1, 1, 4, 4), data=np.full(8, 0.25, dtype="<f4").tobytes())  # declares 16 floats, holds 8
    with pytest.raises(ValueError, match=r"lying header: attention.npy declares float32 \(1, 1, 4, 4\) \(64 bytes\)"):
        nb.load_attention(npz_bytes({"attention.npy": member}), name="a.npz")


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_a_truncated_file_is_refused(tmp_path, ext):
    path = tmp_path / f"a.{ext}"
    nb.save_attention(path, W, TOKENS)
    data = path.read_bytes()
    with pytest.raises(ValueError, match="truncated"):
        nb.load_attention(data[:-10], name=path.name)
    with pytest.raises(ValueError, match="truncated"):
        nb.load_attention(data[:5], name=path.name)


def test_a_header_declaring_a_huge_shape_is_refused_before_decoding(monkeypatch):
    decoded = []
    real = files.np.frombuffer
    monkeypatch.setattr(files.np, "frombuffer", lambda *a, **k: decoded.append(1) or real(*a, **k))
    shape = [64, 64, 2048, 2048]
    nbytes = 64 * 64 * 2048 * 2048 * 4  # consistent offsets: only the budget can refuse it
    with pytest.raises(ValueError, match=r"declares shape \[64, 64, 2048, 2048\], 65,536.0 MB decoded, over the"):
        nb.load_attention(safetensors_bytes(good_header(shape, nbytes), b"\0" * 64), name="huge.safetensors")
    with pytest.raises(ValueError, match="over the memory budget"):
        nb.load_attention(npz_bytes({"attention.npy": npy(shape, data=b"\0" * 64)}), name="huge.npz")
    with pytest.raises(ValueError, match="4096 tokens along L"):
        nb.load_attention(safetensors_bytes(good_header([1, 1, 4096, 4], 4096 * 16), b""), name="long.safetensors")
    assert not decoded


def test_uploads_over_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(limits, "MAX_UPLOAD_BYTES", 100)
    with pytest.raises(ValueError, match="over the limit of"):
        nb.load_attention(b"\0" * 101, name="a.npz")
    with pytest.raises(ValueError, match="over the limit of"):
        nb.load_attention(io.BytesIO(b"\0" * 500))


def test_nan_in_a_file_is_refused():
    from safetensors.numpy import save

    bad = W.copy()
    bad[0, 1, 2, 3] = np.nan
    st = save({"attention": bad}, metadata={"format": files.FORMAT, "tokens": json.dumps(TOKENS)})
    with pytest.raises(ValueError, match=r"bad.safetensors: attention contains NaN .*layer 0, head 1, query 2, key 3"):
        nb.load_attention(st, name="bad.safetensors")
    buf = io.BytesIO()
    np.savez_compressed(buf, attention=bad)
    with pytest.raises(ValueError, match="bad.npz: attention contains NaN"):
        nb.load_attention(buf.getvalue(), name="bad.npz")


def test_tokens_that_do_not_match_the_file_are_refused():
    from safetensors.numpy import save

    st = save({"attention": W}, metadata={"format": files.FORMAT, "tokens": json.dumps(TOKENS[:3])})
    with pytest.raises(ValueError, match=r"the file's tokens \(3\) do not match its attention's L = 4 queries"):
        nb.load_attention(st, name="a.safetensors")
    buf = io.BytesIO()
    np.savez_compressed(buf, attention=W, tokens=np.array(TOKENS), source_tokens=np.array(TOKENS + ["x"]))
    with pytest.raises(ValueError, match=r"source_tokens \(5\) do not match its attention's S = 4 keys"):
        nb.load_attention(buf.getvalue(), name="a.npz")
    not_strings = save({"attention": W}, metadata={"tokens": json.dumps([1, 2, 3, 4])})
    with pytest.raises(ValueError, match="not a list of strings"):
        nb.load_attention(not_strings, name="a.safetensors")


def test_object_arrays_in_an_npz_are_refused_without_unpickling():
    buf = io.BytesIO()
    np.savez(buf, attention=W, tokens=np.array(TOKENS, dtype=object))
    with pytest.raises(ValueError, match="need pickle: refused"):
        nb.load_attention(buf.getvalue(), name="a.npz")


def test_the_docs_bertviz_example_runs_as_written():
    """docs/notebook.md's first example, executed as it stands there."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "notebook.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/notebook.md", "exec"), scope)  # noqa: S102 - our own docs
    html = scope["html"].data
    assert "<script" in html and not re.search(r"<script[^>]*\bsrc\s*=", html)  # everything inline


def test_the_notebook_api_is_at_the_top_level_and_loaded_on_first_use():
    import subprocess
    import sys

    code = ("import sys, attnviz; assert 'attnviz.notebook' not in sys.modules; "
            "f = attnviz.head_view; assert 'attnviz.notebook' in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "attnviz.notebook.bertviz"


def test_the_readmes_bertviz_example_runs_as_written():
    """README's notebook example (indented in a list item), executed as it stands there."""
    import re
    import textwrap
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\n( *)```python\n(.*?)\n\1```", text, re.S)
    code = textwrap.dedent(block.group(2))
    assert "from attnviz import head_view, model_view" in code
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own docs
    html = scope["html"].data
    assert "Plotly.newPlot" in html  # drawn by its own inline Plotly
    assert not re.search(r"<script[^>]*\bsrc\s*=", html)
