"""Pictures of a few coloured shapes on a plain ground, and questions about them: the task the tiny
vision-language model learns (``attnviz.learn.look``).

A picture is ``SIDE`` × ``SIDE`` pixels, a ``GRID`` × ``GRID`` grid of ``PATCH``-pixel cells (the model's
patches). ``PER_PICTURE`` shapes, each of another kind and another colour, each in a cell of its own
(drawn inside the cell, so that one patch holds it whole). A question names one of them, by its kind
or by its colour, and asks for another of its properties; the answer is one word:

- "what colour is the circle ?" → its colour;
- "which cell holds the circle ?" → its cell, as a word such as "b3" (column letter, row number);
- "which shape is coloured red ?" → its kind.

The named shape's cell is where a model that answers by looking should look. ``blank=True`` draws
the same questions over pictures with nothing on them: the control, which can only guess.
Every draw comes from the ``torch.Generator`` given, so a seed gives the same pictures.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GRID, PATCH = 4, 8
SIDE = GRID * PATCH
PER_PICTURE = 3
SHAPES = ("circle", "square", "triangle", "cross")
COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (50, 80, 220), "yellow": (230, 200, 40)}
GROUND = (235, 235, 225)  # the plain ground
CELLS = tuple(f"{'abcd'[c]}{r + 1}" for r in range(GRID) for c in range(GRID))  # row-major: "a1" is top left
QUESTIONS = ("colour", "shape", "where")
# The words, each a token: the markers, the questions' words, then every answer.
WORDS = ("BOS", "what", "which", "colour", "coloured", "shape", "cell", "is", "holds", "the", "?", *SHAPES, *COLOURS,
         *CELLS)
TOKEN = {w: i for i, w in enumerate(WORDS)}
QUESTION_LENGTH = 7  # every question is seven words: BOS and six


def _templates() -> torch.Tensor:
    """(shapes, PATCH, PATCH) bool: each kind drawn in one cell, a pixel of ground around it."""
    at = torch.arange(PATCH, dtype=torch.float32) + 0.5  # pixel centres
    y, x = torch.meshgrid(at, at, indexing="ij")
    c, r = PATCH / 2, PATCH / 2 - 1
    inside = (x > 1) & (x < PATCH - 1) & (y > 1) & (y < PATCH - 1)
    circle = (x - c) ** 2 + (y - c) ** 2 <= r * r
    square = inside
    triangle = inside & (y - 1 >= (PATCH - 2) - 2 * (x - 1)) & (y - 1 >= 2 * (x - 1) - (PATCH - 2))
    cross = inside & (((x - c).abs() < 1.2) | ((y - c).abs() < 1.2))
    return torch.stack([circle, square, triangle, cross])


TEMPLATES = _templates()


@dataclass(frozen=True)
class Pictures:
    pixels: torch.Tensor  # (N, 3, SIDE, SIDE) float in [0, 1]
    ids: torch.Tensor  # (N, QUESTION_LENGTH) the question's tokens
    answer: torch.Tensor  # (N,) the answer's token
    cell: torch.Tensor  # (N,) the named shape's cell (0 … GRID² − 1, row-major)
    kind: tuple[str, ...]  # each question's kind (QUESTIONS)


def question(kind: str, shape: str, colour: str) -> list[str]:
    """The question's words (BOS first), naming the shape by its kind or its colour."""
    if kind == "colour":
        return ["BOS", "what", "colour", "is", "the", shape, "?"]
    if kind == "shape":
        return ["BOS", "which", "shape", "is", "coloured", colour, "?"]
    return ["BOS", "which", "cell", "holds", "the", shape, "?"]


def pictures(n: int, generator: torch.Generator, *, blank: bool = False) -> Pictures:
    """``n`` pictures, each with one question about one of its shapes. Drawn for the whole batch at once: each
    picture's cells, kinds and colours are the first ``PER_PICTURE`` of a random order (all different)."""
    g = generator

    def firsts(k: int) -> torch.Tensor:  # (n, PER_PICTURE): distinct draws from range(k), per picture
        return torch.rand(n, k, generator=g).argsort(1)[:, :PER_PICTURE]

    where, shapes, paints = firsts(GRID * GRID), firsts(len(SHAPES)), firsts(len(COLOURS))  # (n, 3) each
    j = torch.randint(PER_PICTURE, (n,), generator=g)  # the shape asked about
    kind_at = torch.randint(len(QUESTIONS), (n,), generator=g)
    ground = torch.tensor(GROUND, dtype=torch.float32) / 255  # (3,)
    cells = ground.view(1, 1, 3, 1, 1).repeat(n, GRID * GRID, 1, PATCH, PATCH)  # (n, cells, 3, PATCH, PATCH)
    if not blank:
        colours = torch.tensor(list(COLOURS.values()), dtype=torch.float32)[paints] / 255  # (n, 3, 3)
        drawn = torch.where(TEMPLATES[shapes][:, :, None], colours[..., None, None], ground.view(1, 1, 3, 1, 1))
        cells[torch.arange(n)[:, None], where] = drawn  # (n, 3, 3, PATCH, PATCH) into their cells
    pixels = cells.view(n, GRID, GRID, 3, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5).reshape(n, 3, SIDE, SIDE)
    asked = torch.arange(n)
    shape_of, paint_of, cell_of = shapes[asked, j].tolist(), paints[asked, j].tolist(), where[asked, j]
    names = list(COLOURS)
    ids, answers, kinds = [], [], []
    for i in range(n):
        kind, shape, colour = QUESTIONS[int(kind_at[i])], SHAPES[shape_of[i]], names[paint_of[i]]
        ids.append([TOKEN[w] for w in question(kind, shape, colour)])
        answers.append(TOKEN[{"colour": colour, "shape": shape, "where": CELLS[int(cell_of[i])]}[kind]])
        kinds.append(kind)
    return Pictures(pixels.contiguous(), torch.tensor(ids), torch.tensor(answers), cell_of.clone(), tuple(kinds))


def letterbox(img):
    """A PIL picture fitted into the model's ``SIDE`` × ``SIDE`` pixels with its shape kept: scaled so that its
    longer side fills the square, centred on the ground colour (squeezed to a square, a 200 × 120 circle became
    a tall ellipse)."""
    from PIL import Image

    w, h = img.size
    scale = SIDE / max(w, h)
    fitted = img.convert("RGB").resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BILINEAR)
    square = Image.new("RGB", (SIDE, SIDE), GROUND)
    square.paste(fitted, ((SIDE - fitted.width) // 2, (SIDE - fitted.height) // 2))
    return square


BUILT_IN = tuple(f"shapes-{i + 1}" for i in range(8))  # pictures a page and a link name, the same every time


def built_in(name: str) -> tuple:
    """(the picture (SIDE, SIDE, 3) uint8 array, its own question without BOS) of a built-in picture, drawn from a
    fixed seed."""
    if name not in BUILT_IN:
        raise ValueError(f"No built-in picture {name!r}; choose one of {', '.join(BUILT_IN)}.")
    i = BUILT_IN.index(name)
    drawn = pictures(len(BUILT_IN), torch.Generator().manual_seed(30_000))
    pixels = (drawn.pixels[i].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
    return pixels, " ".join(WORDS[t] for t in drawn.ids[i].tolist()[1:])
