"""The vision-language page (app_pages/vision_language.py) through AppTest: it opens on the model that learns to
look (the session's training), asks the built-in picture's own question, draws the training, the probe's look at a
checkpoint, the answer's overlay from the model's own weights and the share map; a link restores the picture,
token, layer and head; a vision-language folder answers in a background job and shows its tower's attention; bad
input (a corrupt upload, a token out of range, a model that sees no picture) is a message, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.learn import shapes as S
from attnviz.learn.look import load_looking, look_attention
from attnviz.learn.worker import runs_dir
from attnviz.views import visionlang as V
from tests.support import uploads, vlmodels
from tests.support.apphelp import after_loads, app, figures, no_errors, shown, warnings_shown, z

PAGE = "app_pages/vision_language.py"


@pytest.fixture(autouse=True)
def trained(looked_default, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(looked_default["dir"]))  # the session's trainings


def _titles(at) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(at)]


def _overlay(at) -> dict:
    return next(f for f in figures(at) if "the picture, layer" in f["layout"]["title"]["text"])


def test_it_opens_on_the_model_that_learns_to_look_and_draws_its_own_weights(looked_default):
    at = app(page=PAGE, timeout=120)
    no_errors(at)
    q = dict(at.query_params)
    pixels, question = S.built_in("shapes-1")
    assert q["model"] == "learns-to-look" and q["text"] == question
    titles = _titles(at)
    assert titles[0].startswith("“?” → the picture, layer") and "the share of its attention" in titles[1]
    assert "as it learns" in titles[2] and titles[3].startswith("Step 1200: where “?” looks")
    model = load_looking(runs_dir() / f"{looked_default['key']}.safetensors")
    r = look_attention(model, pixels, question)
    layer = r.localization_heads(-1, max_keep=1)[0][0]
    heat = [t for t in _overlay(at)["data"] if t["type"] == "heatmap"]
    for h in range(r.heads):
        np.testing.assert_allclose(z(heat[1 + h]).reshape(S.GRID, S.GRID), r.maps[0][layer, h, -1].numpy(),
                                   rtol=1e-5, atol=1e-7)
    assert any(f"→ {r.answer}" in shown(m.value) for m in at.markdown)
    last = looked_default["record"]["checkpoints"][-1]
    assert any(f"correct answers {last['accuracy']:.0%}" in c.value for c in at.caption)


def test_a_link_restores_the_picture_token_layer_and_head():
    at = app("vl_picture=shapes-3&token=6&vl_layer=0&vl_head=2", page=PAGE, timeout=120)
    no_errors(at)
    q = dict(at.query_params)
    assert q["vl_picture"] == "shapes-3" and q["vl_layer"] == "0" and q["vl_head"] == "2"
    assert at.segmented_control(key="token").value == -1  # the last token
    assert q["text"] == S.built_in("shapes-3")[1]  # its own question
    titles = _titles(at)
    assert titles[0].startswith("“?” → the picture, layer 0") and any("head L0 H2" in t for t in titles)
    at2 = app("vl_picture=shapes-3&token=2&vl_layer=1", page=PAGE, timeout=120)
    assert dict(at2.query_params)["token"] == "2" and _titles(at2)[0].startswith("“colour” → the picture, layer 1")


def test_bad_input_is_a_message(monkeypatch):
    at = app("token=40", page=PAGE, timeout=120)
    assert any("Token 40 is out of range" in w for w in warnings_shown(at))
    at = app("vl_layer=9", page=PAGE, timeout=120)
    assert not at.exception and any("Layer 9 is out of range" in shown(e.value) for e in at.error)
    uploads.upload(monkeypatch, b"\x89PNG\r\n\x1a\n broken", "x.png")
    at = app("vl_picture=upload", page=PAGE, timeout=120)
    assert not at.exception and any("not a PNG or JPEG" in shown(e.value) for e in at.error)
    at = app("model=random", page=PAGE, timeout=120)  # a model that sees no picture: the page's own instead
    no_errors(at)
    assert dict(at.query_params)["model"] == "learns-to-look"


def test_a_folder_answers_in_the_background_and_shows_its_towers_attention(tmp_path, monkeypatch):
    folder = vlmodels.save(tmp_path, "llava")[0]
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(folder.parent))
    at = app("vl_generate=2", page=PAGE, timeout=120)
    at.sidebar.selectbox(key="model").set_value(folder.name).run()  # (AppTest opens the explorer first, which
    at.sidebar.text_area(key="text").set_value("the cat").run()  # offers no vision-language folder)
    at = after_loads(at, 120)
    no_errors(at)
    assert dict(at.query_params)["model"] == folder.name
    titles = _titles(at)
    assert titles[0].startswith("“") and any("CLIP vision tower's own attention" in t for t in titles)
    assert not any("as it learns" in t for t in titles)  # no training for a folder


def test_on_a_projector_a_long_readings_token_is_picked_from_a_list_and_a_short_ones_from_buttons(tmp_path,
                                                                                                monkeypatch):
    """An Idefics3 reading (its tile marks among the text tokens) in presenter mode: a list, so the picture stays on
    the first screen; off a projector, the buttons."""
    folder = vlmodels.save(tmp_path, "idefics3")[0]
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(folder.parent))
    at = app("vl_generate=1", page=PAGE, timeout=120)
    at.sidebar.selectbox(key="model").set_value(folder.name).run()
    at.sidebar.text_area(key="text").set_value("the cat").run()
    at = after_loads(at, 120)
    no_errors(at)
    assert len(at.button_group(key="token").options) > V.PICKER_BUTTONS  # a row of buttons for each token
    at.sidebar.toggle(key="present").set_value(True).run()
    at = after_loads(at, 120)
    no_errors(at)
    assert [w.key for w in at.selectbox if w.key == "token"] == ["token"] and not at.button_group
