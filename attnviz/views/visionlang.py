"""The vision-language page's settings, runs, figures and record: where a vision-language model's text looks in
its picture. It opens on the tiny model that learns to look (``attnviz.learn.look``, trained in the worker process
as Watch it learn's model is), and reads any vision-language folder the server offers with ``vl_attention``, in a
background job (``JOBS``).

A reading (``attnviz.analysis.vlattention.VLAttention``, the tiny model's from ``look_attention``) is drawn as:
the picture under one text token's attention, each patch over its own box, for the mean over a layer's heads and
each head (``look_overlay``; one head opened, large: ``opened_head_overlay``); the layer × head map of how much of the
token's attention goes to the picture, its localization heads outlined (``share_figure``); the vision tower's own
attention (``tower_figure``); the training, checkpoint by checkpoint (``training_figure``, ``probe_figure``).
``python -m attnviz render --page vision-language --model M --image F --text "…" --token K --out x.json`` writes
what the page draws (``numbers``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go

from attnviz import jobs, limits
from attnviz.analysis.vlattention import VLAttention, vl_attention
from attnviz.analysis.vltower import SINK_FACTOR as SINK_FACTOR
from attnviz.analysis.vltower import tower_attention, visual_sinks
from attnviz.i18n import N_, _
from attnviz.inputs.text import DEFAULT_TEXT
from attnviz.learn import shapes as S
from attnviz.learn.look import LookSettings as LookSettings
from attnviz.learn.look import load_looking
from attnviz.learn.look import look_attention as read_tiny
from attnviz.learn.look import probe_record as probe_record
from attnviz.learn.shapes import BUILT_IN, built_in
from attnviz.learn.worker import TRAININGS as TRAININGS
from attnviz.learn.worker import key_of as key_of
from attnviz.learn.worker import trained_weights
from attnviz.models import door
from attnviz.models.registry import LOOKING
from attnviz.models.vlgrid import grid_boxes
from attnviz.models.vlm import ARCHITECTURES, chat_prompt, load_vlm, read_picture
from attnviz.plots.charts import lines_figure
from attnviz.plots.lens import clicked_grid_cell as clicked_grid_cell  # the share map's cells: the lens grid's way
from attnviz.plots.looking import picture_overlay, share_map
from attnviz.plots.style import FigureStyle
from attnviz.settings.spec import OWN, setting

UPLOAD = "upload"
ENLARGE = 10  # a built-in picture's pixels, each drawn 10 × 10 for a real model (its processor resizes it anyway)
MOST_PANELS = 12  # heads drawn one by one; a layer of more draws the mean, the opened head and its best seven

DEFINITIONS = {
    "overlay": N_("Each patch's opacity is the weight the chosen text token gives that patch: a row of the layer's "
                  "attention, softmax(q·kᵀ/√d), at the picture's tokens, drawn over the patch's box in your "
                  "picture's pixels."),
    "share": N_("Share on the picture: the sum of a token's attention weights on every image token (1: it looks "
                "only at the picture)."),
    "localization": N_("Localization heads (Kang et al. 2025, as vl-saliency ranks them): heads whose attention "
                       "on the picture is above the elbow of all heads' shares, then most concentrated (lowest "
                       "spatial entropy)."),
    "sinks": N_("A visual sink: a patch that every text token that sees the picture gives at least {k}× the even "
                "share (1 / patches) of its picture attention, in the mean over the layer's heads."),
    "tower": N_("The vision tower's own attention: in the layer whose output the language model receives, the "
                "mean over its heads of the CLS token's row (CLIP), or of every patch's row (SigLIP)."),
}
READS = ", ".join(ARCHITECTURES.values())  # the vision-language folders read, named for the page


def vl_definition(name: str) -> str:
    """One of ``DEFINITIONS``, translated, its numbers filled in."""
    return _(DEFINITIONS[name]).format(k=f"{SINK_FACTOR:g}")


@dataclass(frozen=True)
class Settings:
    """The page's own settings; its training's are ``LookSettings``."""

    picture: str = setting(BUILT_IN[0], url="vl_picture", pages=OWN, choices=(*BUILT_IN, UPLOAD),
                           label=N_("Picture"),
                           help=N_("A built-in picture of shapes, or your own (PNG or JPEG). An uploaded picture "
                                   "cannot travel in a link: a link opens the built-in one."))
    token: int = setting(-1, url="token", pages=OWN, lo=-(limits.MAX_TOKENS + limits.MAX_VL_GENERATE),
                         hi=limits.MAX_TOKENS + limits.MAX_VL_GENERATE - 1, label=N_("Text token"),
                         help=N_("Whose attention is drawn: an index into the prompt's and answer's tokens (−1: the "
                                 "last)."))
    layer: int = setting(-1, url="vl_layer", pages=OWN, lo=-1, hi=limits.MAX_LAYERS - 1, label=N_("Layer"),
                         help=N_("−1: the layer of the token's first localization head."))
    head: int = setting(-1, url="vl_head", pages=OWN, lo=-1, hi=limits.MAX_HEADS - 1, label=N_("Head opened"),
                        help=N_("−1: none; a click on the layer × head map opens one."))
    sinks: bool = setting(True, url="vl_sinks", pages=OWN, label=N_("Scale without sinks"),
                          help=N_("Their weight is drawn at the scale's end, so that the other patches' differences "
                                  "show."))
    checkpoint: int = setting(-1, url="vl_checkpoint", pages=OWN, lo=-1,
                              hi=limits.MAX_LEARN_STEPS // limits.LOOK_EVERY, label=N_("Checkpoint"),
                              help=N_("Which checkpoint's look at the probe picture to show (−1: the latest)."))
    control: bool = setting(False, url="vl_control", pages=OWN, label=N_("Train the blank-picture control alongside"),
                            help=N_("The same questions over empty pictures: it can only guess, and finds nothing."))
    generate: int = setting(8, url="vl_generate", pages=OWN, lo=0, hi=limits.MAX_VL_GENERATE,
                            label=N_("Answer tokens"), help=N_("A model folder answers with this many greedy tokens."))


# --- pictures ------------------------------------------------------------------------------------------------------

def picture_for(model: str, settings: Settings, data: bytes | None) -> np.ndarray:
    """The picture ``model`` is shown, (H, W, 3) uint8: a built-in one (enlarged for a model folder, whose
    processor resizes it), or ``data`` (PNG or JPEG, within the bounds; for the tiny model, fitted into its
    SIDE × SIDE pixels with its shape kept: ``shapes.letterbox``)."""
    if settings.picture != UPLOAD:
        pixels, _question = built_in(settings.picture)
        return pixels if is_looking(model) else pixels.repeat(ENLARGE, 0).repeat(ENLARGE, 1)
    if data is None:
        raise ValueError(_("No picture was given: upload a PNG or JPEG (the CLI: --image FILE), or choose a built-in "
                           "one."))
    img = read_picture(data)
    return np.asarray(S.letterbox(img) if is_looking(model) else img, dtype=np.uint8)


def example_text(state) -> str | None:
    """The built-in picture's own question, where the sidebar's text is the app's default sentence or another
    built-in picture's question (it follows the picture chosen); None where the text is the user's or is it."""
    if state.vl.picture == UPLOAD:
        return None
    own = built_in(state.vl.picture)[1]
    others = {built_in(name)[1] for name in BUILT_IN}
    return own if state.text != own and (state.text == DEFAULT_TEXT or state.text.strip() in others) else None


def question_of(state) -> str:
    """The question asked: the sidebar's text, or, where it is the app's default sentence, the built-in picture's
    own question (the tiny model knows only its questions' words)."""
    if state.text.strip() and state.text != DEFAULT_TEXT:
        return state.text.strip()
    picture = state.vl.picture if state.vl.picture != UPLOAD else BUILT_IN[0]
    return built_in(picture)[1]


# --- the tiny model's training ---------------------------------------------------------------------------------------

def trainings_of(state) -> list[LookSettings]:
    """The training the page shows, and its blank-picture control where the page trains one."""
    return [state.look] + ([state.look.control()] if state.vl.control else [])


def is_looking(model: str) -> bool:  # the tiny model that learns to look (trained on the page, not loaded)
    return door.open(model).can(door.Cap.SEES_PICTURES, door.Cap.TRAINED_HERE)


def looking_model_of(settings: LookSettings):
    """The trained tiny model of ``settings``, or None before its worker has written its weights."""
    path = TRAININGS.weights_file(key_of(settings))
    return None if path is None else load_looking(path)


def training_figure(checkpoints: list[dict], control: list[dict] | None, style: FigureStyle) -> go.Figure:
    """Accuracy on the held-out pictures and the best head's share on the named shape, step by step."""
    steps = [c["step"] for c in checkpoints]
    series = {_("correct answers"): [c["accuracy"] for c in checkpoints],
              _("best head's look at the shape"): [c["best"]["share"] for c in checkpoints]}
    dashed = ()
    if control:
        n = len(checkpoints)
        name = _("control (blank pictures): correct answers")
        series[name] = [c["accuracy"] for c in control[:n]] + [None] * max(0, n - len(control))
        dashed = (name,)
    return lines_figure(steps, series, _("as it learns: answers, and where it looks"), style, x_title=_("step"),
                        y_title=_("share"), log_x=False, dash=dashed)


def probe_figure(record: dict, checkpoint: dict, style: FigureStyle) -> go.Figure:
    """The probe picture under the answer position's attention at ``checkpoint``: the mean over the best head's
    layer (the best at the last checkpoint) and that head."""
    best = record["checkpoints"][-1]["best"]
    maps = np.asarray(checkpoint["probe_maps"], dtype=np.float32)[best["layer"]]  # (H, GRID, GRID)
    pixels = (np.asarray(record["probe"]["pixels"], dtype=np.float32).transpose(1, 2, 0) * 255).round()
    panels = [(_("mean over layer {layer}'s heads").format(layer=best["layer"]), maps.mean(0)),
              (_("head L{layer} H{head}").format(**best), maps[best["head"]])]
    title = _("Step {step}: where “?” looks, asked “{q}” (the answer: {a})").format(
        step=checkpoint["step"], q=" ".join(record["probe"]["words"][1:]), a=record["probe"]["answer"])
    return picture_overlay(pixels.astype(np.uint8), panels, grid_boxes(*pixels.shape[1::-1], S.GRID), style,
                           title=title)


# --- a reading ------------------------------------------------------------------------------------------------------

JOBS = jobs.kind("vision-language")  # model folders' readings, by model, picture, question and answer tokens


def vl_key(model: str, picture: np.ndarray, question: str, settings: Settings, look: LookSettings) -> tuple:
    """The plain values a reading depends on: the model's identity (the tiny model's training), the picture's
    digest, the question, the answer's length."""
    identity = ("looking", key_of(look)) if is_looking(model) else door.open(model).key
    digest = hashlib.sha256(picture.tobytes() + str(picture.shape).encode()).hexdigest()
    return ("vision-language", *identity, digest, question, settings.generate)


def reading_job(model: str, picture: np.ndarray, question: str, settings: Settings, key: tuple,
                compute_with=None) -> jobs.Job:
    """A model folder's reading (``vl_attention``: ``settings.generate`` greedy tokens), in the background: the one
    job of ``key``, shared by everyone who asks; ``Busy`` when the kind's share is taken."""
    run = compute_with or (lambda fn: fn())

    def work(job: jobs.Job):
        job.report(0.05, N_("loading the model"))
        vlm = run(lambda: load_vlm(model))
        job.report(0.4, N_("answering, then reading its attention to the picture"))
        r = run(lambda: vl_attention(vlm, picture, chat_prompt(vlm, question), generate=settings.generate))
        r.vision = _tower_or_why(vlm, r)
        job.report(1.0)
        return r

    return JOBS.ask(key, work, N_("waiting for its turn"), label="vl")


def _tower_or_why(vlm, r: VLAttention) -> tuple:
    try:
        pixels = r.pixel_inputs["pixel_values"]
        return tower_attention(vlm, pixels if pixels.dim() == 5 else pixels[:1])
    except (ValueError, KeyError) as e:
        return (None, str(e), -1)


def shown_view(r: VLAttention) -> int:
    """The map the page draws: the picture's finest view (LLaVA-NeXT's and Idefics3's tiles, after the whole)."""
    return len(r.maps) - 1


def opened(r: VLAttention, settings: Settings) -> tuple[int, int, int | None]:
    """(token, layer, head or None) the settings open, checked against the reading: a bound the run sets."""
    t = r.token_index(settings.token)
    v = shown_view(r)
    layer = r.localization_heads(t, max_keep=1, image=v)[0][0] if settings.layer < 0 else settings.layer
    if layer >= r.layers:
        raise ValueError(_("Layer {layer} is out of range: this model has layers 0 to {last}.").format(
            layer=layer, last=r.layers - 1))
    if settings.head >= r.heads:
        raise ValueError(_("Head {head} is out of range: this model has heads 0 to {last}.").format(
            head=settings.head, last=r.heads - 1))
    return t, layer, settings.head if settings.head >= 0 else None


def sinks_of(r: VLAttention, layer: int) -> np.ndarray | None:
    return visual_sinks(r.maps[shown_view(r)][layer])


def sinks_words(r: VLAttention, layer: int) -> str:
    """What the sinks of ``layer`` are, in a sentence."""
    sinks = sinks_of(r, layer)
    if sinks is None:
        return _("Visual sinks need two text tokens that see the picture; here fewer do (in a causal model a word "
                 "before the picture cannot see it).")
    if not sinks.any():
        return _("No visual sink in layer {layer}: no patch takes {k}× the even share from every token.").format(
            layer=layer, k=f"{SINK_FACTOR:g}")
    return _("{n} visual sink(s) in layer {layer}, outlined in dots: every token gives them {k}× the even share or "
             "more, whatever it asks.").format(n=int(sinks.sum()), layer=layer, k=f"{SINK_FACTOR:g}")


PICKER_BUTTONS = 12  # on a projector, a longer reading picks its token from a list (buttons push the picture down)


def token_picker(r: VLAttention, present: bool) -> str | None:
    """The token picker's kind: its buttons, or (None) a list on a projector for a reading of many tokens."""
    return None if present and len(r.tokens) > PICKER_BUTTONS else "segmented"


def token_options(r: VLAttention) -> list[int]:
    """The token picker's options: 0 … T − 2, then −1 for the last (the default, which a link leaves out)."""
    return [*range(len(r.tokens) - 1), -1]


def token_shown(r: VLAttention, token: int) -> tuple[int, str | None]:
    """(the option of ``token_options`` that ``token`` names, or the last (−1); a warning where out of range)."""
    T = len(r.tokens)
    if -T <= token < T:
        return (-1 if token % T == T - 1 else token % T), None
    return -1, _("Token {token} is out of range: this reading has {n} text tokens. The last is shown.").format(
        token=token, n=T)


def look_overlay(r: VLAttention, picture: np.ndarray, settings: Settings, style: FigureStyle) -> go.Figure:
    """The picture under the token's attention, for the mean over the layer's heads and each head (a layer of more
    than ``MOST_PANELS`` heads: the opened one and the seven that give the picture most; presenting: the opened one,
    or the layer's best localization head); sinks outlined, and left out of the colour scale where the settings
    say."""
    t, layer, head = opened(r, settings)
    maps = r.maps[shown_view(r)][layer, :, t].numpy()  # (H, rows, cols)
    heads = list(range(r.heads))
    ranked = [int(h) for h in np.argsort(-r.image_share[layer, :, t].numpy(), kind="stable")]
    if style.presenting:  # one screen on a projector: the mean and one head, the opened one or this layer's best
        heads_ranked = r.localization_heads(t, max_keep=None, image=shown_view(r))
        best = next((h for lay, h in heads_ranked if lay == layer), ranked[0])
        heads = [head if head is not None else best]
    elif r.heads > MOST_PANELS:
        heads = ([head] if head is not None else []) + [h for h in ranked if h != head][:7]
    panels = [(_("mean over heads"), maps.mean(0))] + [(_("head {h}").format(h=h), maps[h]) for h in heads]
    sinks = sinks_of(r, layer)
    top = None
    if settings.sinks and sinks is not None and sinks.any() and not sinks.all():
        top = max(float(z[~sinks].max()) for _name, z in panels)
    title = (_("“{token}” → the picture, layer {layer}") if style.presenting else
             _("“{token}” → the picture, layer {layer}: each patch's weight over its box")).format(
        token=r.tokens[t], layer=layer)
    fig = picture_overlay(picture, panels, r.boxes[shown_view(r)], style, title=title, marked=sinks, top=top)
    if style.presenting:  # the picture and its overlay on one screen of 768 px, under the token picker
        fig.update_layout(height=min(int(fig.layout.height), 420))
    return fig


def opened_head_overlay(r: VLAttention, picture: np.ndarray, settings: Settings,
                        style: FigureStyle) -> go.Figure | None:
    """The opened head's overlay alone, large (None: no head opened)."""
    t, layer, head = opened(r, settings)
    if head is None:
        return None
    z = r.maps[shown_view(r)][layer, head, t].numpy()
    return picture_overlay(picture, [(_("head L{layer} H{head}").format(layer=layer, head=head), z)],
                           r.boxes[shown_view(r)],
                           style, title=_("“{token}”, head L{layer} H{head}: share on the picture {share}").format(
                               token=r.tokens[t], layer=layer, head=head,
                               share=f"{float(r.image_share[layer, head, t]):.2f}"), marked=sinks_of(r, layer))


def share_figure(r: VLAttention, settings: Settings, style: FigureStyle) -> go.Figure:
    t, _layer, _head = opened(r, settings)
    title = _("“{token}”: the share of its attention on the picture, by layer and head<br>outlined: its "
              "localization heads (Kang et al. 2025), best first").format(token=r.tokens[t])
    marked = r.localization_heads(t, image=shown_view(r))
    return share_map(r.image_share[:, :, t].numpy(), marked, style, title=title)


def tower_figure(r: VLAttention, picture: np.ndarray, style: FigureStyle) -> go.Figure | None:
    """The vision tower's own attention over the picture (None where the reading has none: ``tower_words``)."""
    row, kind, layer = r.vision or (None, "", -1)
    if row is None:
        return None
    name = _("CLS's row") if kind == "CLIP" else _("the mean row")
    fig = picture_overlay(picture, [(name, row)], r.boxes[0], style, title=_(
        "The {kind} vision tower's own attention, layer {layer}, mean over its heads").format(kind=kind, layer=layer))
    return fig.update_layout(height=min(int(fig.layout.height), 460))  # one panel: not the page's whole width tall


def tower_words(r: VLAttention) -> str:
    """Why a reading has no tower map, in words ("" where it has one)."""
    row, why, _layer = r.vision or (None, "", -1)
    return _("The tiny model has no vision tower: its patches enter as a linear embedding of their pixels.") \
        if r.vision is None else "" if row is not None else why  # only a folder's reading asks its tower


# --- the CLI --------------------------------------------------------------------------------------------------------

def vl_cli_reading(state, data: bytes | None) -> tuple[VLAttention, np.ndarray]:
    """The reading ``render --page vision-language`` draws: the tiny model trained here first where no one has
    (seeded, on one thread: the page's numbers), or a model folder read now."""
    picture = picture_for(state.model, state.vl if data is None else replace(state.vl, picture=UPLOAD), data)
    question = question_of(state)
    if is_looking(state.model):
        return read_tiny(load_looking(trained_weights(state.look)), picture, question), picture
    if not door.open(state.model).can(door.Cap.SEES_PICTURES):
        raise ValueError(f"{state.model} is not a vision-language model: this page reads {LOOKING} or a VLM folder.")
    vlm = load_vlm(state.model)
    r = vl_attention(vlm, picture, chat_prompt(vlm, question), generate=state.vl.generate)
    r.vision = _tower_or_why(vlm, r)
    return r, picture


def main_figure(state, style: FigureStyle, data: bytes | None = None) -> go.Figure:
    r, picture = vl_cli_reading(state, data)
    return look_overlay(r, picture, state.vl, style)


def all_figures(state, style: FigureStyle, data: bytes | None = None) -> list:
    r, picture = vl_cli_reading(state, data)
    figs = [look_overlay(r, picture, state.vl, style), share_figure(r, state.vl, style)]
    return figs + [f for f in (opened_head_overlay(r, picture, state.vl, style), tower_figure(r, picture, style)) if f]


def vl_record(model: str, r: VLAttention, picture: np.ndarray, settings: Settings) -> dict:
    """Every number the page draws for the opened token of ``model``'s reading: its maps (layers, heads, rows, cols),
    each patch's box, every token's share on the picture, the localization heads, the sinks, the tower's map."""
    (t, layer, head), v = opened(r, settings), shown_view(r)
    sinks = sinks_of(r, layer)
    row, kind, tower_layer = r.vision or (None, "", -1)
    return {"model": model, "arch": r.arch, "tokens": r.tokens, "ids": r.ids, "prompt_length": r.prompt_length,
            "answer": r.answer, "token": t, "layer": layer, "head": head, "picture_size": list(picture.shape[:2]),
            "view": v, "maps": r.maps[v][:, :, t].tolist(), "boxes": r.boxes[v].tolist(),
            "image_share": r.image_share.tolist(),
            "localization_heads": [list(x) for x in r.localization_heads(t, image=v)],
            "sinks": None if sinks is None else sinks.tolist(), "sink_factor": SINK_FACTOR,
            "tower": None if row is None else {"kind": kind, "layer": tower_layer, "map": row.tolist()},
            "definitions": {k: vl_definition(k) for k in DEFINITIONS}}


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    r, picture = vl_cli_reading(state, data)
    return json.dumps(vl_record(state.model, r, picture, state.vl), ensure_ascii=False, sort_keys=True).encode("utf-8")
