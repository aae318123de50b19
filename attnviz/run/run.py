"""One way into a run: an ``Input`` and a model -> ``AttentionResult``.

    input (tokens, X or ids, key padding, structural mask) ─┐
    model (per layer: weights; the followed layer's steps) ─┴─ run() -> AttentionResult

``run`` decides the memory plan before anything of size L·S is allocated, builds the
mask (the chosen kind & the input's structure & key padding), runs the model on the
chosen device and brings every tensor back to the CPU. ``compute(AttentionConfig)`` is
the text run the app, the CLI and the tests use; the image, audio and graph pages call
``run`` with their own inputs. ``shared_result(config)`` is ``compute(config)`` once per process:
the results cache that every session, the probe and the CLI share (``RESULTS``).
"""

from __future__ import annotations

import time
from dataclasses import fields

import torch

from attnviz import cache, limits
from attnviz.core.devices import resolve_device
from attnviz.core.masks import WINDOW_KINDS, build_mask
from attnviz.core.multihead import MultiHeadSteps
from attnviz.i18n import _, language
from attnviz.inputs.record import Input
from attnviz.inputs.text import lines_of
from attnviz.models.base import HeadParts, Model
from attnviz.models.door import open as open_model
from attnviz.models.random import RANDOM, RandomLayer
from attnviz.run.config import AttentionConfig
from attnviz.run.result import AttentionResult


def random_layer(config: AttentionConfig) -> RandomLayer:
    """The random layer these settings describe (its width, heads, seed and projections): the one mapping from
    a config to the layer, for a run and for the Long sequences page's tiles."""
    return RandomLayer(config.d_model, config.num_heads, config.seed, config.projections)


def model_for(config: AttentionConfig) -> Model:
    """The random layer these settings describe, or a pretrained model (loaded once per process)."""
    if config.model == RANDOM:
        return random_layer(config)
    return open_model(config.model).load()


# Its share of the cache budget (limits.CACHE_SHARES): the app's figures (ui.compute), the Q/K map's runs and
# the random layers hold the rest.
RESULTS = cache.named("results")


def shared_result(config: AttentionConfig, compute_with=None) -> AttentionResult:
    """``compute(config)``, once per process however many ask at once (shared, read-only).

    Keyed by the language too: a result's notes are written in the language of the session
    that computed it. ``compute_with(fn, config)``: where to compute it (the app's compute
    workers); by default, here."""
    work = (lambda: compute_with(compute, config)) if compute_with else (lambda: compute(config))
    return RESULTS.get_or_compute(("result", config, language()), work)


def compute(config: AttentionConfig) -> AttentionResult:
    """Run multi-head attention for ``config`` and keep every intermediate (or, for a
    text too long for that within ``attnviz.limits``' memory budget, the weights only:
    ``result.complete`` is then False).

    Raises ``ValueError`` with a user-facing message for bad settings or text, or a run
    whose weights alone are over the budget.
    """
    config.validate()
    t0 = time.perf_counter()
    lines = lines_of(config.text, "text")
    model = model_for(config)
    load_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    read = dict(pad_to=config.pad_to, tokenize_mode=config.tokenize_mode, positional=config.positional,
                max_tokens=config.max_tokens)
    src = None
    if config.source.strip():
        src = lines_of(config.source, "source text")
        if len(src) != len(lines):
            if len(src) != 1:
                raise ValueError(f"The source has {len(src)} lines but the text has "
                                 f"{len(lines)}: give one source line, or one per text line.")
            src = src * len(lines)  # one source line serves every text line
    if getattr(model, "seq2seq", False):  # an encoder–decoder: the stack decides queries and keys
        inp, source = model.read_pair(lines, src, config.stack, **read)
    else:
        if src is not None and not model.honours_masks:
            raise ValueError(_("Cross-attention needs the random model or an encoder–decoder (T5, BART): {model} "
                               "attends within one text.").format(model=model.name))
        inp = model.read_text(lines, **read)
        source = None if src is None else model.read_text(src, kind="source text", **read)
    timings = {"tokenize": (time.perf_counter() - t0) * 1e3}
    if model.name != RANDOM:
        timings = {"load": load_ms, **timings}
    return run(inp, model, source=source, mask=config.mask, window=config.window, device=config.device,
               dropout=config.dropout, layer=config.layer, config=config, timings=timings)


def run(inp: Input, model: Model, *, source: Input | None = None, mask: str = "none", window: int = 0,
        device: str = "cpu", dropout: float = 0.0, layer: int = 0, keep_steps: bool = False,
        config: AttentionConfig | None = None, settings: dict | None = None,
        timings: dict[str, float] | None = None) -> AttentionResult:
    """Attention of ``model`` over ``inp`` (keys and values from ``source`` when given).

    ``mask``: one of ``attnviz.core.masks.MASK_KINDS``, combined with ``inp.mask`` (the
    data's own structure) and key padding. ``keep_steps``: refuse a run whose every step
    does not fit the budget, rather than keep the weights only.
    """
    timings = dict(timings or {})
    notes = list(inp.notes)
    kv = inp if source is None else source
    N, L, S = len(inp.tokens), inp.L, kv.L
    # Decide before allocating anything of size L·S: every step kept, the weights only, or refuse.
    if keep_steps:
        limits.check_budget(limits.RunSize(N, model.heads, L, S, model.width))
        plan = "full"
    else:
        plan = model.plan(N, L, S)
    if plan == "lean":
        notes.append(_("This text is long: only the weights are kept (not the scores before softmax), to stay "
                       "within the server's memory budget."))
    attn_mask, mask_name = _mask(inp, source, model, mask, window, notes)
    if dropout and not model.honours_masks:
        notes.append(_("Dropout is off for a pretrained model (it runs as in inference)."))
    t0 = time.perf_counter()
    dev = resolve_device(device)
    out = model.forward(inp, source, attn_mask, device=dev, lean=plan == "lean", dropout=dropout, layer=layer)
    timings["attention"] = (time.perf_counter() - t0) * 1e3
    x = out.layer_input
    x_kv = x if source is None else source.vectors()
    timings.update(inp.timings_ms)  # what reading the input measured (a text's embedding)
    steps = to_cpu(out.steps)
    parts = out.parts
    if parts is None and out.module is not None and steps.v.shape[-1] > 0:  # attnviz's own layer
        parts = HeadParts.of_module(out.module, steps)
    if settings is None:
        # Its fields are plain values: a shallow dict equals asdict's, without its deep copies.
        settings = {f.name: getattr(config, f.name) for f in fields(config)} if config is not None else {}
    layers = int(out.layer_weights.shape[0]) if out.layer_weights is not None else 1
    settings = ran_with(settings, model, layers=layers, mask_name=mask_name)
    return AttentionResult(
        # source_tokens: its own lists, so a view can tell query rows from key rows
        config=config, tokens=inp.tokens, source_tokens=[list(t) for t in kv.tokens], lengths=inp.lengths,
        source_lengths=kv.lengths,
        embeddings=x, source_embeddings=x_kv, mask=attn_mask, steps=steps, model=out.module,
        device=str(dev), timings_ms=timings, notes=notes, layer_weights=out.layer_weights,
        last_hidden=out.last_hidden, kind=inp.kind, model_name=model.name if config is None else config.model,
        layer=layer, mask_name=mask_name, dropout=dropout, settings=settings, next_tokens=out.next_tokens, parts=parts,
    )  # fmt: skip


# What only the random layer reads: a model with its own weights and tokenizer ignores them.
RANDOM_ONLY = ("seed", "projections", "positional", "tokenize_mode", "window")


def ran_with(settings: dict, model: Model, *, layers: int, mask_name: str) -> dict:
    """The settings a run records: what ran, not what the sidebar held. A model with its own
    heads, width, layers and mask (pretrained, a folder, an attention file) puts its own in
    place of the random layer's, whose settings did not apply (MiniLM's record says 12 heads,
    width 384 and the padding it masks, not the sidebar's 4 heads, 64 and causal); the
    random layer's own settings are what ran already."""
    if model.honours_masks:
        return settings
    ran = {k: v for k, v in settings.items() if k not in RANDOM_ONLY}
    ran.update(num_heads=int(model.heads), layers=layers, mask=mask_name)
    if model.width:  # 0: weights given without their vectors (an attention file): no width to name
        ran["d_model"] = int(model.width)
    else:
        ran.pop("d_model", None)
    if "dropout" in ran:
        ran["dropout"] = 0.0  # a pretrained model runs as in inference
    return ran


def _mask(inp: Input, source: Input | None, model: Model, kind: str, window: int,
          notes: list[str]) -> tuple[torch.Tensor | None, str]:
    """The run's bool mask, broadcastable to (N, H, L, S), and what it is called."""
    kv = inp if source is None else source
    L, S = inp.L, kv.L
    if not model.honours_masks:  # a pretrained model: its own mask (padding, or causal), as in training
        own = model.own_mask(inp) if hasattr(model, "own_mask") else "padding"
        if kind in ("none", "padding", own):
            pass  # what the sidebar asks for is what the model does: nothing to say
        elif own == "padding" and source is None:
            notes.append(_("{model} is a bidirectional encoder: every token sees every real token. Only padding is "
                           "masked; the sidebar's mask applies to the random model.").format(model=model.name))
        else:
            notes.append(_("{model} was trained with its own mask ({own}): it is what blocks keys here; the sidebar's "
                           "mask applies to the random model.").format(model=model.name, own=own))
        return build_mask(own, L, S, lengths=kv.lengths), own  # (N, 1, L, S) or (N, 1, 1, S)
    mask = build_mask(kind, L, S, window=window, lengths=kv.lengths if kv.padded else None)
    if kind in WINDOW_KINDS and window >= max(L, S) - 1:
        notes.append(_("The window ({w}) covers the whole text ({n} tokens), so it blocks nothing.").format(
            w=window, n=max(L, S)))
    if kind == "padding" and not kv.padded and source is None:
        notes.append(_("The padding mask blocks [PAD] keys only, and this text has none: it acts on several lines "
                       "of different lengths (a padded batch), or with Pad to (More settings)."))
    if kv.padded and kind == "none":
        notes.append(_("Some keys are [PAD] tokens and the mask is 'none', so queries attend to padding. Choose "
                       "any other mask to block it."))
    if inp.mask is not None:  # the data's own structure: a graph's adjacency, an image's window
        mask = inp.mask if mask is None else mask & inp.mask
        kind = inp.mask_name if kind == "none" else f"{kind}+{inp.mask_name}"
    return mask, kind


def to_cpu(steps: MultiHeadSteps) -> MultiHeadSteps:
    """Every tensor of ``steps`` on the CPU, detached (as they are already after a CPU run
    under ``no_grad``: those are left alone, for every torch call lets another thread take
    the GIL, and a class joining at once has the server's event loop waiting for it)."""
    a = steps.attention

    def mv(t):
        if t is None or (t.device.type == "cpu" and not t.requires_grad):
            return t
        return t.detach().cpu()

    att = a.map(mv)
    return MultiHeadSteps(mv(steps.q), mv(steps.k), mv(steps.v), att, mv(steps.joined),
                          mv(steps.output))
