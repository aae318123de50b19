"""Where each image token of a vision-language model looked: the grid the processor made of
each picture (after merging), and each cell's box in the original picture's pixels, through the
processor's own steps (``transformers``' PIL image processors, the backend attnviz loads).

- **LLaVA-1.5** (``CLIPImageProcessor``; ``LlavaImageProcessor``): optionally padded to a square
  first (``do_pad``: the picture centred at ((S − w) // 2, (S − h) // 2) on an S × S canvas, S =
  max(w, h)), resized (``size``: a shortest edge, long edge int(S · long / short), or height and
  width), centre-cropped to ``crop_size`` (top = (h − ch) // 2, left = (w − cw) // 2, zero-padded
  by ceil((ch − h) / 2) where the crop is larger), then cut into ``patch_size`` patches, row by row
  ("default" feature selection drops the vision tower's [CLS]).
- **PaliGemma** (``SiglipImageProcessor``) and **Gemma 3** (``Gemma3ImageProcessor`` without pan-and-scan):
  resized to ``size``'s height × width, the aspect not kept, no crop or pad, then cut into patches (Gemma 3's
  pooled k × k into fewer tokens): ``image_seq_length`` tokens, a square grid, each cell 1 / side of the
  picture's width and height.
- **LLaVA-NeXT** (``LlavaNextImageProcessor``): two views of each picture. The base view: the picture stretched
  to the tile's square, cut into patches. The tiles: the picture resized, its aspect kept, to fit the best of
  ``image_grid_pinpoints`` (``select_best_resolution``), centred on it with padding, cut into tiles and each
  tile into patches; the model lays the tiles' patches out as one grid, removes the rows (or columns) that
  fall on the padding (``unpad_image``: int(round(h · W / w, 7)) rows kept of H, the rest halved off each
  side) and puts a newline token after each row: ``rows × (cols + 1)`` tokens, of which the newlines are no
  patch (``widths``: each view's tokens per row).
- **Qwen2-VL / Qwen2.5-VL** (``Qwen2VLImageProcessor``): resized to h′ × w′ (``smart_resize``:
  multiples of ``patch_size × merge_size`` within min/max pixels, given back as ``image_grid_thw``
  in patches), cut into ``patch_size`` patches and merged 2 × 2: one token per
  (patch_size · merge_size)-pixel square of the resized picture, row by row.

- **Idefics3 / SmolVLM** (``Idefics3ImageProcessor``, ``SmolVLMImageProcessor``): resized, its aspect kept, to
  ``size``'s longest edge (the short edge made even), then stretched to multiples of the tile's side M
  (``max_image_size``; ``resize_for_vision_encoder``) and, where larger than one tile, cut into its rows × cols of
  M × M tiles, row by row, followed by the global view (the whole picture stretched to M × M). Each tile's patches
  are pixel-shuffled k × k into one token (``Idefics3Connector.pixel_shuffle``: the blocks row by row), so each
  view is a g × g grid, g² = ``image_seq_len``; the tiles' grids are laid out again as one (rows · g) × (cols · g)
  grid over the picture.

A box (left, top, right, bottom) maps a cell's square back with each step's inverse (a resize's
scale per axis, a crop's and a pad's offsets), in continuous pixel coordinates (0 is the picture's
left edge, w its right edge); a cell over padding lies partly or wholly outside [0, w] × [0, h].

``geometry`` gives each view (a picture, or each of a picture's views: LLaVA-NeXT's and Idefics3's whole picture,
then its tiles) with its cells' ``slots``: where each cell's token is among the sequence's image tokens, since a
view's tokens are not always its cells row by row (LLaVA-NeXT ends each row with a newline token; Idefics3 gives
its tiles one after the other, then the whole picture).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Views(NamedTuple):
    """Every view of every picture, in the order the maps are drawn (see the module doc)."""

    grids: list  # per view (rows, cols)
    boxes: list  # per view (rows, cols, 4) float64: each cell's box in its picture's pixels
    slots: list  # per view (rows, cols) int64: each cell's index among the sequence's image tokens
    picture_of: list  # per view: its picture (an index into the sizes)
    tokens: int  # the image tokens of every picture (a LLaVA-NeXT newline is one, and no cell's)


def grid_boxes(width: float, height: float, side: int, cols: int | None = None) -> np.ndarray:
    """(side, cols or side, 4): the boxes of a grid laid over a whole picture of width × height pixels (a picture
    stretched to the processor's size, then cut into patches)."""
    cols = side if cols is None else cols
    r, c = np.mgrid[0:side, 0:cols].astype(np.float64)
    return np.stack([c * width / cols, r * height / side, (c + 1) * width / cols, (r + 1) * height / side], -1)


def _row_major(rows: int, cols: int, width: int | None = None) -> np.ndarray:
    """(rows, cols): a grid's tokens row by row, ``width`` tokens a row (its cols, or more where a row ends with
    tokens that are no cell)."""
    r, c = np.mgrid[0:rows, 0:cols]
    return (r * (cols if width is None else width) + c).astype(np.int64)


def _one_view(grids: list, boxes: list) -> list:
    """Per picture ([(grid, boxes, slots)], tokens): one grid a picture, its tokens row by row."""
    return [([(g, b, _row_major(*g))], g[0] * g[1]) for g, b in zip(grids, boxes, strict=True)]


def _size(obj, name):
    value = getattr(obj, name, None)
    if value is None:
        return {}
    return {k: v for k, v in (value.items() if hasattr(value, "items") else dict(value).items()) if v is not None}


def _resized(ip, h: int, w: int) -> tuple[int, int]:
    """The (height, width) the CLIP-style processor resizes an h × w picture to."""
    from transformers.image_transforms import get_resize_output_image_size
    from transformers.image_utils import ChannelDimension

    size = _size(ip, "size")
    if not getattr(ip, "do_resize", True):
        return h, w
    if "shortest_edge" in size and "longest_edge" not in size:
        dummy = np.broadcast_to(np.zeros((), np.uint8), (3, h, w))  # its shape only: no memory
        oh, ow = get_resize_output_image_size(dummy, size=size["shortest_edge"], default_to_square=False,
                                              input_data_format=ChannelDimension.FIRST)
        return int(oh), int(ow)
    if "height" in size and "width" in size:
        return int(size["height"]), int(size["width"])
    raise ValueError(f"The image processor's size {size} is not one vl_attention maps back yet (shortest_edge, or "
                     "height and width).")


def _llava_box(ip, patch: int, rows: int, cols: int, w0: int, h0: int) -> np.ndarray:
    ox = oy = 0.0
    w, h = w0, h0
    if getattr(ip, "do_pad", False) and hasattr(ip, "pad_to_square"):
        side = max(w, h)
        ox, oy = (side - w) // 2, (side - h) // 2  # where the picture sits on the square
        w = h = side
    rh, rw = _resized(ip, h, w)
    sy, sx = rh / h, rw / w  # resized pixels per (padded) original pixel
    top = left = 0.0
    if getattr(ip, "do_center_crop", False):
        crop = _size(ip, "crop_size")
        ch, cw = int(crop["height"]), int(crop["width"])
        nh, nw = max(ch, rh), max(cw, rw)
        pad_t, pad_l = math.ceil((nh - rh) / 2), math.ceil((nw - rw) / 2)
        top = max(0, (rh - ch) // 2 + pad_t) - pad_t  # resized y = crop y + top
        left = max(0, (rw - cw) // 2 + pad_l) - pad_l
    r, c = np.mgrid[0:rows, 0:cols].astype(np.float64)  # (rows, cols)
    x0, y0 = (c * patch + left) / sx - ox, (r * patch + top) / sy - oy
    x1, y1 = ((c + 1) * patch + left) / sx - ox, ((r + 1) * patch + top) / sy - oy
    return np.stack([x0, y0, x1, y1], -1)  # (rows, cols, 4)


def llava_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> list:
    """LLaVA-1.5: one square grid per picture."""
    ip = processor.image_processor
    patch = int(processor.patch_size)
    if getattr(processor, "vision_feature_select_strategy", "default") != "default":
        raise ValueError("This LLaVA keeps the vision tower's [CLS] among its image tokens (feature selection "
                         "'full'): its tokens are not a grid of patches, and vl_attention does not read it.")
    H, W = inputs["pixel_values"].shape[-2:]
    rows, cols = int(H) // patch, int(W) // patch
    return _one_view([(rows, cols)] * len(sizes), [_llava_box(ip, patch, rows, cols, w, h) for w, h in sizes])


def qwen_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> list:
    """Qwen2-VL and Qwen2.5-VL: the merged grid of each picture."""
    ip = processor.image_processor
    patch, merge = int(ip.patch_size), int(ip.merge_size)
    grids, boxes = [], []
    for (t, gh, gw), (w0, h0) in zip(inputs["image_grid_thw"].tolist(), sizes, strict=True):
        if t != 1:
            raise ValueError("A picture with more than one temporal patch is a video: vl_attention reads pictures.")
        rows, cols = gh // merge, gw // merge
        sy, sx = gh * patch / h0, gw * patch / w0  # resized pixels per original pixel
        m = patch * merge  # a merged token's side, in resized pixels
        r, c = np.mgrid[0:rows, 0:cols].astype(np.float64)
        grids.append((rows, cols))
        boxes.append(np.stack([c * m / sx, r * m / sy, (c + 1) * m / sx, (r + 1) * m / sy], -1))  # (rows, cols, 4)
    return _one_view(grids, boxes)


def stretched_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> list:
    """PaliGemma and Gemma 3: each picture stretched to the processor's square, ``image_seq_length`` tokens."""
    ip = processor.image_processor
    size = _size(ip, "size")
    if getattr(ip, "do_pan_and_scan", False):
        raise ValueError("This Gemma 3 processor cuts pan-and-scan crops (do_pan_and_scan): their grids are not "
                         "read yet; vl_attention reads the picture resized whole.")
    if not getattr(ip, "do_resize", True) or "height" not in size or getattr(ip, "do_center_crop", False):
        raise ValueError(f"The image processor's size {size} is not one vl_attention maps back yet (a resize to "
                         "height and width).")
    side = math.isqrt(int(processor.image_seq_length))
    if side * side != int(processor.image_seq_length):
        raise ValueError(f"{processor.image_seq_length} image tokens are not a square grid.")
    return _one_view([(side, side)] * len(sizes), [grid_boxes(w, h, side) for w, h in sizes])


def _tile_side(ip) -> int:
    """The tile's side in pixels, as ``LlavaNextImageProcessor`` picks it: its crop, else its size."""
    crop, size = _size(ip, "crop_size"), _size(ip, "size")
    return int(crop.get("height") or size.get("height") or size["shortest_edge"])


def next_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> list:
    """LLaVA-NeXT: per picture its base view, then its tiles' unpadded grid, a newline token ending each row."""
    from transformers.image_processing_utils import select_best_resolution

    ip = processor.image_processor
    patch, tile = int(processor.patch_size), _tile_side(ip)
    if getattr(processor, "vision_feature_select_strategy", "default") != "default":
        raise ValueError("This LLaVA-NeXT keeps the vision tower's [CLS] among its image tokens (feature selection "
                         "'full'): its tokens are not a grid of patches, and vl_attention does not read it.")
    side = tile // patch
    out = []
    for w0, h0 in sizes:
        base = ((side, side), grid_boxes(w0, h0, side), _row_major(side, side))  # the picture stretched to a tile
        bh, bw = select_best_resolution((h0, w0), ip.image_grid_pinpoints)
        if bw / w0 < bh / h0:  # get_patch_output_size: the resized picture inside the best resolution
            nw, nh = bw, min(math.ceil(h0 * bw / w0), bh)
        else:
            nh, nw = bh, min(math.ceil(w0 * bh / h0), bw)
        pad_y, pad_x = (bh - nh) // 2, (bw - nw) // 2
        H, W = (bh // tile) * side, (bw // tile) * side  # the tiles' patches as one grid
        rows, cols = np.arange(H), np.arange(W)
        if w0 / h0 > W / H:  # unpad_image, at the patches' level
            cut = (H - int(round(h0 * (W / w0), 7))) // 2
            rows = rows[cut:H - cut]
        else:
            cut = (W - int(round(w0 * (H / h0), 7))) // 2
            cols = cols[cut:W - cut]
        rr, cc = np.meshgrid(rows.astype(np.float64), cols.astype(np.float64), indexing="ij")
        sx, sy = w0 / nw, h0 / nh  # original pixels per resized pixel
        grid = (len(rows), len(cols))
        boxes = np.stack([(cc * patch - pad_x) * sx, (rr * patch - pad_y) * sy, ((cc + 1) * patch - pad_x) * sx,
                          ((rr + 1) * patch - pad_y) * sy], -1)
        tiles = (grid, boxes, side * side + _row_major(*grid, grid[1] + 1))  # a newline token ends each row
        out.append(([base, tiles], side * side + grid[0] * (grid[1] + 1)))
    return out


def _multiple_of(h: int, w: int, m: int) -> tuple[int, int]:
    """(H, W): an h × w picture stretched to multiples of m, as ``Idefics3ImageProcessor.resize_for_vision_encoder``
    computes them (the long edge rounded up, the short edge from the aspect, then rounded up)."""
    aspect = w / h
    if w >= h:
        W = math.ceil(w / m) * m
        return math.ceil(int(W / aspect) / m) * m, W
    H = math.ceil(h / m) * m
    return H, math.ceil(int(H * aspect) / m) * m


def idefics3_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> list:
    """Idefics3 and SmolVLM: per picture its global view, then its tiles as one grid (a picture no larger than
    one tile: its global view alone)."""
    from transformers.models.idefics3 import image_processing_pil_idefics3 as ref

    ip = processor.image_processor
    g = math.isqrt(int(processor.image_seq_len))
    if g * g != int(processor.image_seq_len):
        raise ValueError(f"{processor.image_seq_len} image tokens a tile are not a square grid.")
    m = int(_size(ip, "max_image_size")["longest_edge"])
    size = _size(ip, "size")
    out = []
    for w0, h0 in sizes:
        h, w = h0, w0
        if getattr(ip, "do_resize", True):
            if "longest_edge" in size:  # Idefics3ImageProcessor.resize: the long edge, the short one even
                h, w = ref._resize_output_size_rescale_to_max_len(h0, w0, max_len=int(size["longest_edge"]))
                h, w = ref._resize_output_size_scale_below_upper_bound(h, w, max_len=ref.MAX_IMAGE_SIZE)
            else:
                h, w = int(size["height"]), int(size["width"])
        H, W = _multiple_of(h, w, m) if getattr(ip, "do_image_splitting", True) else (m, m)
        whole = ((g, g), grid_boxes(w0, h0, g), _row_major(g, g))
        if H <= m and W <= m:  # one tile: the picture is its global view
            out.append(([whole], g * g))
            continue
        rows, cols = H // m, W // m
        r, c = np.mgrid[0:rows * g, 0:cols * g]
        # Tile (r // g, c // g), row by row, g² tokens each; within it the pixel-shuffled blocks row by row.
        slots = ((r // g) * cols + c // g) * g * g + (r % g) * g + c % g
        tiles = ((rows * g, cols * g), grid_boxes(w0, h0, rows * g, cols * g), slots.astype(np.int64))
        out.append(([(whole[0], whole[1], whole[2] + rows * cols * g * g), tiles], (rows * cols + 1) * g * g))
    return out


GEOMETRY = {"llava": llava_geometry, "llava_next": next_geometry, "paligemma": stretched_geometry,
            "gemma3": stretched_geometry, "qwen2_vl": qwen_geometry, "qwen2_5_vl": qwen_geometry,
            "idefics3": idefics3_geometry, "smolvlm": idefics3_geometry}


def geometry(arch: str, processor, inputs: dict, sizes: list[tuple[int, int]]) -> Views:
    """Every view of the pictures (``sizes``: each picture's (w, h)), their cells' boxes and slots (``Views``)."""
    grids, boxes, slots, picture_of, at = [], [], [], [], 0
    for p, (views, tokens) in enumerate(GEOMETRY[arch](processor, inputs, sizes)):
        for grid, box, slot in views:
            grids.append(grid)
            boxes.append(box)
            slots.append(slot + at)
            picture_of.append(p)
        at += tokens
    return Views(grids, boxes, slots, picture_of, at)
