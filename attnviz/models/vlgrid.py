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

A box (left, top, right, bottom) maps a cell's square back with each step's inverse (a resize's
scale per axis, a crop's and a pad's offsets), in continuous pixel coordinates (0 is the picture's
left edge, w its right edge); a cell over padding lies partly or wholly outside [0, w] × [0, h].
"""

from __future__ import annotations

import math

import numpy as np


def grid_boxes(width: float, height: float, side: int) -> np.ndarray:
    """(side, side, 4): the boxes of a side × side grid laid over a whole picture of width × height pixels (a
    picture stretched to a square, then cut into patches)."""
    r, c = np.mgrid[0:side, 0:side].astype(np.float64)
    return np.stack([c * width / side, r * height / side, (c + 1) * width / side, (r + 1) * height / side], -1)


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


def llava_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> tuple[list, list]:
    """(grids, boxes) of LLaVA-1.5: one square grid per picture."""
    ip = processor.image_processor
    patch = int(processor.patch_size)
    if getattr(processor, "vision_feature_select_strategy", "default") != "default":
        raise ValueError("This LLaVA keeps the vision tower's [CLS] among its image tokens (feature selection "
                         "'full'): its tokens are not a grid of patches, and vl_attention does not read it.")
    H, W = inputs["pixel_values"].shape[-2:]
    rows, cols = int(H) // patch, int(W) // patch
    return [(rows, cols)] * len(sizes), [_llava_box(ip, patch, rows, cols, w, h) for w, h in sizes]


def qwen_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> tuple[list, list]:
    """(grids, boxes) of Qwen2-VL and Qwen2.5-VL: the merged grid of each picture."""
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
    return grids, boxes


def stretched_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> tuple[list, list]:
    """(grids, boxes) of PaliGemma and Gemma 3: each picture stretched to the processor's square,
    ``image_seq_length`` tokens."""
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
    return [(side, side)] * len(sizes), [grid_boxes(w, h, side) for w, h in sizes]


def _tile_side(ip) -> int:
    """The tile's side in pixels, as ``LlavaNextImageProcessor`` picks it: its crop, else its size."""
    crop, size = _size(ip, "crop_size"), _size(ip, "size")
    return int(crop.get("height") or size.get("height") or size["shortest_edge"])


def next_geometry(processor, inputs: dict, sizes: list[tuple[int, int]]) -> tuple[list, list, list]:
    """(grids, boxes, widths) of LLaVA-NeXT: per picture its base view, then its tiles' unpadded grid."""
    from transformers.image_processing_utils import select_best_resolution

    ip = processor.image_processor
    patch, tile = int(processor.patch_size), _tile_side(ip)
    if getattr(processor, "vision_feature_select_strategy", "default") != "default":
        raise ValueError("This LLaVA-NeXT keeps the vision tower's [CLS] among its image tokens (feature selection "
                         "'full'): its tokens are not a grid of patches, and vl_attention does not read it.")
    side = tile // patch
    grids, boxes, widths = [], [], []
    for w0, h0 in sizes:
        grids.append((side, side))
        widths.append(side)
        boxes.append(grid_boxes(w0, h0, side))  # the base view: the picture stretched to a tile
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
        grids.append((len(rows), len(cols)))
        widths.append(len(cols) + 1)  # a newline token ends each row
        boxes.append(np.stack([(cc * patch - pad_x) * sx, (rr * patch - pad_y) * sy, ((cc + 1) * patch - pad_x) * sx,
                               ((rr + 1) * patch - pad_y) * sy], -1))
    return grids, boxes, widths


GEOMETRY = {"llava": llava_geometry, "llava_next": next_geometry, "paligemma": stretched_geometry,
            "gemma3": stretched_geometry, "qwen2_vl": qwen_geometry, "qwen2_5_vl": qwen_geometry}


def geometry(arch: str, processor, inputs: dict, sizes: list[tuple[int, int]]) -> tuple[list, list, list]:
    """Per view (a picture, or each of a picture's views) its grid (rows, cols), boxes (rows, cols, 4) and tokens per
    row (``widths``: its cols, or one more where a newline token ends each row); ``sizes``: each picture's (w, h)."""
    out = GEOMETRY[arch](processor, inputs, sizes)
    return out if len(out) == 3 else (*out, [cols for _rows, cols in out[0]])
