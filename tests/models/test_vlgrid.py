"""Each grid cell's box in the picture, against the processor's own geometry: a mark drawn in the
middle of one cell's box must come out of the processor brightest in that cell (resized and
cropped: LLaVA's CLIP processor; padded: LlavaImageProcessor; resized to a merged grid: Qwen2-VL;
stretched to a square: PaliGemma's SigLIP processor)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from attnviz.models import vlgrid
from attnviz.models.vlm import load_vlm, prepare
from tests.support import vlmodels


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("grid")
    return {kind: vlmodels.save(base, kind)[0] for kind in ("llava", "llava_pad", "qwen2_vl", "paligemma", "gemma3")}


def _brightness(arch, inputs, grid):
    rows, cols = grid
    pv = inputs["pixel_values"]
    if arch == "llava":  # (1, 3, H, W): the mean over each patch
        p = pv.shape[-1] // cols
        return pv[0].mean(0).reshape(rows, p, cols, p).mean((1, 3)).numpy()
    # Qwen2-VL: (patches, C · T · P · P), each merged token's merge² patches in a row, tokens row by row
    return pv.reshape(rows * cols, 4, -1).mean((1, 2)).reshape(rows, cols).numpy()


@pytest.mark.parametrize("kind,size", [("llava", (60, 40)), ("llava", (30, 90)), ("llava_pad", (100, 60)),
                                       ("llava_pad", (40, 90)), ("qwen2_vl", (100, 70)), ("qwen2_vl", (75, 130)),
                                       ("paligemma", (60, 40)), ("paligemma", (30, 90)), ("gemma3", (50, 70))])
def test_a_mark_in_a_cells_box_lands_in_that_cell(folders, kind, size):
    vlm = load_vlm(str(folders[kind]))
    w, h = size
    inputs = prepare(vlm, [Image.new("RGB", size)], "the cat")
    (grid,), (boxes,), _widths = vlgrid.geometry(vlm.arch, vlm.processor, inputs, [size])
    family = "qwen" if kind.startswith("qwen") else "llava"  # PaliGemma's pixels are a picture, as LLaVA's
    base = _brightness(family, inputs, grid)  # the unmarked picture (padding has the processor's own colour)
    assert boxes.shape == (*grid, 4)
    checked = 0
    for r in range(grid[0]):
        for c in range(grid[1]):
            x0, y0, x1, y1 = boxes[r, c]
            cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 4, (y1 - y0) / 4
            if not (0 <= cx - rx and cx + rx <= w and 0 <= cy - ry and cy + ry <= h):
                continue  # a cell over padding or cut by the crop: no mark fits inside the picture
            img = Image.new("RGB", size)
            ImageDraw.Draw(img).rectangle([cx - rx, cy - ry, cx + rx - 1, cy + ry - 1], fill=(255, 255, 255))
            seen = _brightness(family, prepare(vlm, [img], "the cat"), grid) - base
            assert np.unravel_index(seen.argmax(), seen.shape) == (r, c), (r, c, boxes[r, c])
            checked += 1
    assert checked >= grid[0] * grid[1] // 2


def test_padding_and_cropping_move_the_boxes_as_the_processor_does(folders):
    pad = load_vlm(str(folders["llava_pad"]))
    inputs = prepare(pad, [Image.new("RGB", (100, 60))], "the cat")
    (_g,), (boxes,), _w = vlgrid.geometry("llava", pad.processor, inputs, [(100, 60)])
    assert boxes[0, 0, 1] == pytest.approx(-20) and boxes[-1, -1, 3] == pytest.approx(80)  # 20 px of padding above
    crop = load_vlm(str(folders["llava"]))
    inputs = prepare(crop, [Image.new("RGB", (60, 40))], "the cat")
    (_g,), (boxes,), _w = vlgrid.geometry("llava", crop.processor, inputs, [(60, 40)])
    assert boxes[0, 0, 0] == pytest.approx(8 * 40 / 32) and boxes[-1, -1, 3] == pytest.approx(40)  # 48 → 32 wide


@pytest.fixture(scope="module")
def next_folder(tmp_path_factory):
    return vlmodels.save(tmp_path_factory.mktemp("grid-next"), "llava_next")[0]


@pytest.mark.parametrize("size", [(70, 40), (30, 50), (45, 45), (90, 30)])
def test_llava_next_boxes_land_in_the_base_view_and_in_the_unpadded_tiles(next_folder, size):
    """A mark in a cell's box must come out brightest in that cell: of the base view (the picture stretched to a
    tile), and of the tiles laid out again as one picture (the processor's own tiles of the best resolution),
    counted from the rows (or columns) that unpadding keeps."""
    from transformers.image_processing_utils import select_best_resolution

    vlm = load_vlm(str(next_folder))
    w, h = size
    inputs = prepare(vlm, [Image.new("RGB", size)], "the cat")
    grids, boxes, widths = vlgrid.geometry(vlm.arch, vlm.processor, inputs, [size])
    assert widths == [grids[0][1], grids[1][1] + 1]  # a newline ends each row of the tiles
    bh, bw = select_best_resolution((h, w), vlm.processor.image_processor.image_grid_pinpoints)

    def seen(img) -> tuple[np.ndarray, np.ndarray]:
        pv = prepare(vlm, [img], "the cat")["pixel_values"][0].mean(1)  # (views, 16, 16)
        base = pv[0].reshape(2, 8, 2, 8).mean((1, 3)).numpy()
        tiles = pv[1:].reshape(bh // 16, bw // 16, 16, 16).permute(0, 2, 1, 3).reshape(bh, bw)  # one picture again
        return base, tiles.reshape(bh // 8, 8, bw // 8, 8).mean((1, 3)).numpy()

    plain = seen(Image.new("RGB", size))
    checked = 0
    for view, (rows, cols) in enumerate(grids):
        cut_r, cut_c = ((bh // 8 - rows) // 2, (bw // 8 - cols) // 2) if view else (0, 0)  # unpadding: both sides
        for r in range(rows):
            for c in range(cols):
                x0, y0, x1, y1 = boxes[view][r, c]
                cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 4, (y1 - y0) / 4
                if not (0 <= cx - rx and cx + rx <= w and 0 <= cy - ry and cy + ry <= h):
                    continue  # a cell over the padding: no mark fits inside the picture
                img = Image.new("RGB", size)
                ImageDraw.Draw(img).rectangle([cx - rx, cy - ry, cx + rx - 1, cy + ry - 1], fill=(255, 255, 255))
                diff = seen(img)[view] - plain[view]
                assert np.unravel_index(diff.argmax(), diff.shape) == (r + cut_r, c + cut_c), (view, r, c)
                checked += 1
    assert checked >= (grids[0][0] * grids[0][1] + grids[1][0] * grids[1][1]) // 2
