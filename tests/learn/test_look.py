"""The tiny vision-language model that learns to look (attnviz.learn.shapes, attnviz.models.tinyvl,
attnviz.learn.look): the pictures hold what the questions ask about, where they say; a patch is where the
grid puts it; the trained model answers held-out questions and its best head looks at the shape asked about,
while the control trained on empty pictures guesses and finds nothing; the same seed trains the same model."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
import torch

import attnviz
from attnviz.learn import look as K
from attnviz.learn import shapes as S
from attnviz.models.tinyvl import patches_of


def test_each_question_names_a_shape_in_the_picture_at_its_cell_and_its_answer_is_that_shapes():
    b = S.pictures(64, torch.Generator().manual_seed(3))
    colours = {name: torch.tensor(rgb, dtype=torch.float32) / 255 for name, rgb in S.COLOURS.items()}
    kinds = set()
    for i in range(64):
        words = [S.WORDS[t] for t in b.ids[i].tolist()]
        r, c = divmod(int(b.cell[i]), S.GRID)
        patch = b.pixels[i, :, r * S.PATCH:(r + 1) * S.PATCH, c * S.PATCH:(c + 1) * S.PATCH]  # (3, p, p)
        painted = [name for name, rgb in colours.items() if (patch == rgb.view(3, 1, 1)).all(0).any()]
        assert len(painted) == 1  # one shape, of one colour, in the named cell
        shape = next(k for k, t in zip(S.SHAPES, S.TEMPLATES, strict=True)
                     if ((patch == colours[painted[0]].view(3, 1, 1)).all(0) == t).all())
        answer = S.WORDS[int(b.answer[i])]
        kinds.add(b.kind[i])
        if b.kind[i] == "colour":
            assert words[5] == shape and answer == painted[0]
        elif b.kind[i] == "shape":
            assert words[5] == painted[0] and answer == shape
        else:
            assert words[5] == shape and answer == S.CELLS[r * S.GRID + c]
    assert kinds == set(S.QUESTIONS)
    again = S.pictures(64, torch.Generator().manual_seed(3))
    assert torch.equal(again.pixels, b.pixels) and torch.equal(again.ids, b.ids)
    blank = S.pictures(8, torch.Generator().manual_seed(3), blank=True)
    assert (blank.pixels == blank.pixels[:, :, :1, :1]).all()  # nothing drawn: the plain ground only


def test_a_patch_is_where_the_grid_puts_it():
    pixels = torch.zeros(1, 3, S.SIDE, S.SIDE)
    pixels[0, 1, 2 * S.PATCH:3 * S.PATCH, 1 * S.PATCH:2 * S.PATCH] = 1.0  # row 2, column 1 lit in green
    p = patches_of(pixels, S.PATCH)  # (1, 16, 192)
    assert p.shape == (1, S.GRID * S.GRID, 3 * S.PATCH * S.PATCH)
    assert torch.nonzero(p[0].sum(-1)).flatten().tolist() == [2 * S.GRID + 1]
    assert S.CELLS[2 * S.GRID + 1] == "b3"


def test_the_same_seed_trains_the_same_model_and_steps_are_checked():
    a = K.train_look(seed=1, steps=20, every=10)
    b = K.train_look(seed=1, steps=20, every=10)
    assert [c["accuracy"] for c in a["checkpoints"]] == [c["accuracy"] for c in b["checkpoints"]]
    assert [c["shares"] for c in a["checkpoints"]] == [c["shares"] for c in b["checkpoints"]]
    with pytest.raises(ValueError, match="steps must be a whole number"):
        K.train_look(steps=True)


@pytest.fixture(scope="module")
def trained(looked_default):
    """The default training, as the app's worker trains it (one thread; once per test run, shared with the
    vision-language page's tests)."""
    from safetensors.torch import load_file

    record = dict(looked_default["record"])
    record["_model"] = load_file(str(looked_default["dir"] / f"{looked_default['key']}.safetensors"))
    return record


def test_a_worker_process_trains_the_same_numbers_and_its_weights_load(tmp_path, monkeypatch):
    from attnviz.learn.train import LearnSettings
    from attnviz.learn.worker import Trainings, key_of

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    s = K.LookSettings(steps=100, seed=3)
    assert key_of(s) != key_of(s.control()) and key_of(s) != key_of(LearnSettings(steps=100, seed=3))
    runs = Trainings()
    key = runs.start(s)
    deadline = time.monotonic() + 120
    while not runs.progress(key).done and time.monotonic() < deadline:
        time.sleep(0.5)
    p = runs.progress(key)
    assert p.status == "done" and [c["step"] for c in p.checkpoints] == [0, 100]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the worker's one thread: the same sums in the same order
    try:
        here = K.train_settings(s)
    finally:
        torch.set_num_threads(threads)
    assert [c["shares"] for c in p.record["checkpoints"]] == [c["shares"] for c in here["checkpoints"]]
    assert p.record["probe"] == K.probe_record(3)
    model = K.load_looking(runs.weights_file(key))
    r = K.look_attention(model, *S.built_in("shapes-2"))
    assert r.answer in S.WORDS and r.maps[0].shape == (2, 4, S.QUESTION_LENGTH, S.GRID, S.GRID)


def trained_model(record):
    return record["_model"]


def test_the_model_learns_to_answer_and_its_best_head_looks_at_the_shape_asked_about(trained):
    last = trained["checkpoints"][-1]
    assert trained["status"] == "done" and last["step"] == K.limits.LOOK_STEPS
    assert last["accuracy"] >= 0.9, last["accuracy"]  # held-out pictures
    assert last["best"]["share"] >= 0.5, last["best"]  # of the answer position's attention on the picture
    first = trained["checkpoints"][0]
    # At first it answers nothing, and no head looks at the shape asked about more than at any shape (three in
    # a picture: a head drawn to shapes gives the named one about a third of its attention).
    assert first["accuracy"] < 0.2 and first["best"]["share"] < 0.35, first


def test_each_checkpoint_keeps_the_probes_map_and_the_last_is_on_the_shape_asked_about(trained):
    probe, first, last = trained["probe"], trained["checkpoints"][0], trained["checkpoints"][-1]
    layer, head, cell = last["best"]["layer"], last["best"]["head"], probe["cell"]

    def on_cell(c):  # the best head's share of the answer position's image attention on the named shape
        m = torch.tensor(c["probe_maps"][layer][head]).flatten()  # (GRID²,)
        return float(m[cell] / m.sum())

    # One picture: at step 0 a random head drawn to shapes may happen on the named one (the held-out mean above
    # says it does not in general); at the end the best head is on it.
    assert on_cell(last) > 0.5, (on_cell(first), on_cell(last))
    assert len(first["probe_maps"]) == 2 and len(first["probe_maps"][0]) == 4  # layers × heads × GRID × GRID
    assert probe["words"][0] == "BOS" and len(probe["words"]) == S.QUESTION_LENGTH


def test_look_attention_reads_the_models_own_weights_as_vl_attention_does(trained):
    model = K.looking_model()
    model.load_state_dict(trained_model(trained))
    probe = K.probe_of(0)
    words = [S.WORDS[t] for t in probe.ids[0].tolist()]
    r = K.look_attention(model, probe.pixels[0], " ".join(words[1:]))
    with torch.no_grad():
        logits, weights = model(probe.pixels, probe.ids)
    assert r.tokens == words and r.answer == S.WORDS[int(logits.argmax())]
    cols = model.image_columns
    for layer, w in enumerate(weights):  # the last word's row, and a word's before the picture
        assert torch.equal(r.maps[0][layer, :, -1].flatten(1), w[0, :, -1, cols])
        assert torch.equal(r.maps[0][layer, :, 2].flatten(1), w[0, :, 2, cols])
    np.testing.assert_array_equal(r.boxes[0][1, 2], [16, 8, 24, 16])  # row 1, column 2: 8-pixel cells
    fig = attnviz.vl_view(r, (probe.pixels[0].permute(1, 2, 0) * 255).round().byte().numpy(), layer=1)
    assert np.allclose(np.asarray(fig.data[1].z), r.maps[0][1, 0, -1].numpy())
    with pytest.raises(ValueError, match="is not a word the model knows"):
        K.look_attention(model, probe.pixels[0], "what colour is the dog ?")
    with pytest.raises(ValueError, match="must be 32 × 32 pixels"):
        K.look_attention(model, torch.zeros(3, 16, 16), " ".join(words[1:]))


def test_the_tiny_readings_cams_are_its_own_answers_gradient_times_its_attention(trained):
    """The documented ``r.cam("gradcam", token=-2)`` on the tiny model: relu(∂loss/∂A) · A, the loss its own
    answer's, as vl-saliency's CAMs; the last layer's rows but the last carry no gradient (the answer is read at
    the last word only), and AG-CAM has the same support with sigmoid(A). A read-only picture warns of nothing."""
    model = K.looking_model()
    model.load_state_dict(trained_model(trained))
    pixels, question = S.built_in("shapes-1")
    frozen = np.frombuffer(pixels.tobytes(), np.uint8).reshape(pixels.shape)  # read-only, as a decoded upload
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = K.look_attention(model, frozen, question)
    grad, agcam = r.cam("gradcam", token=-2), r.cam("agcam", token=-2)
    assert grad.shape == agcam.shape == (2, 4, S.GRID, S.GRID)
    last = r.cam("gradcam", token=-1)
    assert float(last[1].abs().sum()) > 0 and float(grad[1].abs().sum()) == 0  # layer 1: the last row only
    g = r._grads[0][:, :, -1]
    torch.testing.assert_close(last, torch.relu(g) * r.maps[0][:, :, -1])
    torch.testing.assert_close(r.cam("agcam"), torch.relu(g) * torch.sigmoid(r.maps[0][:, :, -1]))
    x = torch.as_tensor(pixels).permute(2, 0, 1).float()[None] / 255
    ids = K._question_ids(question)
    out, ws = model(x, ids)
    loss = torch.nn.functional.cross_entropy(out, out.argmax(-1))
    direct = torch.autograd.grad(loss, ws[0])[0][0, :, ids.shape[1] - 1 + model.patches]  # the last word's row
    torch.testing.assert_close(g[0].flatten(1), direct[:, model.image_columns])  # layer 0's last row, by hand


def test_a_training_stopped_by_a_clock_warns_and_a_library_call_has_no_clock_unless_asked(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MAX_LEARN_SECONDS", "0.001")  # the app's clock: a library call ignores it
    assert K.train_look(seed=0, steps=2 * K.limits.LOOK_EVERY)["status"] == "done"
    with pytest.warns(UserWarning, match="stopped at step"):
        record = K.train_look(seed=0, steps=2 * K.limits.LOOK_EVERY, max_seconds=0.0)
    assert record["status"].startswith(f"stopped at step {K.limits.LOOK_EVERY}")


def test_the_control_on_empty_pictures_guesses_and_finds_nothing():
    control = K.train_look(seed=0, steps=300, blank=True, max_seconds=math.inf)
    last = control["checkpoints"][-1]
    # Chance: a colour or a kind is one of four, a cell one of sixteen; the best a guess can do is to know
    # which question was asked: (1/4 + 1/4 + 1/16) / 3 ≈ 0.19.
    assert last["accuracy"] < 0.3, last["accuracy"]
    assert last["best"]["share"] < 0.1, last["best"]  # 1/16 = 0.0625 wherever it looks
