"""attnviz.notebook.bertviz: BertViz's head_view and model_view, the same arguments, offline HTML; the docs'
and the README's BertViz examples run as written."""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest
import torch

from attnviz import notebook as nb
from attnviz.plots import plain_label
from tests.support.weights import LAYERS, TOKENS, H, L, W, as_dict, assert_offline, blocks_of, weights


def div_ids(html: str) -> list[str]:
    return re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', html)


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


def test_the_readmes_bertviz_example_runs_as_written():
    """README's notebook example (indented in a list item), executed as it stands there."""
    import re
    import textwrap
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\n( *)```python\n(.*?)\n\1```", text, re.S)
    code = textwrap.dedent(block.group(2))
    assert "from attnviz import head_view, model_view" in code
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own docs
    html = scope["page"]
    assert isinstance(html, str) and html == scope["view"].data  # a variable named for what it holds
    assert "Plotly.newPlot" in html  # drawn by its own inline Plotly
    assert not re.search(r"<script[^>]*\bsrc\s*=", html)
