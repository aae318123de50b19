"""The vision-language page's library (``attnviz.views.visionlang``): its built-in pictures and their questions, the
pictures each model is shown, the token, layer and head a link opens (bounds from the reading), the overlay's
panels drawn from the reading's own maps (the sinks left out of the colour scale), presenter mode's two panels,
and ``render --page vision-language``: its numbers on a LLaVA folder, its figures, every bad input as one line and
exit code 2."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from attnviz.analysis.vlattention import VLAttention, vl_attention
from attnviz.analysis.vltower import tower_attention, visual_sinks
from attnviz.inputs.text import DEFAULT_TEXT
from attnviz.learn import shapes as S
from attnviz.models.vlm import load_vlm
from attnviz.plots.style import FigureStyle
from attnviz.views import visionlang as V
from attnviz.views.state import ViewState
from tests.support import hfmodels, vlmodels
from tests.support.apphelp import z
from tests.support.clirun import run_cli


def _reading(layers: int = 2, heads: int = 3, tokens: int = 4, rows: int = 3, cols: int = 4,
             seed: int = 0) -> VLAttention:
    """A reading made by hand: each token's rows over the picture from a seeded softmax, given 0.6 of its attention."""
    g = torch.Generator().manual_seed(seed)
    maps = torch.softmax(torch.randn(layers, heads, tokens, rows * cols, generator=g) * 2, -1) * 0.6
    edges_x, edges_y = np.arange(cols + 1) * 10.0, np.arange(rows + 1) * 10.0
    boxes = np.stack(np.broadcast_arrays(edges_x[None, :-1], edges_y[:-1, None], edges_x[None, 1:],
                                         edges_y[1:, None]), -1)
    return VLAttention("hand", "hand", [f"t{i}" for i in range(tokens)], list(range(tokens + rows * cols)), tokens,
                       list(range(tokens)), [maps.reshape(layers, heads, tokens, rows, cols)], maps.sum(-1), [boxes],
                       [(cols * 10, rows * 10)])


PICTURE = np.zeros((30, 40, 3), np.uint8)


def test_built_in_pictures_are_the_same_every_time_and_ask_about_a_shape_they_hold():
    a, qa = S.built_in("shapes-3")
    b, qb = S.built_in("shapes-3")
    assert (a == b).all() and qa == qb and a.shape == (S.SIDE, S.SIDE, 3) and a.dtype == np.uint8
    assert len({S.built_in(n)[1] for n in S.BUILT_IN} | {S.built_in(n)[0].tobytes() for n in S.BUILT_IN}) > 8
    for name in S.BUILT_IN:
        _pixels, question = S.built_in(name)
        assert all(w in S.TOKEN for w in question.split()) and len(question.split()) == S.QUESTION_LENGTH - 1
    with pytest.raises(ValueError, match="shapes-1"):
        S.built_in("shapes-99")


def test_each_model_is_shown_the_picture_its_way_and_a_missing_or_bad_upload_is_a_message():
    tiny = V.picture_for("learns-to-look", V.Settings(picture="shapes-2"), None)
    assert (tiny == S.built_in("shapes-2")[0]).all()
    big = V.picture_for("some-folder", V.Settings(picture="shapes-2"), None)
    assert big.shape == (S.SIDE * V.ENLARGE, S.SIDE * V.ENLARGE, 3) and (big[::V.ENLARGE, ::V.ENLARGE] == tiny).all()
    buf = io.BytesIO()
    Image.fromarray(np.full((50, 70, 3), 200, np.uint8)).save(buf, "PNG")
    own = V.picture_for("learns-to-look", V.Settings(picture=V.UPLOAD), buf.getvalue())
    assert own.shape == (S.SIDE, S.SIDE, 3) and int(own[5, 5, 0]) == 200  # the tiny model sees it at its size
    with pytest.raises(ValueError, match="No picture was given"):
        V.picture_for("learns-to-look", V.Settings(picture=V.UPLOAD), None)
    with pytest.raises(ValueError, match="not a PNG or JPEG"):
        V.picture_for("learns-to-look", V.Settings(picture=V.UPLOAD), b"GIF89a....")


def test_the_question_follows_the_built_in_picture_until_the_user_writes_one():
    s = ViewState()
    assert s.text == DEFAULT_TEXT and V.example_text(s) == S.built_in(s.vl.picture)[1]
    moved = s.with_(text=S.built_in("shapes-1")[1], vl_picture="shapes-4")
    assert V.example_text(moved) == S.built_in("shapes-4")[1]
    assert V.example_text(s.with_(text="what colour is the square ?")) is None  # the user's own words
    assert V.question_of(s.with_(text="what colour is the square ?")) == "what colour is the square ?"


def test_a_link_opens_a_token_layer_and_head_within_the_readings_own_bounds():
    r = _reading()
    t, layer, head = V.opened(r, V.Settings())
    assert t == 3 and head is None and layer == r.localization_heads(3, max_keep=1)[0][0]
    assert V.opened(r, V.Settings(token=1, layer=0, head=2)) == (1, 0, 2)
    with pytest.raises(ValueError, match="layers 0 to 1"):
        V.opened(r, V.Settings(layer=2))
    with pytest.raises(ValueError, match="heads 0 to 2"):
        V.opened(r, V.Settings(head=3))
    with pytest.raises(ValueError, match="from -4 to 3"):
        V.opened(r, V.Settings(token=4))
    assert V.token_options(r) == [0, 1, 2, -1]
    assert V.token_shown(r, 3) == (-1, None) and V.token_shown(r, -2) == (2, None)
    shown, warning = V.token_shown(r, 9)
    assert shown == -1 and "out of range" in warning


def test_the_overlay_draws_the_readings_own_weights_and_leaves_sinks_out_of_its_scale():
    r = _reading()
    r.maps[0][1, :, :, 2, 1] += 1.0  # a sink in layer 1: every head, every token
    settings = V.Settings(token=2, layer=1)
    fig = V.look_overlay(r, PICTURE, settings, FigureStyle()).to_plotly_json()
    heat = [tr for tr in fig["data"] if tr["type"] == "heatmap"]
    want = r.maps[0][1, :, 2].numpy()  # (H, rows, cols)
    assert len(heat) == 1 + r.heads
    np.testing.assert_allclose(z(heat[0]).reshape(3, 4), want.mean(0), rtol=1e-6)
    for h in range(r.heads):
        np.testing.assert_allclose(z(heat[1 + h]).reshape(3, 4), want[h], rtol=1e-6)
    sinks = visual_sinks(r.maps[0][1])
    assert sinks[2, 1] and int(sinks.sum()) == 1
    top = fig["layout"]["coloraxis"]["cmax"]
    assert top == pytest.approx(max(float(p[~sinks].max()) for p in [want.mean(0), *want]), rel=1e-6)
    assert top < float(want[:, 2, 1].max())  # the sink's weight is over the scale's end
    outlined = [s for s in fig["layout"]["shapes"] if s["xref"] == "x" and s["line"].get("dash") == "dot"]
    assert [(s["x0"], s["y0"]) for s in outlined] == [(10.0, 20.0)]  # its box, in the picture's pixels
    frames = [s for s in fig["layout"]["shapes"] if s["line"].get("dash") is None]  # each panel's picture, framed
    H, W = PICTURE.shape[:2]
    assert len(frames) == 1 + r.heads and all((f["x0"], f["y0"], f["x1"], f["y1"]) == (0, 0, W, H) for f in frames)
    both = V.look_overlay(r, PICTURE, replace(settings, sinks=False), FigureStyle()).to_plotly_json()
    assert both["layout"]["coloraxis"]["cmax"] == pytest.approx(float(want[:, 2, 1].max()), rel=1e-6)


def test_on_a_projector_the_overlay_is_the_mean_and_one_head_on_one_screen():
    r = _reading(heads=4)
    style = FigureStyle(font_size=20)  # presenter mode's
    fig = V.look_overlay(r, PICTURE, V.Settings(layer=0), style).to_plotly_json()
    names = [a["text"] for a in fig["layout"]["annotations"]]
    best = next(h for lay, h in r.localization_heads(3, max_keep=None) if lay == 0)
    assert names == ["mean over heads", f"head {best}"] and fig["layout"]["height"] <= 420
    opened = V.look_overlay(r, PICTURE, V.Settings(layer=0, head=(best + 1) % 4), style).to_plotly_json()
    assert [a["text"] for a in opened["layout"]["annotations"]][1] == f"head {(best + 1) % 4}"


def test_the_share_map_marks_the_localization_heads_and_a_click_opens_a_head():
    r = _reading()
    fig = V.share_figure(r, V.Settings(token=1), FigureStyle()).to_plotly_json()
    heat, clicks = fig["data"]
    np.testing.assert_allclose(z(heat).reshape(2, 3), r.image_share[:, :, 1].numpy(), rtol=1e-6)
    marked = [(round(s["y0"] + 0.5), round(s["x0"] + 0.5)) for s in fig["layout"]["shapes"]]
    assert marked == [tuple(x) for x in r.localization_heads(1)]
    assert V.clicked_grid_cell({"customdata": 4}, r.heads) == (1, 1) and V.clicked_grid_cell({"x": 1}, r.heads) is None


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return vlmodels.save(tmp_path_factory.mktemp("vl-page"), "llava")[0]


def test_render_writes_every_number_the_page_draws_for_a_folder(llava, tmp_path):
    code, _out, err = run_cli("render", "--page", "vision-language", "--model", llava, "--text", "the cat",
                              "--token", "-2", "--vl-generate", "2", "--out", tmp_path / "x.json")
    assert code == 0, err
    d = json.loads((tmp_path / "x.json").read_text(encoding="utf-8"))
    big = S.built_in("shapes-1")[0].repeat(V.ENLARGE, 0).repeat(V.ENLARGE, 1)
    vlm = load_vlm(str(llava))
    r = vl_attention(vlm, big, "the cat", generate=2)
    assert d["tokens"] == r.tokens and d["ids"] == r.ids and d["token"] == len(r.tokens) - 2
    np.testing.assert_allclose(np.array(d["maps"]), r.maps[0][:, :, -2].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.array(d["image_share"]), r.image_share.numpy(), rtol=1e-5, atol=1e-7)
    assert d["localization_heads"] == [list(x) for x in r.localization_heads(-2)]
    row, kind, layer = tower_attention(vlm, r.pixel_inputs["pixel_values"][:1])
    assert d["tower"]["kind"] == kind == "CLIP" and d["tower"]["layer"] == layer
    np.testing.assert_allclose(np.array(d["tower"]["map"]), row, rtol=1e-5)
    assert d["picture_size"] == [big.shape[0], big.shape[1]] and d["model"] == str(llava)
    code, _out, err = run_cli("render", "--page", "vision-language", "--model", llava, "--text", "the cat",
                              "--vl-generate", "1", "--vl-head", "1", "--out", tmp_path / "x.html")
    html = (tmp_path / "x.html").read_text(encoding="utf-8")
    assert code == 0 and html.count("plotly-graph-div") >= 4, err  # overlay, share map, the opened head, tower


def test_an_idefics3_folder_renders_its_tiles_and_its_towers_global_view(tmp_path):
    folder = vlmodels.save(tmp_path, "smolvlm")[0]
    code, _out, err = run_cli("render", "--page", "vision-language", "--model", folder, "--text", "the cat",
                              "--vl-generate", "1", "--out", tmp_path / "x.json")
    assert code == 0, err
    d = json.loads((tmp_path / "x.json").read_text(encoding="utf-8"))
    big = S.built_in("shapes-1")[0].repeat(V.ENLARGE, 0).repeat(V.ENLARGE, 1)
    vlm = load_vlm(str(folder))
    r = vl_attention(vlm, big, "the cat", generate=1)
    assert len(r.maps) == 2 and d["view"] == 1  # the whole picture, then the tiles: the tiles are drawn
    np.testing.assert_allclose(np.array(d["maps"]), r.maps[1][:, :, -1].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.array(d["boxes"]), r.boxes[1])
    row, kind, _layer = tower_attention(vlm, r.pixel_inputs["pixel_values"])
    assert d["tower"]["kind"] == kind == "SigLIP" and np.array(d["tower"]["map"]).shape == r.maps[0].shape[-2:]
    np.testing.assert_allclose(np.array(d["tower"]["map"]), row, rtol=1e-5)


def test_every_bad_input_is_one_line_and_exit_code_2(llava, tmp_path, looked_default, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(looked_default["dir"]))
    gpt2 = hfmodels.save(tmp_path, "gpt2")[0]
    other = tmp_path / "blip"
    shutil.copytree(llava, other)
    (other / "config.json").write_text(json.dumps({**json.loads((llava / "config.json").read_text()),
                                                   "model_type": "blip-2"}))
    bare = tmp_path / "bare"
    shutil.copytree(llava, bare)
    (bare / "processor_config.json").unlink(missing_ok=True)
    (bare / "preprocessor_config.json").unlink(missing_ok=True)
    gif = tmp_path / "x.gif"
    Image.new("RGB", (8, 8)).save(gif, "GIF")
    cases = [
        (("--model", gpt2), "is not a vision-language model"),
        (("--model", other), "architecture 'blip-2', which vl_attention does not know: it reads LLaVA-1.5, LLaVA-NeXT"),
        (("--model", bare), "lacks its processor's files"),
        (("--vl-picture", "upload"), "No picture was given"),
        (("--image", gif), "is a GIF image"),
        (("--model", llava, "--text", "<image> <image> two?"), "2 image placeholders"),
        (("--token", "40"), "token must be a whole number from -7 to 6"),
        (("--vl-layer", "7"), "Layer 7 is out of range"),
        (("--text", "what is this"), "'this' is not a word the model knows"),
    ]
    for args, words in cases:
        code, out, err = run_cli("render", "--page", "vision-language", *args, "--out", tmp_path / "o.json")
        assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err, (args, err)
        assert not (tmp_path / "o.json").exists()
