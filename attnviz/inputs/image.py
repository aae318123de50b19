"""Image patches as tokens, as in the source tutorial (section 10).

``image.unfold(2, p, s).unfold(3, p, s)`` → (B, C, nH, nW, p, p), then each patch
flattened. The tutorial's ``.contiguous().view(B, -1, C*p*p)`` is right for one channel
only: with C > 1 it strings together values of different patches; here the channels
are moved behind the patch grid first (``patches_like_the_tutorial`` keeps its exact
code for the comparison). Tokens: a seeded linear projection of each flattened patch
plus 2-D sinusoidal positions. An upload is untrusted: its size and its header's pixel
count are checked before any pixel is decoded.
"""

from __future__ import annotations

import io

import numpy as np
import torch

from attnviz import limits
from attnviz.i18n import _
from attnviz.inputs.embeddings import sinusoidal_positions
from attnviz.inputs.record import Input, single
from attnviz.inputs.vectors import check_upload, seeded_projection, standardise

IMAGE_SAMPLES = ("shapes", "checkerboard", "stripes")
PATCH_MASKS = ("none", "causal", "window2d")


def sample_image(name: str, size: int = 64) -> np.ndarray:
    """A built-in picture drawn in code, (H, W, 3) float in [0, 1]."""
    y, x = np.mgrid[0:size, 0:size] / size
    img = np.ones((size, size, 3))
    if name == "shapes":  # two red squares and a blue disc on white: repeated shapes attend to each other
        for x0, y0 in ((0.1, 0.1), (0.6, 0.6)):
            box = (x >= x0) & (x < x0 + 0.25) & (y >= y0) & (y < y0 + 0.25)
            img[box] = (0.85, 0.15, 0.1)
        disc = (x - 0.75) ** 2 + (y - 0.25) ** 2 < 0.15**2
        img[disc] = (0.1, 0.3, 0.9)
    elif name == "checkerboard":
        board = ((x * 8).astype(int) + (y * 8).astype(int)) % 2 == 0
        img[board] = 0.1
    elif name == "stripes":
        img[..., 0] = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * x)
        img[..., 1] = 0.5 + 0.5 * np.sin(2 * np.pi * 2 * y)
        img[..., 2] = 0.4
    else:
        raise ValueError(f"Unknown sample image {name!r}; choose one of {', '.join(IMAGE_SAMPLES)}.")
    return img.astype(np.float32)


def _claims(pixels: str) -> ValueError:
    return ValueError(_("The image claims {pixels} pixels; the limit is {limit} pixels (it was not decoded).").format(
        pixels=pixels, limit=f"{limits.MAX_IMAGE_PIXELS:,}"))


def read_image(data: bytes) -> tuple[np.ndarray, list[str]]:
    """A PNG or JPEG upload as (H, W, 3) float in [0, 1], shrunk to at most
    ``limits.IMAGE_SIDE`` pixels a side. The header's size is checked before any pixel
    is decoded, so a small file that claims 50,000 × 50,000 pixels costs nothing."""
    from PIL import Image, UnidentifiedImageError

    check_upload(data)
    try:
        img = Image.open(io.BytesIO(data))  # reads the header only
    except Image.DecompressionBombError:  # Pillow's own guard, far above ours: same answer
        w, h = _png_size(data) or (0, 0)
        raise _claims(f"{w:,} × {h:,}" if w else "> 178,956,970") from None
    except (UnidentifiedImageError, OSError):
        raise ValueError(_("That file is not a PNG or JPEG image.")) from None
    if img.format not in ("PNG", "JPEG"):
        raise ValueError(_("That file is a {format} image; upload a PNG or JPEG.").format(format=img.format))
    w, h = img.size
    if w * h > limits.MAX_IMAGE_PIXELS:
        raise _claims(f"{w:,} × {h:,}")
    notes = []
    try:
        img.draft("RGB", (limits.IMAGE_SIDE, limits.IMAGE_SIDE))  # JPEG: decode at a smaller scale
        img = img.convert("RGB")
        if max(img.size) > limits.IMAGE_SIDE:
            notes.append(_("The image ({w} × {h}) is shown at most {side} pixels a side.").format(
                w=w, h=h, side=limits.IMAGE_SIDE))
            img.thumbnail((limits.IMAGE_SIDE, limits.IMAGE_SIDE))
    except (OSError, Image.DecompressionBombError, ValueError) as e:
        raise ValueError(_("The image could not be decoded: {error}.").format(error=e)) from None
    return np.asarray(img, dtype=np.float32) / 255.0, notes


def _png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR chunk, without decoding anything."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


def patches_like_the_tutorial(image: torch.Tensor, patch_size: int, stride: int) -> torch.Tensor:
    """The source tutorial's code, verbatim: right for one channel (see the module doc)."""
    B, C, H, W = image.shape
    patches = image.unfold(2, patch_size, stride).unfold(3, patch_size, stride)
    patches = patches.contiguous().view(B, -1, C * patch_size**2)
    return patches


def image_patches(image: torch.Tensor, patch_size: int, stride: int) -> tuple[torch.Tensor, int, int]:
    """(B, C, H, W) -> (B, nH·nW, C·p·p) in raster order, and (nH, nW)."""
    B, C, H, W = image.shape
    if patch_size < 1 or stride < 1:
        raise ValueError(_("Patch size and stride must be at least 1 pixel."))
    if patch_size > min(H, W):
        raise ValueError(_("A {p}-pixel patch is larger than the image ({w} × {h}); choose at most {most}.").format(
            p=patch_size, w=W, h=H, most=min(H, W)))
    patches = image.unfold(2, patch_size, stride).unfold(3, patch_size, stride)  # (B, C, nH, nW, p, p)
    nH, nW = patches.shape[2], patches.shape[3]
    patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B, nH * nW, C * patch_size**2)  # (B, N, C·p·p)
    return patches, nH, nW


def positions_2d(nH: int, nW: int, d_model: int) -> torch.Tensor:
    """2-D sinusoidal positions: half the features encode the row, half the column: (nH·nW, E)."""
    half = d_model // 2
    rows = sinusoidal_positions(nH, half)  # (nH, E/2)
    cols = sinusoidal_positions(nW, d_model - half)  # (nW, E/2)
    return torch.cat([rows.repeat_interleave(nW, 0), cols.repeat(nH, 1)], dim=1)  # (nH·nW, E)


def image_input(image: np.ndarray, patch_size: int, stride: int, d_model: int, seed: int,
                mask_kind: str = "none", k: int = 1) -> Input:
    """An (H, W, 3) image as patch tokens, with ``patch_mask(mask_kind)`` as its structure."""
    t = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).unsqueeze(0)  # (1, C, H, W)
    patches, nH, nW = image_patches(t, patch_size, stride)  # (1, N, C·p·p)
    n = nH * nW
    if n > limits.MAX_PATCHES:
        raise ValueError(_("{nH} × {nW} = {n} patches; the limit is {limit}. Use a larger patch or stride.").format(
            nH=nH, nW=nW, n=n, limit=limits.MAX_PATCHES))
    flat = patches[0]  # (N, C·p·p)
    x = standardise(flat) @ seeded_projection(flat.shape[1], d_model, seed, 1) + positions_2d(nH, nW, d_model)  # (N, E)
    labels = [f"r{r}c{c}" for r in range(nH) for c in range(nW)]
    return single("image", labels, x, patch_mask(mask_kind, nH, nW, k), mask_kind,
                  {"grid": (nH, nW), "patch": patch_size, "stride": stride, "size": image.shape[:2]})


def patch_mask(kind: str, nH: int, nW: int, k: int = 1) -> torch.Tensor | None:
    """none; causal in raster order; or window2d: patches within k rows and k columns."""
    n = nH * nW
    if kind == "none":
        return None
    if kind == "causal":
        return torch.ones(n, n, dtype=torch.bool).tril()
    if kind == "window2d":
        r = torch.arange(n) // nW
        c = torch.arange(n) % nW
        return ((r[:, None] - r[None]).abs() <= k) & ((c[:, None] - c[None]).abs() <= k)  # (N, N)
    raise ValueError(f"Unknown patch mask {kind!r}; choose one of {', '.join(PATCH_MASKS)}.")
