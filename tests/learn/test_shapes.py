"""An uploaded picture shown to the tiny model that learns to look keeps its shape: fitted into the model's square
on the ground colour, never squeezed."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from attnviz.learn import shapes as S


def circle(width: int, height: int) -> Image.Image:
    img = Image.new("RGB", (width, height), (255, 255, 255))
    r = min(width, height) // 2 - 4
    cx, cy = width // 2, height // 2
    ImageDraw.Draw(img).ellipse([cx - r, cy - r, cx + r, cy + r], fill=(220, 40, 40))
    return img


def red_box(pixels: np.ndarray) -> tuple[int, int]:
    """(width, height) of the red pixels' bounding box."""
    red = (pixels[..., 0] > 150) & (pixels[..., 1] < 120)
    rows, cols = np.nonzero(red)
    return cols.max() - cols.min() + 1, rows.max() - rows.min() + 1


def test_a_wide_and_a_tall_upload_keep_their_shape_in_the_models_square():
    for width, height in ((200, 120), (120, 200)):
        fitted = np.asarray(S.letterbox(circle(width, height)))
        assert fitted.shape == (S.SIDE, S.SIDE, 3)
        w, h = red_box(fitted)
        assert abs(w - h) <= 1, (width, height, w, h)  # a circle, not an ellipse
        bands = fitted[: 4] if width > height else fitted[:, : 4]  # the margins the picture does not fill
        assert (bands == np.array(S.GROUND, dtype=np.uint8)).all()
        squeezed = np.asarray(circle(width, height).resize((S.SIDE, S.SIDE)))
        sw, sh = red_box(squeezed)
        assert abs(sw - sh) > 4  # what the model was shown before: an ellipse
