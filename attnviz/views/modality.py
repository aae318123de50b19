"""The image, audio and graph pages' runs and figures: each input kind through the same
seam as text (``attnviz.run.run``) with the sidebar's random layer, or, on the image page
with a vision transformer chosen as the model, that model over its own patches.
"""

from __future__ import annotations

import plotly.graph_objects as go

from attnviz import inputs as I
from attnviz import plots as F
from attnviz.i18n import _
from attnviz.models.random import RandomLayer
from attnviz.models.registry import load, model_kind
from attnviz.models.vision import image_tokens
from attnviz.run.result import AttentionResult
from attnviz.run.run import run
from attnviz.views.catalogue import VIEWS, views_on
from attnviz.views.state import ViewState

# The image page's views under its overlay (its entries in the table of views): the weights (the
# head grid, with the mean over heads beside it), does the head matter, the neuron view.
IMAGE_VIEWS = views_on("image-patches")


# The pages' own inputs, read through this module: a file's bytes checked (``ValueError`` saying what is wrong),
# or a shipped sample by name.
read_image, sample_image, read_wav, sample_audio = I.read_image, I.sample_image, I.read_wav, I.sample_audio


def is_vision(model: str) -> bool:
    """A vision transformer (ViT, DeiT, DINOv2): the Image patches page runs its own patches."""
    return model_kind(model) == "vision"


def input_run(page: str, state: ViewState, data: bytes | None = None) -> tuple:
    """(input, result, image or None) of a modality page, from a file's bytes or the
    state's built-in sample."""
    if page == "image-patches":
        image = I.read_image(data)[0] if data is not None else I.sample_image(state.image_sample)
        return (*image_run(state, image), image)
    if page == "audio-frames":
        samples, rate = (I.read_wav(data)[:2] if data is not None else I.sample_audio(state.audio_sample))
        return (*audio_run(state, samples, rate), None)
    if page == "graph-nodes":
        return (*graph_run(state), None)
    raise ValueError(f"{page} is not a page of other inputs.")


def _run(state: ViewState, inp: I.Input, settings: dict) -> AttentionResult:
    """Self-attention of the sidebar's random layer over ``inp``, every step kept."""
    model = RandomLayer(state.d_model, state.heads, state.seed, state.input_projections)
    return run(inp, model, device=state.device, keep_steps=True, settings={
        "kind": inp.kind, "heads": state.heads, "d_model": state.d_model, "seed": state.seed,
        "device": state.device, "projections": state.input_projections, "mask": inp.mask_name or "none",
        **settings})


def image_run(state: ViewState, image) -> tuple:
    """(input, result) of the image-patches page for an (H, W, 3) image: the sidebar's
    vision transformer over its own patches, or the random layer over the page's."""
    if model_kind(state.model) == "vision":
        model = load(state.model)
        inp = image_tokens(model, image)
        return inp, run(inp, model, device=state.device, layer=state.layer, settings={
            "kind": "image", "model": state.model, "layer": state.layer, "device": state.device,
            "patch": inp.meta["patch"], "image_size": inp.meta["size"][0]})
    inp = I.image_input(image, state.patch, state.stride, state.d_model, state.seed, state.patch_mask, state.patch_k)
    return inp, _run(state, inp, {"patch": state.patch, "stride": state.stride, "patch_k": state.patch_k})


def audio_run(state: ViewState, samples, rate: int) -> tuple:
    inp = I.audio_input(samples, rate, state.frame, state.hop, state.d_model, state.seed)
    return inp, _run(state, inp, {"frame": state.frame, "hop": state.hop, "rate": rate})


def graph_run(state: ViewState) -> tuple:
    n, edges, notes = I.parse_edges(state.edges if state.edges.strip() else I.preset_edges(state.graph))
    inp = I.graph_input(n, edges, state.d_model, state.seed, state.graph_mask)
    inp.notes += notes
    return inp, _run(state, inp, {"nodes": n, "edges": [list(e) for e in edges]})


def followed(state: ViewState, inp) -> int:
    """The token a modality page follows: a patch, a frame or a node (clamped)."""
    n = len(inp.labels)
    if inp.kind == "image":
        nH, nW = inp.meta["grid"]
        first = inp.meta.get("first", 0)  # a vision transformer's [CLS] comes before the patches
        if first and state.patch_at < 0:
            return 0  # what [CLS], the token its classifier reads, attends to
        at = ((nH // 2) * nW + nW // 2 if state.patch_at < 0 else state.patch_at) + first
    elif inp.kind == "audio":
        at = state.frame_at
    else:
        at = state.node
    return max(0, min(at, n - 1))


def input_figure(inp, result: AttentionResult, state: ViewState, style: F.FigureStyle, image=None) -> go.Figure:
    """What the followed token attends to, drawn on its own data: the image with a
    translucent map per head, the spectrogram with a line per head, or the graph."""
    at = followed(state, inp)
    w = result.weights[0, :, at].numpy()  # (H, L)
    if inp.kind == "image":
        nH, nW = inp.meta["grid"]
        first = inp.meta.get("first", 0)
        w = w[:, first:]  # (H, nH·nW): the weights on patches ([CLS]'s own column is not drawn)
        panels = [(_("head {h}").format(h=h), w[h].reshape(nH, nW)) for h in range(w.shape[0])]
        panels.append((_("mean over heads"), w.mean(0).reshape(nH, nW)))
        image = inp.meta.get("shown", image)  # a vision transformer's picture at its own resolution
        return F.overlay_figure(image, panels, (nH, nW), inp.meta["patch"], inp.meta["stride"], at - first, style,
                                title=_("what patch {patch} attends to (outlined), per head").format(
                                    patch=inp.labels[at]))
    if inp.kind == "audio":
        return F.spectrogram_figure(inp.meta["spectrogram"].numpy(), inp.labels, w, at, inp.meta["rate"],
                                    inp.meta["frame"], style)
    return F.graph_figure(inp.meta["n"], inp.meta["edges"], w.mean(0), at, state.seed, style)


def input_view_figure(inp, result: AttentionResult, state: ViewState, style: F.FigureStyle, image=None) -> go.Figure:
    """A modality page's figure for ``state.view``: the mean over heads (pooled, beside the
    grid), a view the image page offers (its entry's figure, with the followed patch, frame or
    node as the query), or (any other view) what the followed token attends to on its own data."""
    if state.view == "mean":
        return F.heatmap_figure(F.mean_data(result, 0, max_cells=F.DEFAULT_MAX_CELLS), style)
    if state.view in IMAGE_VIEWS:
        return VIEWS[state.view].figure(result, followed_state(state, inp), style)
    return input_figure(inp, result, state, style, image=image)


def followed_state(state: ViewState, inp) -> ViewState:
    """``state`` reading sequence 0 with the followed patch, frame or node as its query: the
    neuron view of a modality page (and its JSON) is that token's."""
    return state.with_(seq=0, query=followed(state, inp))
