"""A vision transformer's input: an image through the model folder's own image processor,
its patches (and [CLS]) as tokens.

The processor resizes and normalises exactly as the model was trained; the tokens are
``[CLS]`` (and DeiT's distillation token) followed by the patch grid in raster order,
labelled ``r{row}c{col}`` like the image page's own patches. ``meta`` carries what the
overlay needs: the grid, the patch size at the model's resolution, the resized picture
that is drawn under the weights, and ``first`` (the index of the first patch token).
"""

from __future__ import annotations

import numpy as np

from attnviz import limits
from attnviz.inputs.record import Input
from attnviz.models.base import ModelError


def image_tokens(model, image: np.ndarray) -> Input:
    """An (H, W, 3) float image in [0, 1] as ``model``'s (an ``HFModel`` of kind vision) input."""
    from PIL import Image

    if model.kind != "vision":
        raise ModelError(f"{model.name} reads text, not images: the image page runs a vision transformer "
                         f"(ViT) or the random layer.")
    cfg = model.model.config
    side, patch = int(cfg.image_size), int(cfg.patch_size)
    nH = nW = side // patch
    if nH * nW > limits.MAX_PATCHES:
        raise ValueError(f"{model.name} cuts an image into {nH} × {nW} patches; the limit is {limits.MAX_PATCHES}.")
    pixels8 = (np.clip(image, 0, 1) * 255).round().astype(np.uint8)  # (H, W, 3) as the processor expects
    pixel_values = model.tokenizer(images=pixels8, return_tensors="pt")["pixel_values"]  # (1, 3, side, side)
    shown = np.asarray(Image.fromarray(pixels8).resize((side, side), Image.BILINEAR), dtype=np.float32) / 255.0
    labels = [f"r{r}c{c}" for r in range(nH) for c in range(nW)]
    special = ["[CLS]", "[DIST]"][: 2 if cfg.model_type == "deit" else 1]
    tokens = special + labels
    return Input("image", [tokens], [len(tokens)], None, None, meta={
        "grid": (nH, nW), "patch": patch, "stride": patch, "size": (side, side), "pixels": pixel_values,
        "shown": shown, "first": len(special)}, notes=[
        f"{model.name} reads the image at {side} × {side} pixels: {nH} × {nW} patches of {patch} px and "
        f"{' and '.join(special)}; its own patch size, stride and mask apply, not the page's."])
