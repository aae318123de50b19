"""The Q/K map's views: the one line above a map (or a layer's maps) that does not follow
attention, in the record, the figure and the overview; the choice of normalisation reaches
every part (one head, the overview job, the JSON)."""

import json

import numpy as np

from attnviz.analysis import qkmap as Q
from attnviz.plots.qkmap import agreement_line, map_figure, overview_figure
from attnviz.views import qkmap as V
from attnviz.views.state import ViewState

LINES = ["the cat sat on the mat", "dog eats dog", "a quiet house by the river", "猫看见了另一只猫。"]


def fake(head: int, agreement: float, baseline: float = 0.27) -> dict:
    rec = {"head": head, "agreement": agreement, "baseline": baseline, "k": 3,
           "points": [{"kind": "query", "token": "a", "x": 0.0, "y": 0.0},
                      {"kind": "key", "token": "a", "x": 1.0, "y": 1.0}]}
    return rec | {"warning": Q.trust_warning(rec)}


def test_the_overview_names_the_heads_whose_map_does_not_follow_attention():
    records = [fake(0, 0.60), fake(1, 0.30), fake(2, 0.10), fake(3, 0.40)]
    line = V.untrusted_line(records)
    assert line is not None and "\n" not in line and "1, 2 of 4" in line and "5 points" in line
    assert V.untrusted_line([fake(0, 0.60), fake(1, 0.33)]) is None  # both above by ≥ 0.05: nothing said
    cells = [a["text"] for a in overview_figure(records).layout.annotations]
    assert [c.startswith("⚠") for c in cells] == [False, True, True, False]


def test_the_one_head_figure_says_it_above_the_map_too():
    assert agreement_line(fake(0, 0.60)).startswith("agreement 60%")
    line = agreement_line(fake(0, 0.25))
    assert line.startswith("⚠ agreement 25%") and "chance" in line


def test_the_normalisation_reaches_the_map_and_its_json():
    state = ViewState.of(heads=2, d_model=16, head=1)
    for norm in Q.NORMALISATIONS:
        rec = json.loads(V.qk_record_json(state.with_(qk_norm=norm), "json", LINES))
        assert rec["normalisation"]["name"] == norm and rec["head"] == 1
        # the JSON says whether to trust the map, in the same words as the page
        assert "warning" in rec and rec["warning"] == Q.trust_warning(rec)
        assert (rec["warning"] is None) == (rec["agreement"] - rec["baseline"] >= Q.TRUST_MARGIN - 1e-12)
    a = V.head_record(state.with_(qk_norm="attentionviz"), LINES)
    b = V.head_record(state.with_(qk_norm="mips"), LINES)
    assert not np.allclose([p["x"] for p in a["points"]], [p["x"] for p in b["points"]])
    # the figure's title names it, so an exported picture says which map it is
    assert map_figure(a, "kind").layout.title.text.endswith("PCA · AttentionViz")
    assert map_figure(b, "kind").layout.title.text.endswith("PCA · MIPS→NN")


def test_each_normalisation_has_its_own_overview_job():
    state = ViewState.of(heads=2, d_model=16, seed=5)
    jobs = {norm: V.overview_job(state.with_(qk_norm=norm), LINES) for norm in Q.NORMALISATIONS}
    assert jobs["mips"] is not jobs["attentionviz"]
    for norm, job in jobs.items():
        assert job.done.wait(60) and not job.error
        assert {r["normalisation"]["name"] for r in job.value} == {norm} and all("warning" in r for r in job.value)


def test_the_agreement_line_sits_between_the_title_and_the_map_at_both_sizes():
    """The map's title (centred in the top margin, its lines from the first down) ends above the
    agreement line, which the builder anchors at the plot's top: on a projector both wrap (under a title of its
    own: the map of a head there says its agreement in its one-line title instead)."""
    from attnviz.plots.style import FigureStyle, title_line_px

    points = [{"kind": kind, "token": "a", "x": float(i), "y": 0.0, "sentence": 0, "position": 0, "token_kind": "word"}
              for i, kind in enumerate(("query", "key"))]
    rec = fake(3, 0.12) | {"layer": 4, "method": "tsne", "normalisation": {"name": "attentionviz"},
                           "sentences": ["a"], "points": points}
    for fs in (12, 24):
        lay = map_figure(rec, "kind", FigureStyle(font_size=fs)).layout
        if fs == 24:  # on a projector one title line says the head's agreement and baseline, and no note is drawn
            assert not lay.annotations and "<br>" not in lay.title.text
            assert f"{rec['agreement']:.0%}" in lay.title.text and f"{rec['baseline']:.0%}" in lay.title.text
            # a title of its own (a docs author's): the note under it, as on a laptop
            lay = map_figure(rec, "kind", FigureStyle(font_size=fs),
                             title="layer 4, head 3: queries (●) and keys (◆), t-SNE · AttentionViz, a title of its "
                                   "own").layout
        t, plot_h = lay.margin.t, lay.height - lay.margin.t - lay.margin.b
        title_lines = lay.title.text.count("<br>") + 1
        note_lines = lay.annotations[0].text.count("<br>") + 1
        title_bottom = t / 2 + (title_lines - 0.5) * title_line_px(fs)
        note_top = t - lay.annotations[0].y % 1 * plot_h - note_lines * 1.3 * fs
        assert title_bottom <= note_top, (fs, title_bottom, note_top)
        if fs == 24:
            assert note_lines > 1 and title_lines > 1  # the case the room is for
