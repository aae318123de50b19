"""What a vision-language model's picture looks like to its own parts, beside its text's attention
(``attnviz.analysis.vlattention``):

- ``visual_sinks(maps)``: the patches that take attention from every text token, whatever it asks (visual
  attention sinks, Qwen3-VL #1551). A patch is one where every text token that sees the picture gives it at
  least ``SINK_FACTOR`` times the even share (1 / patches) of its attention on the picture, in the mean over
  the layer's heads. Two tokens at least must see the picture: with one, "whatever it asks" cannot be told.
- ``tower_attention(vlm, pixel_values)``: the vision tower's own attention over its patches, in the layer
  whose output the language model receives (``vision_feature_layer``), mean over its heads: the CLS token's
  row for a CLIP tower, the mean of every patch's row for a SigLIP tower (it has no CLS), on the language model's
  grid (Gemma 3's k × k patches pooled into one token, Idefics3's and SmolVLM's pixel-shuffled into one: their
  weights summed; LLaVA-NeXT's base view, Idefics3's global view). LLaVA's, LLaVA-NeXT's, PaliGemma's, Gemma 3's,
  Idefics3's and SmolVLM's;
  others (Qwen2-VL's windowed tower, merged 2 × 2) are refused, with why.
"""

from __future__ import annotations

import math

import numpy as np
import torch

SINK_FACTOR = 5.0
SEES = 1e-6  # a token whose attention on the picture is below this does not see it (a causal word before it)
# Idefics3's and SmolVLM's towers are SigLIP's (no CLS), with patches of any count a side.
TOWERS = {"clip_vision_model": "CLIP", "siglip_vision_model": "SigLIP", "idefics3_vision": "SigLIP",
          "smolvlm_vision": "SigLIP"}
READS = ("llava", "llava_next", "paligemma", "gemma3", "idefics3", "smolvlm")
WHOLE_LAST = ("idefics3", "smolvlm")  # the whole picture is the last frame (after the tiles), not the first


def visual_sinks(maps: torch.Tensor, factor: float = SINK_FACTOR) -> np.ndarray | None:
    """(rows, cols) bool of ``maps`` (H, T, rows, cols): one layer's attention from each text token to one
    picture; None where fewer than two tokens see the picture (see the module doc)."""
    m = maps.float().mean(0)  # (T, rows, cols): the mean over heads
    on = m.sum((-2, -1))  # (T,): each token's attention on the picture
    seeing = on > SEES
    if int(seeing.sum()) < 2:
        return None
    share = m[seeing] / on[seeing, None, None]  # (T', rows, cols): each seeing token's picture attention, summing to 1
    return (share >= factor / (m.shape[-2] * m.shape[-1])).all(0).numpy()


def tower_layer(layers: int, feature_layer) -> int:
    """The tower's layer (0 … layers − 1) whose output the language model receives: ``hidden_states[k]`` is
    the output of layer k − 1 (``hidden_states[0]`` the embeddings), so ``vision_feature_layer`` −2 is layer
    layers − 2's. A list of layers (features concatenated): the last."""
    k = feature_layer[-1] if isinstance(feature_layer, (list, tuple)) else int(feature_layer)
    k = k % (layers + 1)
    if k == 0:
        raise ValueError("The language model receives the tower's embeddings, before any of its attention.")
    return k - 1


def tower_attention(vlm, pixel_values: torch.Tensor) -> tuple[np.ndarray, str, int]:
    """((rows, cols) the tower's row over its patches, its kind "CLIP" or "SigLIP", the layer), for one picture's
    ``pixel_values`` (1, 3, H, W) as the processor made them; ``ValueError`` for a tower this does not read."""
    if vlm.arch not in READS:
        raise ValueError(f"{vlm.name}'s vision tower is not a CLIP or SigLIP tower whose patches are its language "
                         "model's (LLaVA's, PaliGemma's, Gemma 3's, Idefics3's): its own attention is not drawn.")
    if pixel_values.dim() == 5:  # (1, views, 3, H, W): the view of the whole picture
        pixel_values = pixel_values[0, -1:] if vlm.arch in WHOLE_LAST else pixel_values[0, :1]
    cfg = vlm.model.config
    kind = TOWERS.get(getattr(cfg.vision_config, "model_type", ""))
    if kind is None:
        raise ValueError(f"{vlm.name}'s vision tower is {cfg.vision_config.model_type}, not CLIP or SigLIP: its own "
                         "attention is not drawn.")
    inner = vlm.model.model
    tower = inner.vision_tower if hasattr(inner, "vision_tower") else inner.vision_model
    with torch.no_grad():
        out = tower(pixel_values.to(tower.dtype), output_attentions=True)
    layer = tower_layer(len(out.attentions), getattr(cfg, "vision_feature_layer", -1))  # PaliGemma: its last
    a = out.attentions[layer][0].float().mean(0)  # (N, N): the mean over the tower's heads
    row = a[0, 1:] if kind == "CLIP" else a.mean(0)  # (patches,): CLS's row, or the mean row
    side = int(round(row.numel() ** 0.5))
    if side * side != row.numel():
        raise ValueError(f"{vlm.name}'s tower has {row.numel()} patches, not a square grid.")
    grid = row.reshape(side, side)
    # Gemma 3 pools k × k patches into one token, Idefics3's pixel shuffle puts k × k of them in one
    k = int(getattr(cfg, "scale_factor", 1)) if getattr(cfg, "mm_tokens_per_image", None) is None else \
        side // math.isqrt(int(cfg.mm_tokens_per_image))
    if k > 1:
        grid = grid.reshape(side // k, k, side // k, k).sum((1, 3))  # each token's patches' weight together
    return grid.numpy(), kind, layer
