"""``vl_attention``: where a vision-language model's text looks in its pictures, in a notebook: the
function of ``attnviz.analysis.vlattention`` (the maps, each patch's box in the picture, localization
heads and CAMs as vl-saliency 1.1.6 computes them), for LLaVA-1.5, Qwen2-VL and Qwen2.5-VL folders or
local-cache ids. No figure yet: the result's tensors and boxes are for any plotting library."""

from __future__ import annotations

from attnviz.analysis.vlattention import VLAttention, vl_attention  # noqa: F401 - the notebook API's names
