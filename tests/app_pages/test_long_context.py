"""The Long context page (app_pages/long_context.py) through AppTest: the default link draws every
picture after its background jobs; a bad text, a bad link and an encoder each get a message; the link
holds only the settings changed from their defaults."""

from __future__ import annotations

import threading

import pytest

from attnviz.models import registry as R
from attnviz.views import longcontext as V
from tests.support import hfmodels, longmodels
from tests.support.apphelp import after_loads, app, figures, no_errors

PAGE = "app_pages/long_context.py"


def plain(markdown: str) -> str:
    """Markdown as it reads: the page escapes user text (attnviz.views.markdown)."""
    return markdown.replace("\\", "").replace("\u200b", "")


def titles(at) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(at)]


def test_the_default_link_draws_every_picture_and_each_definition():
    at = app(page=PAGE, timeout=300)
    no_errors(at)
    n = len(V.long_text("alice").split())  # the random layer reads words and punctuation: more tokens than words
    shown = titles(at)
    assert len(shown) == 4, shown
    assert shown[0].startswith("random: every layer × head over") and shown[1].startswith("layer 0, head 0:")
    assert shown[2].startswith("layer 0, head 0: exact weights of queries")
    assert shown[3].startswith("streaming, 50% evicted:")
    tokens = int(shown[0].split(" over ")[1].split()[0].replace(",", ""))
    assert tokens > n
    md = "\n".join(plain(m.value) for m in at.markdown)
    for name in V.DEFINITIONS:
        assert f"**{name}**:" in md, name
    assert plain(V.HEAD_RULE) in md
    table = at.dataframe[0].value
    assert list(table.columns) == ["layer", "head", "label", "sink", "distance", "entropy", "lost"]
    assert len(table) == 4 and set(table["label"]) <= {"sink", "local", "far"}
    # the random layer has no language-model head: said, where "—" stood, and only the attention lost measured
    assert len(at.get("metric")) == 1 and at.get("metric")[0].value.endswith("%")
    said = [i.value for i in at.info if "vocabulary" in i.value or "language-model head" in i.value]
    assert len(said) == 1 and "has no vocabulary" in said[0], said  # said once, not twice in other words
    last = f"{tokens - 64:,}–{tokens - 1:,}"  # the close-up's corner: the last 64 queries, over the first keys
    assert shown[2] == f"layer 0, head 0: exact weights of queries {last} over keys 0–63"
    assert dict(at.query_params) == {}  # every setting at its default: the link is the page's path alone


def test_the_link_holds_only_the_changed_settings():
    at = app("long_policy=knorm&long_ratio=0.25&long_head=2", page=PAGE, timeout=300)
    no_errors(at)
    assert dict(at.query_params) == {"long_policy": "knorm", "long_ratio": "0.25", "long_head": "2"}
    assert titles(at)[1].startswith("layer 0, head 2:") and titles(at)[3].startswith("knorm, 25% evicted:")
    at.selectbox(key="long_text").set_value("pride").run()
    after_loads(at, 300)
    no_errors(at)
    assert dict(at.query_params) == {"long_policy": "knorm", "long_ratio": "0.25", "long_head": "2",
                                     "long_text": "pride"}


@pytest.mark.parametrize("pasted", ["", "   \n\t "])
def test_an_empty_box_asks_for_a_text_without_an_error(pasted):
    at = app("long_text=paste", page=PAGE, timeout=300)
    if pasted:
        at.text_area(key="long_paste").set_value(pasted).run()
    assert not at.exception and not at.error  # nothing done wrong yet: the box waits for its text
    assert any("Paste a text" in i.value for i in at.info), [i.value for i in at.info]
    assert not figures(at)


def test_a_pasted_text_is_read():
    at = app("long_text=paste", page=PAGE, timeout=300)
    at.text_area(key="long_paste").set_value("The cat sat on the mat because it was tired. " * 20).run()
    after_loads(at, 300)
    no_errors(at)
    assert titles(at)[0].startswith("random: every layer × head over")
    assert dict(at.query_params) == {"long_text": "paste"}  # the text itself stays out of the link


def test_a_ratio_outside_its_bounds_is_named():
    at = app("long_ratio=1", page=PAGE, timeout=300)
    assert not at.exception
    assert any("long_ratio" in plain(w.value) for w in at.warning), [w.value for w in at.warning]
    assert "long_ratio" not in dict(at.query_params)


def test_an_encoder_gives_way_with_its_reason(tmp_path, monkeypatch):
    hfmodels.save(tmp_path, "bert")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=bert", page=PAGE, timeout=300)
    assert not at.exception and "model" not in dict(at.query_params)
    assert [plain(t.value) for t in at.toast] == [
        "Using random: bert is not a causal language model: it keeps no KV cache to evict."]


def test_the_sweep_runs_in_the_background_with_a_progress_bar(monkeypatch):
    gate, real = threading.Event(), V.long_attention
    monkeypatch.setattr(V, "long_attention", lambda *a, **k: gate.wait(120) and real(*a, **k))
    at = app("long_blocks=17", timeout=60)
    at.switch_page(PAGE).run()  # not app(page=…): that would wait for the job
    assert at.get("progress") and "Reading the text" in at.get("progress")[0].proto.text
    assert not figures(at)
    gate.set()
    after_loads(at, 300)
    no_errors(at)
    assert len(figures(at)) == 4


def test_a_causal_lm_folder_gets_its_cost_and_another_head_reuses_the_sweep(tmp_path, monkeypatch):
    longmodels.save(tmp_path, "llama", 8192)
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=llama&long_text=pride&long_policy=snapkv&long_blocks=32", page=PAGE, timeout=300)
    no_errors(at)
    assert titles(at)[0].startswith("llama: every layer × head over")
    kl, top, lost = (m.value for m in at.get("metric"))
    assert float(kl) >= 0 and top in ("changes", "stays") and lost.endswith("%")
    table = at.dataframe[0].value
    assert len(table) == 2 * 4 and table["lost"].between(0, 1).all()
    assert dict(at.query_params) == {"model": "llama", "long_text": "pride", "long_policy": "snapkv",
                                     "long_blocks": "32"}
    jobs = len(V.JOBS.jobs())
    at.selectbox(key="long_layer").set_value(1).run()
    at.selectbox(key="long_head").set_value(3).run()
    no_errors(at)
    assert titles(at)[1].startswith("layer 1, head 3:") and titles(at)[2].startswith("layer 1, head 3: exact")
    assert len(V.JOBS.jobs()) == jobs and not at.get("progress")  # no new job: the head is not in its key
    assert dict(at.query_params)["long_head"] == "3" and dict(at.query_params)["long_layer"] == "1"
