"""Where a vision-language model's text looks in its pictures, in a notebook: ``vl_attention`` (the function of
``attnviz.analysis.vlattention``: the maps, each patch's box in the picture, localization heads and CAMs as
vl-saliency 1.1.6 computes them, for LLaVA-1.5, LLaVA-NeXT, Qwen2-VL, Qwen2.5-VL, PaliGemma and Gemma 3 folders
or local-cache ids) and
``vl_view``, its figures:

    r = attnviz.vl_attention("llava-hf/llava-1.5-7b-hf", "cat.jpg", "USER: <image>\\nWhat is this? ASSISTANT:")
    attnviz.vl_view(r, "cat.jpg", token=-1)                # the last token's attention over the picture
    attnviz.vl_view(r, "cat.jpg", token=-1, show="share")  # layer × head: how much of it goes to the picture

- ``show="overlay"``: the picture under one text token's attention over its patches, for the mean over the
  heads of one layer and for each of them, each patch drawn over its box in the picture's pixels;
- ``show="share"``: (layers × heads) the share of that token's attention on the picture's tokens, its
  localization heads (Kang et al., CVPR 2025, as vl-saliency ranks them) outlined and numbered.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.analysis.vlattention import VLAttention, vl_attention
from attnviz.i18n import _
from attnviz.models.vlm import pictures_of
from attnviz.plots.looking import picture_overlay, share_map
from attnviz.plots.style import FigureStyle

SHOWS = ("overlay", "share")


def looking_layer(r: VLAttention, token: int) -> int:
    """The layer whose heads, on average, give ``token``'s attention most to the pictures."""
    return int(r.image_share[:, :, token].mean(1).argmax())


def vl_view(model, image, prompt: str | None = None, *, token: int = -1, layer: int | None = None,
            show: str = "overlay", picture: int = 0, generate: int = 8, answer: str | None = None,
            style: FigureStyle | None = None) -> go.Figure:
    """A Plotly figure (never shown: display it, or ``fig.show()``) of one text token's attention to a picture.

    ``model``: what ``vl_attention`` returned (``image`` is then the picture or pictures it read, drawn under
    the map) or a model folder or local-cache id, run now on ``image`` and ``prompt`` with ``generate`` greedy
    tokens or ``answer`` teacher-forced. ``token``: an index into ``.tokens``. ``layer``: the layer drawn by
    ``show="overlay"`` (default: the one whose heads give the token's attention most to the picture)."""
    if show not in SHOWS:
        raise ValueError(f"show must be one of {', '.join(SHOWS)}, got {show!r}.")
    if isinstance(model, VLAttention):
        if prompt is not None:
            raise ValueError("Give the prompt with the model, not with a result: the result ran its own.")
        r = model
    else:
        if prompt is None:
            raise ValueError("A model needs a prompt: vl_view(model, image, prompt).")
        r = vl_attention(model, image, prompt, generate=generate, answer=answer)
    pictures = pictures_of(image)
    if len(pictures) != len(r.sizes):
        raise ValueError(f"{len(pictures)} picture(s) given for a result of {len(r.sizes)}: give the ones it read.")
    t, p = r.token_index(token), r.map_index(picture)  # p: a map (LLaVA-NeXT: each picture's base view, then its tiles)
    src = r.picture_of[p] if r.picture_of else p
    if tuple(pictures[src].size) != tuple(r.sizes[src]):
        raise ValueError(f"Picture {src + 1} is {pictures[src].size[0]} × {pictures[src].size[1]} pixels where the "
                         f"result read one of {r.sizes[src][0]} × {r.sizes[src][1]}: give the picture it read.")
    style = FigureStyle() if style is None else style
    word = r.tokens[t]
    if show == "share":
        share = r.image_share[:, :, t].numpy()  # (layers, H)
        title = _("“{token}”: the share of its attention on the picture, by layer and head<br>outlined: its "
                  "localization heads (Kang et al. 2025), best first").format(token=word)
        return share_map(share, r.localization_heads(t, image=p), style, title=title)
    if layer is None:
        layer = looking_layer(r, t)
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < r.layers:
        raise ValueError(f"layer must be a whole number from 0 to {r.layers - 1}, got {layer!r}.")
    maps = r.maps[p][layer, :, t].numpy()  # (H, rows, cols)
    panels = [(_("mean over heads"), maps.mean(0))] + [(_("head {h}").format(h=h), maps[h]) for h in range(r.heads)]
    title = _("“{token}” → the picture, layer {layer}: each patch's weight over its box").format(token=word,
                                                                                              layer=layer)
    return picture_overlay(np.asarray(pictures[src]), panels, r.boxes[p], style, title=title)
