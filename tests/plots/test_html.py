"""Notebook views stay light (plotly.js once a session, 2-byte weights) and CircuitsVis's
keywords are all accepted."""

from __future__ import annotations

import base64
import inspect
import json
import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch

import attnviz
from attnviz import notebook as nb
from attnviz.plots import html
from tests.notebook.test_views import TOKENS, W

LIBRARY = "plotly.js v"  # plotly.js's banner, at the top of the bundle

# CircuitsVis's own signatures (TransformerLensOrg/CircuitsVis, python/circuitsvis/attention.py,
# main at 2024-12-18; development_mode from its earlier releases), beyond tokens and attention.
CIRCUITSVIS = {
    "attention_heads": {"attention_head_names": ["a", "b", "c"], "max_value": 1.0, "min_value": 0.0,
                        "negative_color": "red", "positive_color": "blue", "mask_upper_tri": False,
                        "development_mode": False},
    "attention_pattern": {"max_value": 1.0, "min_value": 0.0, "negative_color": "red", "show_axis_labels": True,
                          "positive_color": "blue", "mask_upper_tri": False, "development_mode": False},
    "attention_patterns": {"development_mode": False},
}
IGNORED = {"development_mode"}
HF = tuple(w[None] for w in W)  # (1, H, L, S) per layer, as a Hugging Face model returns


def _call(name: str, **kw):
    f = getattr(nb, name)
    pattern = W[0] if name != "attention_pattern" else W[0, 0]  # (H, L, S) or (L, S)
    if name == "attention_heads":
        return f(pattern, TOKENS, **kw)
    return f(TOKENS, pattern, **kw)


@pytest.mark.parametrize("name,keyword", [(n, k) for n, kws in CIRCUITSVIS.items() for k in kws])
def test_every_circuitsvis_keyword_is_accepted(name, keyword):
    if name == "attention_heads" and W.shape[1] != 3:
        CIRCUITSVIS[name]["attention_head_names"] = [f"h{i}" for i in range(W.shape[1])]
    assert keyword in inspect.signature(getattr(nb, name)).parameters
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = _call(name, **{keyword: CIRCUITSVIS[name][keyword]})
    assert isinstance(r, nb.Rendered) and r.figures
    mine = [str(w.message) for w in caught if keyword in str(w.message)]
    if keyword in IGNORED:
        assert len(mine) == 1 and "\n" not in mine[0] and mine[0].startswith(name)
    else:
        assert not mine


def test_show_axis_labels_hides_the_tokens_only_when_false():
    def ticks(**kw):
        lay = json.loads(nb.attention_pattern(TOKENS, W[0, 0], **kw).figure.to_json())["layout"]
        return lay.get("xaxis", {}).get("showticklabels", True), lay.get("yaxis", {}).get("showticklabels", True)

    assert ticks(show_axis_labels=False) == (False, False)
    assert ticks(show_axis_labels=True) == (True, True) == ticks()


def test_attention_patterns_is_the_plural_and_exported():
    assert attnviz.attention_patterns is nb.attention_patterns
    fig = nb.attention_patterns(TOKENS, W[0]).figure
    heads = {a["text"] for a in json.loads(fig.to_json())["layout"].get("annotations", [])}
    assert len([h for h in heads if h.startswith("Head")]) == W.shape[1]
    with pytest.raises(ValueError, match=r"\(H, L, S\)"):
        nb.attention_patterns(TOKENS, W[0, 0])


def test_first_view_of_a_session_carries_plotlyjs_and_later_ones_only_data():
    html.include_plotlyjs()
    r = nb.head_view(HF, TOKENS, html_action="return")  # (layers, 1, H, L, S)
    first, second, third = r._repr_html_(), r._repr_html_(), nb.show(W, TOKENS)
    assert LIBRARY in first and LIBRARY not in second
    assert "attnvizDraw" in first and "attnvizDraw" in second
    assert LIBRARY in r.data and LIBRARY in str(r)  # html_action="return": self-contained, always
    assert LIBRARY in nb.to_html(r)
    html.include_plotlyjs()
    assert LIBRARY in r._repr_html_()
    del third


def test_view_through_ipython_is_light_after_the_first(monkeypatch):
    shown = []
    display = types.ModuleType("IPython.display")
    display.HTML = lambda data: data
    display.display = shown.append
    ipython = types.ModuleType("IPython")
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    html.include_plotlyjs()
    nb.head_view(HF, TOKENS)
    nb.model_view(HF, TOKENS)
    assert [LIBRARY in s for s in shown] == [True, False]


def _payloads(html: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r"var p = (\{.*?\}), t0 = ", html)]


def test_compact_weights_read_four_decimals_and_keep_the_gaps():
    torch.manual_seed(1)
    att = tuple(torch.softmax(torch.randn(1, 4, 9, 9), -1) for _ in range(3))  # (1, H, L, S) per layer
    r = nb.head_view(att, [f"t{i}" for i in range(9)], html_action="return")
    (p,) = _payloads(r._repr_html_())
    full = json.loads(r.figure.to_json())["data"]
    checked = 0
    for trace, light in zip(full, p["data"], strict=True):
        spec = trace["z"]
        z = np.frombuffer(base64.b64decode(spec["bdata"]), dtype="<" + spec["dtype"]).reshape(
            [int(x) for x in spec["shape"].split(",")])
        q = p["blobs"][light["z"]["attnviz_blob"]]
        assert "attnviz_u2" in q and len(base64.b64decode(q["attnviz_u2"])) == 2 * z.size  # 2 bytes a value
        back = html.decode_u2(q)
        assert np.array_equal(np.isnan(back), np.isnan(z))
        ok = ~np.isnan(z)
        assert np.abs(back[ok] - z[ok]).max() <= html.QUANT_MAX_ERROR
        checked += 1
    assert checked == 3
    assert len(p["blobs"]) < 2 * checked + 2  # the head index and the labels, the same in each layer, kept once


def test_a_wide_range_stays_float32():
    v = np.array([-3.0, 0.0, 2.5], dtype=np.float32)
    spec = {"dtype": "f4", "bdata": base64.b64encode(v.tobytes()).decode(), "shape": "3"}
    assert html._quantised(spec) is spec
    narrow = dict(spec, bdata=base64.b64encode((v / 10).tobytes()).decode())
    assert "attnviz_u2" in html._quantised(narrow)


def test_user_text_cannot_close_the_light_views_script():
    html.include_plotlyjs()
    r = nb.head_view(HF, ["</script><script>alert(1)</script>", "b", "c", "d"], html_action="return")
    r._repr_html_()
    light = r._repr_html_()
    assert "</script><script>alert(1)" not in light and light.count("</script>") == light.count("<script")


def test_twelve_layers_of_twelve_heads_over_32_tokens_stay_under_500_kb_after_the_first():
    torch.manual_seed(0)
    att = tuple(torch.softmax(torch.randn(1, 12, 32, 32), -1) for _ in range(12))  # (1, H, L, S) per layer
    r = nb.head_view(att, [f"t{i}" for i in range(32)], html_action="return")
    html.include_plotlyjs()
    first, later = len(r._repr_html_().encode()), len(r._repr_html_().encode())
    assert later <= 500_000
    assert first + 9 * later <= 10_000_000
