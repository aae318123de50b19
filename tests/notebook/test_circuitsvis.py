"""attnviz.notebook.circuitsvis: CircuitsVis's attention_heads, attention_pattern(s), masks and colours."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from attnviz import notebook as nb
from attnviz.plots import DIVERGING, colorscale
from tests.support.apphelp import z  # figures decoded as a browser gets them (base64 "bdata")
from tests.support.weights import TOKENS, L, W, as_dict, assert_offline, blocks_of


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
