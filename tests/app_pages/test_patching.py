"""The Patching page (app_pages/patching.py) through AppTest: the default link on the model Watch
it learn trains draws every picture with its definition; a link reopens its chosen head; the
sweep runs in the background with a progress bar; bad prompts and tokens get a message."""

from __future__ import annotations

import threading

import pytest

from attnviz import limits
from attnviz.models import registry as R
from attnviz.plots.style import plain_label
from attnviz.views import patching as V
from tests.support import hfmodels
from tests.support.apphelp import after_loads, app, figures

PAGE = "app_pages/patching.py"
TITLES = ["each head patched from the clean run: the share of the answer it brings back",
          "L1 H0 on the clean prompt", "L1 H0 on the corrupted prompt", "clean − corrupted",
          "the residual stream into each layer patched at one position",
          "each head's direct logit attribution, in logits"]


def plain(markdown: str) -> str:
    """Markdown as it reads: the page escapes user text (attnviz.views.markdown)."""
    return markdown.replace("\\", "").replace("\u200b", "")


@pytest.fixture(autouse=True)
def trained(learned_defaults, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model


def test_the_default_link_draws_every_picture_and_says_the_definition():
    at = app(page=PAGE, timeout=120)
    assert not at.exception and not at.error
    assert [f["layout"]["title"]["text"] for f in figures(at)] == TITLES
    assert [h.value for h in at.subheader] == ["Head L1 H0: it brings back 0.97 of the answer"]
    # each panel's rows and columns are its own prompt's tokens, where the two differ (28 and 12 swapped)
    clean, corrupted = (f["data"][0] for f in figures(at)[1:3])
    assert [plain_label(t) for t in clean["y"]] == at.text_input(key="clean").value.split()
    assert [plain_label(t) for t in corrupted["x"]] == at.text_input(key="corrupted").value.split()
    assert clean["y"] != corrupted["y"]
    assert any("(patched − corrupted) / (clean − corrupted)" in c.value for c in at.caption)
    assert any("**28**" in c.value and "**12**" in c.value for c in at.caption)  # the tokens that differ
    assert not at.toast  # the explorer's random model, left for this page's first: nothing to say
    q = at.query_params
    # The page's model (its first causal one) differs from the random default; the prompts, tokens and
    # head are the defaults, which a link leaves out.
    assert dict(q) == {"model": "watch-it-learn"}


def test_a_link_reopens_its_head_and_its_prompts():
    at = app("model=watch-it-learn&patched=0.1&answer=25&wrong=", page=PAGE, timeout=120)
    assert not at.exception and not at.error
    assert at.subheader[0].value.startswith("Head L0 H1")
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert "L0 H1 on the clean prompt" in titles and "each head's direct logit attribution, in logits" not in titles
    assert any("needs a wrong token" in c.value for c in at.caption)
    assert any("log p(answer)" in plain(c.value) for c in at.caption)


def test_picking_the_answer_from_the_top_next_tokens():
    at = app(page=PAGE, timeout=120)
    pick = at.selectbox(key="answer_pick")
    assert "12" in pick.options[0]  # the clean prompt's likeliest next token first
    pick.select_index(1).run()
    after_loads(at, 120)
    assert at.text_input(key="answer").value == pick.options[1].split()[0]


def test_the_sweep_runs_in_the_background_with_a_progress_bar(monkeypatch):
    gate, real = threading.Event(), V.run_of
    monkeypatch.setattr(
        V, "run_of", lambda state, progress=None, step=None: gate.wait(60) and real(state, progress, step))
    at = app("answer=9&wrong=20", timeout=60)
    at.switch_page(PAGE).run()
    assert at.get("progress") and "Patching every head" in at.get("progress")[0].proto.text
    gate.set()
    after_loads(at, 120)
    assert not at.get("progress") and len(figures(at)) == len(TITLES)


@pytest.mark.parametrize("query, words", [
    ("corrupted=BOS 10 12", "The clean prompt has 19 tokens and the corrupted one 3"),
    ("answer=99", "“99” is not one of watch-it-learn's tokens"),
])
def test_a_pair_the_model_cannot_read_falls_back_with_a_warning_and_the_page_stays_whole(query, words):
    """The warning says why; the page shows the model's example pair's sweep, every chart of it; the field keeps
    what was typed, to be mended there."""
    at = app(query, page=PAGE, timeout=120)
    assert not at.exception and not at.error
    shown = [plain(w.value) for w in at.warning]
    assert any(words in m for m in shown), shown
    assert len(figures(at)) == len(TITLES)
    name, value = query.split("=")
    assert at.session_state[name] == value


def test_prompts_that_change_nothing_get_the_sweeps_message():
    at = app("corrupted=BOS 10 28 11 18 27 9 20 25 8 12 4 13 15 27 9 20 25 8", page=PAGE, timeout=120)
    assert not at.exception
    shown = [plain(e.value) for e in at.error] + [plain(i.value) for i in at.info]
    assert any("give the same logit difference" in m for m in shown), shown
    assert not figures(at)


def test_a_prompt_over_patchings_bound_gets_its_message(tmp_path, monkeypatch):
    hfmodels.reading(hfmodels.save(tmp_path, "llama")[0], 4 * limits.MAX_PATCH_TOKENS)
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    words = "the+" * limits.MAX_PATCH_TOKENS
    at = app(f"model=llama&clean={words}cat&corrupted={words}mat&answer=it", page=PAGE, timeout=120)
    after_loads(at, 120)
    assert not at.exception
    shown = [plain(w.value) for w in at.warning]  # the fields as typed; this folder reads no example pair of its own
    assert any(f"patching takes at most {limits.MAX_PATCH_TOKENS}" in m for m in shown), shown
    assert not at.error and not figures(at)


def test_a_model_with_no_next_token_gives_way_with_its_reason(tmp_path, monkeypatch):
    hfmodels.save(tmp_path, "bert")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=bert", page=PAGE, timeout=120)
    assert not at.exception and not at.error and at.query_params["model"] == "watch-it-learn"
    assert [plain(t.value) for t in at.toast] == [
        "Using watch-it-learn: bert has no next token to patch toward."]
