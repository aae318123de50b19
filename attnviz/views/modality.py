"""The image, audio and graph pages' settings, runs and figures: each input kind through the same
seam as text (``attnviz.run.run``) with the sidebar's random layer, or, on the image page
with a vision transformer chosen as the model, that model over its own patches.

The module of three pages: each has its own settings (``ImageSettings``, ``AudioSettings``,
``GraphSettings``) and its figure for the CLI (``image_figure``, ``audio_figure``, ``graph_figure``).
Whether Q, K and V are projected is shared by the three (the sidebar's, like the model).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import inputs as I
from attnviz import limits
from attnviz import plots as F
from attnviz.i18n import N_, _
from attnviz.inputs.audio import AUDIO_SAMPLES
from attnviz.inputs.graph import GRAPH_MASKS, GRAPH_PRESETS
from attnviz.inputs.image import IMAGE_SAMPLES, PATCH_MASKS
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.models.vision import image_tokens
from attnviz.run.result import AttentionResult
from attnviz.run.run import random_layer, run
from attnviz.settings.spec import OWN, setting
from attnviz.views.catalogue import PAGES, VIEWS, page, views_on

# The image page's views under its overlay (its entries in the table of views): the weights (the
# head grid, with the mean over heads beside it), does the head matter, the neuron view.
IMAGE_VIEWS = views_on(next(p.name for p in PAGES if p.input == "image"))




def _edges(raw: str, taken: dict) -> str:
    if raw.strip():
        I.parse_edges(raw)  # raises a readable ValueError naming the bad item
    return raw


@dataclass(frozen=True)
class ImageSettings:
    """The Image patches page's own settings."""

    image_sample: str = setting("shapes", choices=IMAGE_SAMPLES, pages=OWN, label=N_("Built-in picture"),
                                help=N_("Drawn in code: no download."))
    patch: int = setting(8, lo=2, hi=limits.MAX_PATCH, pages=OWN, label=N_("Patch size (px)"),
                         help=N_("Each patch is p × p pixels."))
    stride: int = setting(8, lo=1, hi=limits.MAX_PATCH, pages=OWN, label=N_("Stride (px)"),
                          help=N_("Distance between patches; stride < patch overlaps them."))
    patch_mask: str = setting(
        "none", choices=PATCH_MASKS, pages=OWN, label=N_("Mask"),
        help=N_("none; causal in raster order (left to right, top to bottom); window2d: patches within k rows and k "
                "columns."))
    patch_k: int = setting(1, lo=0, hi=limits.MAX_PATCH_REACH, pages=OWN, label="k (window2d)")
    patch_at: int = setting(-1, lo=-1, hi=limits.MAX_PATCHES - 1, pages=OWN, label=N_("Follow patch"))


@dataclass(frozen=True)
class AudioSettings:
    """The Audio frames page's own settings."""

    audio_sample: str = setting(
        "tone-chirp-tone", choices=AUDIO_SAMPLES, pages=OWN, label=N_("Built-in sound"),
        help=N_("Synthesised in code: a tone, a chirp, then the tone again; two alternating tones; clicks."))
    frame: int = setting(256, lo=limits.FRAME_SAMPLES[0], hi=limits.FRAME_SAMPLES[1], pages=OWN,
                         label=N_("Frame (samples)"), help=N_("Samples per frame (the STFT's n_fft)."))
    hop: int = setting(128, lo=1, hi=limits.FRAME_SAMPLES[1], pages=OWN, label=N_("Hop (samples)"),
                       help=N_("Samples between the starts of two frames."))
    frame_at: int = setting(5, lo=0, hi=limits.MAX_FRAMES - 1, pages=OWN, label=N_("Follow frame"))


@dataclass(frozen=True)
class GraphSettings:
    """The Graph nodes page's own settings."""

    graph: str = setting("two-communities", choices=GRAPH_PRESETS, pages=OWN, label=N_("Graph"),
                         help=N_("path, star, 3 × 3 grid, or two communities joined by one edge."))
    # A typed edge list wins over the preset when not empty.
    edges: str = setting("", convert=_edges, pages=OWN, label=N_("…or type edges"),
                         help=N_("Pairs of node numbers (0 to 63), separated by commas or new lines. Overrides the "
                                 "preset."))
    graph_mask: str = setting("adjacency", choices=GRAPH_MASKS, pages=OWN, label=N_("Mask"),
                              help=N_("adjacency + self-loops (graph attention), or none."))
    node: int = setting(0, lo=0, hi=limits.MAX_GRAPH_NODES - 1, pages=OWN, label=N_("Follow node"))


# The pages' own inputs, read through this module: a file's bytes checked (``ValueError`` saying what is wrong),
# or a shipped sample by name.
read_image, sample_image, read_wav, sample_audio = I.read_image, I.sample_image, I.read_wav, I.sample_audio


def is_vision(model: str) -> bool:
    """A vision transformer (ViT, DeiT, DINOv2): the Image patches page runs its own patches."""
    return open_model(model).can(Cap.PATCHES)


def input_run(name: str, state, data: bytes | None = None) -> tuple:
    """(input, result, image or None) of page ``name``, whose entry says which input it runs (an image, a
    sound or a graph), from a file's bytes or the state's built-in sample."""
    kind = page(name).input
    if kind == "image":
        image = I.read_image(data)[0] if data is not None else I.sample_image(state.image_patches.image_sample)
        return (*image_run(state, image), image)
    if kind == "audio":
        samples, rate = (I.read_wav(data)[:2] if data is not None else I.sample_audio(state.audio_frames.audio_sample))
        return (*audio_run(state, samples, rate), None)
    if kind == "graph":
        return (*graph_run(state), None)
    raise ValueError(f"{name} is not a page of other inputs.")


def _run(state, inp: I.Input, settings: dict) -> AttentionResult:
    """Self-attention of the sidebar's random layer over ``inp``, every step kept."""
    model = random_layer(state.config.with_(projections=state.input_projections))  # Q = K = V = X when off
    return run(inp, model, device=state.device, keep_steps=True, settings={
        "kind": inp.kind, "heads": state.heads, "d_model": state.d_model, "seed": state.seed,
        "device": state.device, "projections": state.input_projections, "mask": inp.mask_name or "none",
        **settings})


def image_run(state, image) -> tuple:
    """(input, result) of the image-patches page for an (H, W, 3) image: the sidebar's
    vision transformer over its own patches, or the random layer over the page's."""
    if is_vision(state.model):
        model = open_model(state.model).load()
        inp = image_tokens(model, image)
        return inp, run(inp, model, device=state.device, layer=state.layer, settings={
            "kind": "image", "model": state.model, "layer": state.layer, "device": state.device,
            "patch": inp.meta["patch"], "image_size": inp.meta["size"][0]})
    own = state.image_patches
    inp = I.image_input(image, own.patch, own.stride, state.d_model, state.seed, own.patch_mask, own.patch_k)
    return inp, _run(state, inp, {"patch": own.patch, "stride": own.stride, "patch_k": own.patch_k})


def audio_run(state, samples, rate: int) -> tuple:
    inp = I.audio_input(samples, rate, state.audio_frames.frame, state.audio_frames.hop, state.d_model, state.seed)
    return inp, _run(state, inp, {"frame": state.audio_frames.frame, "hop": state.audio_frames.hop, "rate": rate})


def graph_run(state) -> tuple:
    own = state.graph_nodes
    n, edges, notes = I.parse_edges(own.edges if own.edges.strip() else I.preset_edges(own.graph))
    inp = I.graph_input(n, edges, state.d_model, state.seed, state.graph_nodes.graph_mask)
    inp.notes += notes
    return inp, _run(state, inp, {"nodes": n, "edges": [list(e) for e in edges]})


def followed(state, inp) -> int:
    """The token a modality page follows: a patch, a frame or a node (clamped)."""
    n = len(inp.labels)
    if inp.kind == "image":
        nH, nW = inp.meta["grid"]
        first = inp.meta.get("first", 0)  # a vision transformer's [CLS] comes before the patches
        if first and state.image_patches.patch_at < 0:
            return 0  # what [CLS], the token its classifier reads, attends to
        at = ((nH // 2) * nW + nW // 2 if state.image_patches.patch_at < 0 else state.image_patches.patch_at) + first
    elif inp.kind == "audio":
        at = state.audio_frames.frame_at
    else:
        at = state.graph_nodes.node
    return max(0, min(at, n - 1))


def input_figure(inp, result: AttentionResult, state, style: F.FigureStyle, image=None) -> go.Figure:
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


def input_view_figure(inp, result: AttentionResult, state, style: F.FigureStyle, image=None) -> go.Figure:
    """A modality page's figure for ``state.view``: the mean over heads (pooled, beside the
    grid), a view the image page offers (its entry's figure, with the followed patch, frame or
    node as the query), or (any other view) what the followed token attends to on its own data."""
    if state.view == "mean":
        return F.heatmap_figure(F.mean_data(result, 0, max_cells=F.DEFAULT_MAX_CELLS), style)
    if state.view in IMAGE_VIEWS:
        return VIEWS[state.view].figure(result, followed_state(state, inp), style)
    return input_figure(inp, result, state, style, image=image)


def followed_state(state, inp) :
    """``state`` reading sequence 0 with the followed patch, frame or node as its query: the
    neuron view of a modality page (and its JSON) is that token's."""
    return state.with_(seq=0, query=followed(state, inp))


def page_result(name: str, state, data: bytes | None = None) -> tuple[AttentionResult, object]:
    """The run an image, audio or graph page's downloads hold, and ``state`` as that page reads it: its
    query is the token it follows (``followed_state``), so the neuron view's JSON is the page's."""
    inp, result, _image = input_run(name, state, data)
    return result, followed_state(state, inp)


def _page_figure(kind: str):
    name = next(p.name for p in PAGES if p.input == kind)  # the page of that input

    def figure(state, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
        inp, result, image = input_run(name, state, data)
        return input_view_figure(inp, result, state, style, image=image)
    figure.__doc__ = f"The {name} page's figure for the CLI: its input's attention in the chosen view."
    return figure


image_figure, audio_figure, graph_figure = (_page_figure(kind) for kind in ("image", "audio", "graph"))
