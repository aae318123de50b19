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


def test_a_models_overviews_are_read_at_the_blocks_the_server_keeps_for_everyone(monkeypatch):
    """The page's blocks per side are bounded by the model's layers × heads: both overviews (float32) take at most
    half of the jobs' share of the cache, so that a 30-layer × 9-head model's attention is kept (at 256 blocks it
    held 130 MB and was thrown away); the random layer keeps the declared bound."""
    share = limits.cache_bytes("jobs")
    for layers, heads in ((30, 9), (12, 12), (2, 4)):
        b = V.most_blocks(layers, heads)
        assert 2 * 4 * layers * heads * b * b <= share // 2 < 2 * 4 * layers * heads * (b + 1) ** 2 or \
            b == limits.MAX_LONG_BLOCKS
    assert V.most_blocks(30, 9) < limits.LONG_BLOCKS <= V.model_blocks("random")
    monkeypatch.setattr(limits, "cache_bytes", lambda name: 0)
    assert V.most_blocks(30, 9) == 1  # never none


def test_the_small_multiples_stay_within_one_screen_with_labels_apart():
    from attnviz.plots.longcontext import small_multiples_figure
    from attnviz.plots.style import FigureStyle

    overview = np.random.default_rng(0).random((30, 9, 16, 16)).astype(np.float32)
    zeros = np.zeros((30, 9))
    for font, most in ((12, 768), (22, 768 - 260)):  # a laptop's screen; a projector's under the page's title
        fig = small_multiples_figure(overview, zeros, zeros, FigureStyle(font_size=font), title="every layer × head")
        step = (len(fig.data[0].z) + 1) // 30  # a panel's rows and the gap after it
        every = round((fig.layout.yaxis.tickvals[1] - fig.layout.yaxis.tickvals[0]) / step)  # layers between labels
        plot = fig.layout.height - 100  # at least the panels' height: the title and margins take more than 100 px
        assert fig.layout.height <= most
        assert every * plot / 30 >= font  # neighbouring labels a line apart
        assert list(fig.layout.yaxis.ticktext[:2]) == ["L0", f"L{every}"]
