"""vl_attention on tiny random LLaVA-1.5 and Qwen2-VL / Qwen2.5-VL folders: the text rows against the
model's own eager ``output_attentions``, the tokens and ids, greedy and teacher-forced answers, bad inputs."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from attnviz import limits
from attnviz.analysis.vlattention import vl_attention
from attnviz.models import vlgrid
from attnviz.models.vlm import load_vlm
from tests.support import hfmodels, vlmodels

PICTURE = Image.fromarray((np.random.RandomState(0).rand(70, 100, 3) * 255).astype("uint8"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("vl")
    return {kind: vlmodels.save(base, kind)[0] for kind in vlmodels.KINDS}


def _eager(folder, result):
    """The model's own weights on the result's ids: (layers, H, N, N), its logits (N, V)."""
    vlm = load_vlm(str(folder))
    with torch.no_grad():
        out = vlm.model(input_ids=torch.tensor([result.ids]), **result.pixel_inputs, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]), out.logits[0], vlm


def _close(a, b):
    assert a.shape == b.shape
    assert bool(((a - b).abs() <= 1e-5 * torch.clamp(b.abs(), min=1)).all()), float((a - b).abs().max())


@pytest.mark.parametrize("kind", vlmodels.KINDS)
def test_maps_and_share_are_the_eager_weights_at_the_text_rows_and_image_columns(folders, kind):
    r = vl_attention(str(folders[kind]), PICTURE, "the cat sat", answer="on the mat")
    A, _logits, vlm = _eager(folders[kind], r)
    ids = torch.tensor(r.ids)
    image = torch.nonzero(ids == vlm.image_token_id)[:, 0]
    text = torch.nonzero(ids != vlm.image_token_id)[:, 0]
    assert r.positions == text.tolist()
    rows = A[:, :, text][:, :, :, image]  # (layers, H, T, I)
    views = vlgrid.geometry(vlm.arch, vlm.processor, r.pixel_inputs, r.sizes)
    # Each cell's token (LLaVA-NeXT's newline ending each row of its tiles is none; Idefics3's tiles come first).
    slots = torch.from_numpy(np.concatenate([s.ravel() for s in views.slots]))
    _close(torch.cat([m.flatten(-2) for m in r.maps], -1), rows[..., slots])
    _close(r.image_share, rows.sum(-1))  # the newlines too: every image token
    grids = views.grids
    assert [tuple(m.shape[-2:]) for m in r.maps] == grids and [b.shape[:2] for b in r.boxes] == grids
    assert (kind in ("llava_next", "idefics3", "smolvlm")) is (len(r.maps) == 2) and r.picture_of == [0] * len(r.maps)
    # Every image token is one cell's, once, but the newlines.
    newlines = grids[-1][0] if kind == "llava_next" else 0
    assert len(set(slots.tolist())) == len(slots) and len(slots) == len(image) - newlines
    assert r.maps[0].shape[:2] == (4, 4) and r.heads == 4 and r.layers == 4


@pytest.mark.parametrize("kind", ["llava", "qwen2_vl"])
def test_the_answer_is_teacher_forced_after_the_prompt_ids(folders, kind):
    r = vl_attention(str(folders[kind]), PICTURE, "the cat sat", answer="on the mat")
    vlm = load_vlm(str(folders[kind]))
    answer = vlm.processor.tokenizer("on the mat", add_special_tokens=False)["input_ids"]
    assert r.ids[r.prompt_length:] == answer
    assert r.tokens[-3:] == ["on", "the", "mat"] and "sat" in r.tokens
    assert len(r.tokens) == len(r.ids) - sum(int(m[0, 0, 0].numel()) for m in r.maps)


@pytest.mark.parametrize("kind", ["llava", "qwen2_vl"])
def test_greedy_tokens_are_the_argmax_of_the_models_own_logits(folders, kind):
    r = vl_attention(str(folders[kind]), PICTURE, "the cat sat", generate=4)
    _A, logits, vlm = _eager(folders[kind], r)
    assert len(r.ids) - r.prompt_length == 4
    for i in range(r.prompt_length, len(r.ids)):
        row = logits[i - 1].clone()
        row[vlm.image_token_id] = -float("inf")  # never chosen (it would ask for a picture)
        assert r.ids[i] == int(row.argmax())


def test_two_pictures_each_get_their_own_map(folders):
    r = vl_attention(str(folders["llava"]), [PICTURE, PICTURE.transpose(Image.FLIP_LEFT_RIGHT)],
                     "<image> and <image> the cat", answer="sat")
    A, _l, vlm = _eager(folders["llava"], r)
    ids = torch.tensor(r.ids)
    image = torch.nonzero(ids == vlm.image_token_id)[:, 0]
    rows = A[:, :, torch.tensor(r.positions)][:, :, :, image]
    assert len(r.maps) == 2 and len(r.boxes) == 2
    _close(r.maps[1], rows[..., 16:].reshape(*rows.shape[:3], 4, 4))


def _png(w, h) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h)).save(buf, "PNG") if w * h > 10**6 else PICTURE.resize((w, h)).save(buf, "PNG")
    return buf.getvalue()


def test_bad_inputs_are_refused_with_one_clear_sentence(folders, tmp_path, monkeypatch):
    llava = str(folders["llava"])
    text_lm, _m, _t = hfmodels.save(tmp_path, "llama")
    with pytest.raises(ValueError, match="is a causal language model .*not a vision-language model"):
        vl_attention(str(text_lm), PICTURE, "the cat")
    for arch, words in (("blip-2", "architecture 'blip-2'.*LLaVA-1.5, LLaVA-NeXT"),):
        other = tmp_path / arch
        shutil.copytree(llava, other)
        cfg = json.loads((other / "config.json").read_text())
        (other / "config.json").write_text(json.dumps({**cfg, "model_type": arch}))
        with pytest.raises(ValueError, match=words):
            vl_attention(str(other), PICTURE, "the cat")
    bare = tmp_path / "bare"
    shutil.copytree(llava, bare)
    (bare / "processor_config.json").unlink()
    with pytest.raises(ValueError, match="lacks its processor's files"):
        vl_attention(str(bare), PICTURE, "the cat")
    short = tmp_path / "paligemma-short"  # its processor's settings without image_seq_length
    shutil.copytree(folders["paligemma"], short)
    own = json.loads((short / "processor_config.json").read_text())
    own["image_processor"].pop("image_seq_length")
    (short / "processor_config.json").write_text(json.dumps(own))
    with pytest.raises(ValueError, match=r"lacks image_seq_length.*\(image_size / patch_size\)² = 16"):
        vl_attention(str(short), PICTURE, "the cat")
    with pytest.raises(ValueError, match="No picture"):
        vl_attention(llava, [], "the cat")
    with pytest.raises(ValueError, match="over the bound of 40,000,000 pixels"):
        vl_attention(llava, _png(8000, 6000), "the cat")
    monkeypatch.setattr(limits, "MAX_VL_IMAGE_BYTES", 100)
    with pytest.raises(ValueError, match="MAX_VL_IMAGE_BYTES"):
        vl_attention(llava, _png(64, 64), "the cat")
    monkeypatch.undo()
    with pytest.raises(ValueError, match="not a PNG or JPEG"):
        vl_attention(llava, b"\x89PNG\r\n\x1a\n not really", "the cat")
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "GIF")
    with pytest.raises(ValueError, match="is a GIF image"):
        vl_attention(llava, buf.getvalue(), "the cat")
    with pytest.raises(ValueError, match="corrupt PNG"):
        vl_attention(llava, _png(64, 64)[:60], "the cat")
    with pytest.raises(ValueError, match="2 image placeholders .* for 1 picture"):
        vl_attention(llava, PICTURE, "<image> the <image> cat")
    r = vl_attention(llava, PICTURE, "the cat", answer="sat")
    with pytest.raises(ValueError, match="token must be a whole number from -3 to 2"):
        r.localization_heads(3)
    with pytest.raises(ValueError, match="token must be"):
        r.cam("gradcam", -4)
    with pytest.raises(ValueError, match="kind must be one of gradcam, agcam"):
        r.cam("rollout")


@pytest.mark.parametrize("kind", ["paligemma", "gemma3"])
def test_an_answer_token_never_sees_a_later_one_where_the_prompt_attends_both_ways(folders, kind):
    """The answer's token types are those the model's own generate gives (PaliGemma: its suffix, 1; Gemma 3: text,
    0): teacher-forced, an answer token attends causally, as it did when it was generated. PaliGemma's prefix (the
    picture and the prompt) attends both ways; Gemma 3's picture attends both ways within itself only."""
    r = vl_attention(str(folders[kind]), PICTURE, "the cat sat", answer="on the mat")
    A, _logits, vlm = _eager(folders[kind], r)  # (layers, H, N, N), with the types vl_attention ran
    first = r.prompt_length  # the answer's first position
    for t in range(first, len(r.ids) - 1):
        assert float(A[:, :, t, t + 1:].abs().max()) == 0.0  # nothing after itself
    image = torch.nonzero(torch.tensor(r.ids) == vlm.image_token_id)[:, 0]
    last_prompt = first - 1
    sees_ahead = float(A[:, :, image[0], image[-1]].abs().max())  # the picture's first token on its last
    assert sees_ahead > 0  # the picture attends both ways (both models)
    if kind == "paligemma":
        assert float(A[:, :, image[-1] + 1, last_prompt].abs().max()) > 0  # the prompt too: its prefix
    else:
        assert float(A[:, :, image[-1] + 2, last_prompt].abs().max()) == 0.0  # Gemma 3's text is causal


def test_a_question_is_asked_in_the_models_own_chat_template(folders):
    from attnviz.models.vlm import chat_prompt

    vlm = load_vlm(str(folders["llava"]))
    assert chat_prompt(vlm, "the cat") == "the cat"  # no template: the question as it is
    template = ("{% for m in messages %}USER: {% for c in m['content'] %}{% if c['type'] == 'image' %}<image>\n"
                "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %} ASSISTANT:")
    before = vlm.processor.chat_template
    vlm.processor.chat_template = template  # LLaVA-1.5's own, in short
    try:
        assert chat_prompt(vlm, "the cat") == "USER: <image>\nthe cat ASSISTANT:"
        assert chat_prompt(vlm, "<image> the cat") == "<image> the cat"  # placed by hand: left as it is
    finally:
        vlm.processor.chat_template = before
