"""The Q/K map page (AppTest): one head, the overview computed once in the background, your own lines."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from attnviz import limits
from attnviz.analysis import qkcorpus as QC
from attnviz.analysis.qkmap import trusted
from attnviz.views import qkmap as V
from attnviz.views.state import ViewState
from tests.support.apphelp import APP, app, figures, warnings_shown


@pytest.mark.minilm
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
    for job in QC.OVERVIEWS.jobs():
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
    real = QC.layer_overview

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(QC, "layer_overview", counted)
    state = ViewState.of(heads=2, d_model=16, seed=11)
    lines = ["the cat sat on the mat", "dog eats dog", "猫看见了另一只猫。"]
    jobs = [V.overview_job(state, lines) for _ in range(5)]
    assert all(j is jobs[0] for j in jobs)
    assert jobs[0].done.wait(60) and not jobs[0].error
    assert V.overview_job(state, lines) is jobs[0] and len(calls) == 1
    assert len(jobs[0].value) == 2 and jobs[0].fraction == 1.0


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


def _in_order(node) -> list:
    """The page's elements in the order they are drawn (blocks walked depth first)."""
    children = getattr(node, "children", None)
    if not children:
        return [node]
    return [e for key in sorted(children) for e in _in_order(children[key])]


@pytest.mark.minilm
@pytest.mark.parametrize("part", ["map", "overview"])
def test_a_map_that_does_not_follow_attention_says_so_above_it(part):
    """Layer 4 head 5 of MiniLM: AttentionViz's map is below its baseline, the reduction's above it.
    The page says so in one line above the map (the head's, or the layer's, naming the head)."""
    said = {}
    for norm in ("attentionviz", "mips"):
        at = app(f"model=minilm-l6&layer=4&head=5&qk_norm={norm}&qk_part={part}", page="app_pages/qk_map.py")
        for job in QC.OVERVIEWS.jobs():
            job.done.wait(120)
        at.run()
        assert not at.exception and not at.error
        rec = V.head_record(ViewState.of(model="minilm-l6", layer=4, head=5, qk_norm=norm))
        lines = [w for w in warnings_shown(at) if "random placement" in w]
        said[norm] = lines
        if part == "map":
            assert len(lines) == (0 if trusted(rec) else 1)
            if lines:
                assert f"{rec['agreement']:.1%}" in lines[0] and f"{rec['baseline']:.1%}" in lines[0]
        elif not trusted(rec):
            assert len(lines) == 1 and "5" in re.findall(r"\d+", lines[0].split(" of ")[0])
        if lines:  # one line, above the chart
            order = [type(e).__name__ for e in _in_order(at.main)]
            kinds = [getattr(e, "type", "") for e in _in_order(at.main)]
            first_warning = next(i for i, e in enumerate(_in_order(at.main)) if e in at.warning)
            chart = next(i for i, k in enumerate(kinds) if k == "plotly_chart")
            assert "\n" not in lines[0] and first_warning < chart, order
    assert said["attentionviz"] and not said["mips"]  # the case shows both sides


def test_the_page_opens_on_a_language_model_where_one_is_offered_and_links_the_random_layer(tmp_path, monkeypatch):
    """Its queries and keys are best seen in a language model: with one offered, a visit that names no model opens
    on it (the random layer stays offered, and once chosen its link names it); a link that names one keeps it."""
    from attnviz.models import registry
    from tests.support import longmodels

    longmodels.save(tmp_path, "llama", 512)
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path))
    at = app("heads=2&d_model=16", page="app_pages/qk_map.py")  # from the explorer, on the random layer
    assert not at.exception and not at.error
    assert at.session_state["model"] == "llama" and "model" not in dict(at.query_params)
    assert figures(at)
    at.sidebar.selectbox(key="model").set_value("random").run()
    assert at.session_state["model"] == "random" and dict(at.query_params)["model"] == "random"
    at.run()  # a click elsewhere on the page keeps the chosen layer
    assert at.session_state["model"] == "random"
    linked = AppTest.from_file(APP, default_timeout=60)  # the link opened: the page itself, first
    for k, v in at.query_params.items():
        linked.query_params[k] = v
    linked.switch_page("app_pages/qk_map.py").run()
    assert not linked.exception and linked.session_state["model"] == "random"
