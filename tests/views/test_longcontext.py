"""The Long context page's pieces (attnviz.views.longcontext): the text it reads and why one is
refused, the plain values its jobs are keyed by, the head table by its stated rule."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import limits
from attnviz.views import longcontext as V
from attnviz.views.state import ViewState, parse, reads


def test_the_page_reads_a_shipped_a_pasted_or_an_uploaded_text():
    s = V.LongSettings()
    assert V.page_text(s) == V.long_text("alice")
    assert V.page_text(s.with_(text="paste"), "some words") == "some words"
    assert V.page_text(s.with_(text="upload"), uploaded=("é words".encode(), "a.txt")) == "é words"


@pytest.mark.parametrize("text, pasted, uploaded, words", [
    ("paste", "", None, "The pasted text is empty"),
    ("paste", " \n ", None, "The pasted text is empty"),
    ("paste", "a" * (limits.MAX_LONG_TEXT_BYTES + 1), None, "over 1,024 KB"),
    ("upload", "", None, "Upload a text file"),
    ("upload", "", (b"\x89PNG\x00\x01", "x.txt"), "not a text file"),
    ("upload", "", (b"\xff\xfe\xfa", "x.txt"), "not UTF-8 text"),
    ("upload", "", (b"a" * (limits.MAX_LONG_TEXT_BYTES + 1), "x.txt"), "long texts are at most"),
])
def test_a_bad_text_is_refused_saying_why(text, pasted, uploaded, words):
    with pytest.raises(ValueError, match=words):
        V.page_text(V.LongSettings(text=text), pasted, uploaded)


def test_a_job_is_keyed_by_the_text_and_the_values_it_reads_not_the_head():
    a, b = V.long_key("random", "one text", 256), V.long_key("random", "another text", 256)
    assert a != b and a[:2] == ("long-context", "random")
    assert V.long_key("random", "one text", 256) == a != V.long_key("random", "one text", 128)
    assert all(isinstance(v, (str, int, float)) for v in a)


def test_its_settings_live_in_the_link_under_their_own_names():
    state, warnings = parse({"long_text": "pride", "long_policy": "snapkv", "long_ratio": "0.25"})
    assert not warnings and state.long == V.LongSettings(text="pride", policy="snapkv", ratio=0.25)
    assert {"long_text", "long_blocks", "long_policy", "long_ratio", "long_layer", "long_head", "model"} <= \
        reads("long-context")
    assert not {"text", "heads", "d_model", "layer"} & reads("long-context")
    _state, warnings = parse({"long_ratio": "1"})
    assert [w.name for w in warnings] == ["long_ratio"]
    assert ViewState().long == V.LongSettings()


def test_the_head_table_labels_each_head_by_the_stated_rule():
    class Result:
        layers, heads = 1, 3
        sink = np.array([[0.7, 0.1, 0.1]])
        distance = np.array([[5.0, V.LOCAL_HEAD, V.LOCAL_HEAD + 1]])
        entropy = np.array([[0.2, 0.5, 0.9]])

    rows = V.head_rows(Result())
    assert [r["label"] for r in rows] == ["sink", "local", "far"]
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (0, 1), (0, 2)] and "lost" not in rows[0]
