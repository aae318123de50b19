"""Each grid cell's box in the picture, against the processor's own geometry: a mark drawn in the
middle of one cell's box must come out of the processor brightest in that cell (resized and
cropped: LLaVA's CLIP processor; padded: LlavaImageProcessor; resized to a merged grid: Qwen2-VL;
stretched to a square: PaliGemma's SigLIP processor; tiled: LLaVA-NeXT, Idefics3 and SmolVLM). Where
a view's tokens are not its cells row by row, their order against the model's and processor's own
(Idefics3's pixel shuffle and tiles)."""

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
    views = vlgrid.geometry(vlm.arch, vlm.processor, inputs, [size])
    (grid,), (boxes,) = views.grids, views.boxes
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
    (boxes,) = vlgrid.geometry("llava", pad.processor, inputs, [(100, 60)]).boxes
    assert boxes[0, 0, 1] == pytest.approx(-20) and boxes[-1, -1, 3] == pytest.approx(80)  # 20 px of padding above
    crop = load_vlm(str(folders["llava"]))
    inputs = prepare(crop, [Image.new("RGB", (60, 40))], "the cat")
    (boxes,) = vlgrid.geometry("llava", crop.processor, inputs, [(60, 40)]).boxes
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
    grids, boxes, slots, _of, tokens = vlgrid.geometry(vlm.arch, vlm.processor, inputs, [size])
    rows, cols = grids[1]
    assert slots[1][-1, 0] == 4 + (rows - 1) * (cols + 1) and tokens == 4 + rows * (cols + 1)  # a newline a row
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


@pytest.fixture(scope="module")
def idefics_folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("grid-idefics")
    return {kind: vlmodels.save(base, kind)[0] for kind in ("idefics3", "smolvlm")}


def _idefics_seen(vlm, img, tiles: tuple[int, int]) -> list[np.ndarray]:
    """Each view's brightness a token: the global view (the last frame), then the tiles laid out again as one picture
    (frames row by row), each token's 8 × 8 pixels averaged."""
    pv = prepare(vlm, [img], "the cat")["pixel_values"][0].mean(1)  # (frames, 32, 32)
    whole = [pv[-1].reshape(4, 8, 4, 8).mean((1, 3)).numpy()]
    if len(pv) == 1:
        return whole
    rows, cols = tiles
    picture = pv[:-1].reshape(rows, cols, 32, 32).permute(0, 2, 1, 3).reshape(rows * 32, cols * 32)
    return [*whole, picture.reshape(rows * 4, 8, cols * 4, 8).mean((1, 3)).numpy()]


@pytest.mark.parametrize("kind,size,split", [("idefics3", (100, 70), True), ("idefics3", (30, 90), True),
                                             ("smolvlm", (90, 30), True), ("idefics3", (45, 60), False)])
def test_idefics3_boxes_land_in_the_whole_picture_and_in_the_tiles(idefics_folders, kind, size, split):
    """Idefics3 and SmolVLM: a mark in a cell's box comes out brightest in that cell, of the global view and of the
    tiles put back together (with image splitting off: the global view alone)."""
    import copy

    vlm = copy.copy(load_vlm(str(idefics_folders[kind])))
    vlm.processor = copy.deepcopy(vlm.processor)
    vlm.processor.image_processor.do_image_splitting = split
    w, h = size
    views = vlgrid.geometry(vlm.arch, vlm.processor, prepare(vlm, [Image.new("RGB", size)], "the cat"), [size])
    assert len(views.grids) == (2 if split else 1) and views.picture_of == [0] * len(views.grids)
    tiles = (views.grids[-1][0] // 4, views.grids[-1][1] // 4)
    plain = _idefics_seen(vlm, Image.new("RGB", size), tiles)
    checked = 0
    for view, (rows, cols) in enumerate(views.grids):
        for r in range(rows):
            for c in range(cols):
                x0, y0, x1, y1 = views.boxes[view][r, c]
                cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 4, (y1 - y0) / 4
                img = Image.new("RGB", size)
                ImageDraw.Draw(img).rectangle([cx - rx, cy - ry, cx + rx - 1, cy + ry - 1], fill=(255, 255, 255))
                diff = _idefics_seen(vlm, img, tiles)[view] - plain[view]
                assert np.unravel_index(diff.argmax(), diff.shape) == (r, c), (view, r, c)
                checked += 1
    assert checked == sum(r * c for r, c in views.grids)


@pytest.mark.parametrize("kind", ["idefics3", "smolvlm"])
def test_idefics3_tokens_are_each_tiles_pixel_shuffled_blocks_row_by_row_then_the_whole_picture(idefics_folders,
                                                                                                  kind):
    """The slots against the model's own pixel shuffle (each token's patches, from features that carry their
    patch's row and column) and the processor's own prompt (each tile's block of image tokens after its
    <row_r_col_c>, the whole picture's after <global-img>)."""
    import torch

    vlm = load_vlm(str(idefics_folders[kind]))
    s, k = 8, int(vlm.model.config.scale_factor)  # 8 × 8 patches a tile, k × k of them a token
    rc = torch.stack(torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij"), -1).reshape(1, s * s, 2)
    out = vlm.model.model.connector.pixel_shuffle(rc.float(), k)[0].reshape(s * s // k**2, k * k, 2)  # (tokens, k², 2)
    views = vlgrid.geometry(vlm.arch, vlm.processor, prepare(vlm, [Image.new("RGB", (100, 70))], "the cat"),
                            [(100, 70)])
    whole, tiles = views.slots
    g = s // k
    for token in range(g * g):  # within one tile (the global view): its slot is its block, row by row
        (r, c), = np.argwhere(whole == token + whole.min())
        assert set(out[token, :, 0].long().tolist()) == set(range(r * k, r * k + k)), token
        assert set(out[token, :, 1].long().tolist()) == set(range(c * k, c * k + k)), token
    ids = prepare(vlm, [Image.new("RGB", (100, 70))], "the cat")["input_ids"][0]
    image = torch.nonzero(ids == vlm.image_token_id)[:, 0]
    names = vlm.processor.tokenizer.convert_ids_to_tokens(ids.tolist())
    rows, cols = tiles.shape[0] // g, tiles.shape[1] // g
    for tr in range(rows):
        for tc in range(cols):
            first = int(image[tiles[tr * g, tc * g]])  # the tile's first token
            assert names[first - 1] == f"<row_{tr + 1}_col_{tc + 1}>"
            assert sorted(tiles[tr * g:(tr + 1) * g, tc * g:(tc + 1) * g].ravel()) == list(
                range(tiles[tr * g, tc * g], tiles[tr * g, tc * g] + g * g))
    assert names[int(image[whole.min()]) - 1] == "<global-img>" and whole.min() == rows * cols * g * g
