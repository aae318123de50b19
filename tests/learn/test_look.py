"""The tiny vision-language model that learns to look (attnviz.learn.shapes, attnviz.models.tinyvl,
attnviz.learn.look): the pictures hold what the questions ask about, where they say; a patch is where the
grid puts it; the trained model answers held-out questions and its best head looks at the shape asked about,
while the control trained on empty pictures guesses and finds nothing; the same seed trains the same model."""

from __future__ import annotations

import pytest
import torch

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
def trained():
    return K.train_look(seed=0)


def test_the_model_learns_to_answer_and_its_best_head_looks_at_the_shape_asked_about(trained):
    last = trained["checkpoints"][-1]
    assert trained["status"] == "done" and last["step"] == K.limits.LOOK_STEPS
    assert last["accuracy"] >= 0.9, last["accuracy"]  # held-out pictures
    assert last["best"]["share"] >= 0.5, last["best"]  # of the answer position's attention on the picture
    first = trained["checkpoints"][0]
    # At first it answers nothing, and no head looks at the shape asked about more than at any shape (three in
    # a picture: a head drawn to shapes gives the named one about a third of its attention).
    assert first["accuracy"] < 0.2 and first["best"]["share"] < 0.35, first


def test_the_control_on_empty_pictures_guesses_and_finds_nothing():
    control = K.train_look(seed=0, steps=300, blank=True)
    last = control["checkpoints"][-1]
    # Chance: a colour or a kind is one of four, a cell one of sixteen; the best a guess can do is to know
    # which question was asked: (1/4 + 1/4 + 1/16) / 3 ≈ 0.19.
    assert last["accuracy"] < 0.3, last["accuracy"]
    assert last["best"]["share"] < 0.1, last["best"]  # 1/16 = 0.0625 wherever it looks
