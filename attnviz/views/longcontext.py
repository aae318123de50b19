"""The long-context view: a model's attention over a long text (``attnviz.analysis.longcontext``),
its heads labelled, and what a KV-cache policy keeps and costs (``attnviz.analysis.kvcache``).

``LongSettings`` declares the view's settings once (the CLI's flags come from it, as a page's
sidebar and link would); ``long_record`` is every number the view draws, ``long_figures`` its
figures. ``python -m attnviz render --page long-context --model M --text-file F --out x.json``
writes the record (``.png``/``.svg``/``.html``: the figures).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace

import numpy as np

from attnviz import jobs, limits
from attnviz.analysis.kvcache import POLICIES, kv_keep
from attnviz.analysis.longcontext import DEFINITIONS, LongAttention, long_attention
from attnviz.i18n import N_, _
from attnviz.inputs.longtexts import LONG_TEXTS, long_text, long_texts
from attnviz.jobs import Job
from attnviz.models.base import ModelError
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.plots.longcontext import (
    head_figure,
    kept_strip_figure,
    multiples_side,
    pooled,
    small_multiples_figure,
    window_figure,
)
from attnviz.plots.style import FigureStyle
from attnviz.run.config import AttentionConfig
from attnviz.settings.spec import OWN, setting, validate

PAGE = "long-context"
SINK_HEAD = 0.5  # a sink head puts at least half its attention, on average, on the first 4 tokens
LOCAL_HEAD = 32.0  # a local head's mean distance is at most this many tokens; a far head's is more
OWN_TEXTS = ("paste", "upload")  # the page's own text: pasted or uploaded (the CLI: --text-file)
TEXT_SOURCES = (*LONG_TEXTS, *OWN_TEXTS)
HEAD_RULE = (f"sink head: sink share ≥ {SINK_HEAD}; else local head: mean distance ≤ {LOCAL_HEAD:g} tokens; "
             "else far head")


@dataclass(frozen=True)
class LongSettings:
    """The view's settings, declared once: the Long context page's widgets and link, the CLI's flags."""

    text: str = setting(LONG_TEXTS[0], url="long_text", pages=OWN, choices=TEXT_SOURCES, label=N_("Text"),
                        help=N_("A shipped public-domain text, or your own: pasted, or a UTF-8 .txt file "
                                "(the CLI's --text-file)."))
    blocks: int = setting(limits.LONG_BLOCKS, url="long_blocks", pages=OWN, lo=1, hi=limits.MAX_LONG_BLOCKS,
                          label=N_("Blocks per side"), help=N_("The overview's resolution: blocks of queries × keys."))
    policy: str = setting("streaming", url="long_policy", pages=OWN, choices=POLICIES, label=N_("KV-cache policy"),
                          help=N_("kvpress's presses: streaming (sinks + recent), observed (H2O), snapkv, knorm."))
    ratio: float = setting(0.5, url="long_ratio", pages=OWN, lo=0.0, hi=limits.MAX_LONG_RATIO,
                           label=N_("Evicted fraction"), help=N_("The fraction of the cache evicted, in [0, 1)."))
    layer: int = setting(0, url="long_layer", pages=OWN, lo=0, hi=limits.MAX_LAYERS - 1, label=N_("Layer"))
    head: int = setting(0, url="long_head", pages=OWN, lo=0, hi=limits.MAX_HEADS - 1, label=N_("Head"))
    # The close-up's top-left corner: a click on the head's overview sets it; -1 puts the last queries
    # in view (where sinks show).
    q0: int = setting(-1, url="long_q0", pages=OWN, lo=-1, hi=limits.MAX_MODEL_LONG_TOKENS - 1,
                      label=N_("Close-up: first query"),
                      help=N_("The close-up's first row (a click on the overview sets it); -1: the last queries."))
    k0: int = setting(0, url="long_k0", pages=OWN, lo=0, hi=limits.MAX_MODEL_LONG_TOKENS - 1,
                      label=N_("Close-up: first key"), help=N_("The close-up's first column."))

    def validate(self) -> None:
        validate(self)

    def with_(self, **changes) -> LongSettings:
        return replace(self, **changes)


def head_labels(sink: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """(layers, H) "sink", "local" or "far", by ``HEAD_RULE``."""
    return np.where(sink >= SINK_HEAD, "sink", np.where(distance <= LOCAL_HEAD, "local", "far"))


def read_text_file(data: bytes, name: str = "the file") -> str:
    """A text file's contents: UTF-8 text within ``MAX_LONG_TEXT_BYTES``, else ``ValueError`` saying why."""
    if len(data) > limits.MAX_LONG_TEXT_BYTES:
        raise ValueError(f"{name} has {len(data) / 2**10:,.0f} KB; long texts are at most "
                         f"{limits.MAX_LONG_TEXT_BYTES // 2**10:,} KB (MAX_LONG_TEXT_BYTES).")
    if b"\x00" in data:
        raise ValueError(f"{name} is not a text file (it holds NUL bytes).")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text.") from None
    if not text.strip():
        raise ValueError(f"{name} is empty: give a text file with a few words.")
    return text


def long_and_kept(model, text, settings: LongSettings) -> tuple[LongAttention, object | None]:
    """The long attention and (a causal model's) policy at the settings' ratio; the policy is None for
    an encoder, or where the text is too short for it (its reason in the result's notes)."""
    settings.validate()
    result = long_attention(model, text, blocks=settings.blocks)
    if not result.causal:
        result.notes.append("An encoder keeps no cache to evict: no policy.")
        return result, None
    try:
        return result, kv_keep(model, text, policy=settings.policy, ratio=settings.ratio)
    except ValueError as e:
        result.notes.append(str(e))
        return result, None


def check_head(result: LongAttention, settings: LongSettings) -> None:
    if not 0 <= settings.layer < result.layers or not 0 <= settings.head < result.heads:
        raise ValueError(f"Layer {settings.layer}, head {settings.head} does not exist: {result.model} has "
                         f"{result.layers} layers × {result.heads} heads.")


def run_long(model, text, settings: LongSettings) -> tuple[LongAttention, object | None]:
    """``long_and_kept``, with the settings' layer and head checked against the model."""
    result, kept = long_and_kept(model, text, settings)
    check_head(result, settings)
    return result, kept


def long_record(result: LongAttention, kept, settings: LongSettings) -> dict:
    """Every number the view draws, and no more, so that its size does not grow with layers × heads × blocks²
    (a 30-layer model's full overviews were 484 MB of JSON): every head's small multiple (pooled) and numbers
    and label, the chosen head's overviews at full resolution and the attention each key receives in it, its
    close-up, and the policy's kept sets and cost."""
    side = multiples_side(result.layers, result.heads, result.overview.shape[-1])
    layer, head = settings.layer, settings.head
    rec = {
        "model": result.model, "tokens": result.tokens, "causal": result.causal, "block": result.block,
        "kv_heads": result.kv_heads, "layers": result.layers, "heads": result.heads, "definitions": DEFINITIONS,
        "head_rule": HEAD_RULE, "small_multiples": pooled(result.overview, side).tolist(),
        "overview": result.overview[layer, head].tolist(), "overview_mean": result.overview_mean[layer, head].tolist(),
        "received": result.received[layer, head].tolist(),
        "sink": result.sink.tolist(), "distance": result.distance.tolist(), "entropy": result.entropy.tolist(),
        "labels": head_labels(result.sink, result.distance).tolist(), "seconds": result.seconds,
        "chosen": {"layer": layer, "head": head}, "notes": result.notes,
    }
    q0, k0 = corner(result, settings.q0, settings.k0)  # the close-up the page shows for these settings
    rec["close_up"] = {"q0": q0, "k0": k0,
                       "weights": result.window(settings.layer, settings.head, q0, k0, CLOSE_UP).tolist()}
    if kept is not None:
        rec["policy"] = {"name": kept.policy, "ratio": kept.ratio, "n_kept": kept.n_kept, "kept": kept.kept,
                         "kept_before_last": kept.kept_before_last, "lost": kept.lost.tolist(), "kl": kept.kl,
                         "top_changed": kept.top_changed, "top_full": kept.top_full,
                         "top_compressed": kept.top_compressed, "notes": kept.notes}
    return rec


def long_figures(result: LongAttention, kept, settings: LongSettings, style: FigureStyle) -> list:
    """The small multiples, the chosen head's overview, its close-up and, for a causal model, the policy's
    strip."""
    n = len(result.tokens)
    figs = [small_multiples_figure(result.overview, result.sink, result.distance, style,
                                   title=f"{result.model}: every layer × head over {n:,} tokens (log10 block max)"),
            head_figure(result.overview[settings.layer, settings.head], result.block, n, style,
                        title=f"layer {settings.layer}, head {settings.head}: {result.overview.shape[-1]} blocks "
                              f"of {result.block} tokens a side")]
    q0, k0 = corner(result, settings.q0, settings.k0)
    figs.append(close_up(result, settings.layer, settings.head, q0, k0, style))
    if kept is not None:
        cost = (f"KL {kept.kl:.3g}, top token {'changes' if kept.top_changed else 'stays'}"
                if kept.kl is not None else "no language-model head")
        figs.append(kept_strip_figure(kept.kept, n, style, title=f"{kept.policy}, {kept.ratio:.0%} evicted: "
                                      f"{kept.n_kept:,} of {n:,} kept per KV head ({cost})"))
    return figs


# --- the Long context page (app_pages/long_context.py): its text, its background sweep, its pieces ---

TEXT_TITLES = {**long_texts(), "paste": N_("paste a text"), "upload": N_("upload a .txt file")}
# The page's sweeps: attentions by model, text and blocks; policies by model, text, policy and ratio.
JOBS = jobs.kind("long-context")
CLOSE_UP = 64  # a close-up's rows and columns on the page (at most limits.MAX_LONG_WINDOW)
CLICK_GRID = 48  # places a side where a click on a head's overview opens a close-up (markers: 48² at most)


def page_text(settings: LongSettings, pasted: str = "", uploaded: tuple[bytes, str] | None = None) -> str:
    """The text the page reads: the shipped one the settings name, the pasted one, or an uploaded
    file's ((bytes, name)); ``ValueError`` saying what is wrong with it."""
    if settings.text in LONG_TEXTS:
        return long_text(settings.text)
    if settings.text == "upload":
        if uploaded is None:
            raise ValueError(_("Upload a text file (.txt, UTF-8, at most {kb:,} KB).").format(
                kb=limits.MAX_LONG_TEXT_BYTES // 2**10))
        return read_text_file(*uploaded)
    if len(pasted.encode("utf-8", "replace")) > limits.MAX_LONG_TEXT_BYTES:
        raise ValueError(_("The pasted text is over {kb:,} KB (MAX_LONG_TEXT_BYTES): shorten it.").format(
            kb=limits.MAX_LONG_TEXT_BYTES // 2**10))
    if not pasted.strip():
        raise ValueError(_("The pasted text is empty: paste a few paragraphs (or choose a shipped text)."))
    return pasted


def long_key(model: str, text: str, *values) -> tuple:
    """The plain values a sweep depends on: the model's identity, the text's digest, and ``values``
    (the blocks; the policy and the ratio), not the head: another head reuses the sweep."""
    try:
        identity = open_model(model).key
    except ModelError:
        identity = (model,)
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return ("long-context", *identity, digest, *values)


def most_blocks(layers: int, heads: int) -> int:
    """The most blocks per side whose two overviews (layers × heads × B² float32 each) take at most half of what
    the server keeps for finished work, so that the page's attention is kept for everyone who opens it (a
    30-layer × 9-head model at 256 blocks would hold 130 MB, over the share, and be thrown away); at least 1,
    at most ``MAX_LONG_BLOCKS``."""
    fits = limits.cache_bytes("jobs") // 2 // (2 * 4 * max(1, layers * heads))
    return max(1, min(limits.MAX_LONG_BLOCKS, int(fits ** 0.5)))


def model_blocks(model: str) -> int:
    """``most_blocks`` for ``model``'s layers and heads (the random layer: one layer of its default heads)."""
    handle = open_model(model)
    if not handle.can(Cap.LOADS):
        return most_blocks(1, AttentionConfig().num_heads)
    loaded = handle.load()
    return most_blocks(loaded.layers, loaded.heads)


def _job(key: tuple, work, words: str) -> Job:
    return JOBS.ask(key, work, words, label="long")


def attention_job(model: str, text: str, settings: LongSettings, compute_with=None) -> Job:
    """The (one, shared) long attention of these values (``LongAttention``): running, finished (or
    failed: its message is kept until the inputs change), or started now in the background, on
    ``compute_with`` (the app's compute workers); ``Busy`` when the kind's share is taken."""
    settings.validate()
    run = compute_with or (lambda fn: fn())
    return _job(long_key(model, text, settings.blocks),
                lambda job: run(lambda: long_attention(model, text, blocks=settings.blocks, progress=job.report)),
                N_("reading the text, layer by layer"))


def policy_job(model: str, text: str, settings: LongSettings, compute_with=None) -> Job:
    """The (one, shared) kept sets and cost of the settings' policy and ratio (``KVKeep``), as
    ``attention_job``: a policy and a ratio of their own, the attention's sweep reused."""
    settings.validate()
    run = compute_with or (lambda fn: fn())

    def work(job: Job):
        kept = run(lambda: kv_keep(model, text, policy=settings.policy, ratio=settings.ratio))
        job.report(1.0)
        return kept

    return _job(long_key(model, text, settings.policy, float(settings.ratio)), work,
                N_("keeping and evicting, then the last token on both caches"))


def head_rows(result: LongAttention, kept=None) -> list[dict]:
    """A row per layer and head: its label (``HEAD_RULE``), sink share, mean distance, entropy and,
    under a policy, the share of the last token's attention on evicted tokens."""
    labels = head_labels(result.sink, result.distance)
    rows = []
    for layer in range(result.layers):
        for h in range(result.heads):
            row = {"layer": layer, "head": h, "label": str(labels[layer, h]), "sink": float(result.sink[layer, h]),
                   "distance": float(result.distance[layer, h]), "entropy": float(result.entropy[layer, h])}
            if kept is not None:
                row["lost"] = float(kept.lost[layer, h])
            rows.append(row)
    return rows


def multiples(result: LongAttention, style: FigureStyle):
    return small_multiples_figure(result.overview, result.sink, result.distance, style,
                                  title=f"{result.model}: every layer × head over {result.N:,} tokens "
                                        "(log10 block max)")


def head_overview(result: LongAttention, layer: int, head: int, style: FigureStyle):
    return head_figure(result.overview[layer, head], result.block, result.N, style,
                       title=f"layer {layer}, head {head}: {result.overview.shape[-1]} blocks of {result.block} "
                             "tokens a side (click a block for its exact weights)", click_grid=CLICK_GRID)


def corner(result: LongAttention, q: int | None = None, k: int | None = None, size: int = CLOSE_UP) -> tuple[int, int]:
    """A close-up's top-left (q0, k0): at a clicked block (q, k), else (q None or negative) the last
    queries on the first keys (where sinks show), kept inside the text."""
    n = result.N
    q0 = n - size if q is None or int(q) < 0 else int(q)
    k0 = 0 if k is None else int(k)
    return max(0, min(q0, n - 1)), max(0, min(k0, n - 1))


def close_up(result: LongAttention, layer: int, head: int, q0: int, k0: int, style: FigureStyle,
             size: int = CLOSE_UP):
    """The exact weights of queries q0… over keys k0… of one head (``LongAttention.window``)."""
    a = result.window(layer, head, q0, k0, size)  # (rows, columns)
    rows, cols = a.shape
    return window_figure(a, result.tokens, q0, k0, style, title=_(
        "layer {layer}, head {head}: exact weights of queries {q0}–{q1} over keys {k0}–{k1}").format(
        layer=layer, head=head, q0=f"{q0:,}", q1=f"{q0 + rows - 1:,}", k0=f"{k0:,}", k1=f"{k0 + cols - 1:,}"))


def corner_words(q0: int, size: int = CLOSE_UP) -> str:
    """The close-up's first query setting in words: -1 (its default) is the last ``size`` queries."""
    return _("the last {n} queries").format(n=size) if q0 < 0 else _("queries from {q0}").format(q0=f"{q0:,}")


def strip(kept, n: int, style: FigureStyle):
    return kept_strip_figure(kept.kept, n, style, title=f"{kept.policy}, {kept.ratio:.0%} evicted: {kept.n_kept:,} "
                             f"of {n:,} kept per KV head")


def mean_lost(kept) -> float:
    """The share of the last token's attention on evicted tokens, averaged over every layer and head."""
    return float(np.mean(kept.lost))


# --- the page for the CLI: ``render --page long-context`` (``data``: a text file's bytes) ----------------


def _cli_run(state, data: bytes | None) -> tuple[LongAttention, object | None]:
    settings = state.long
    if data is None and settings.text not in LONG_TEXTS:
        raise ValueError(f"The long-context page reads a text file: give --text-file FILE (or --long-text "
                         f"{' | '.join(LONG_TEXTS)}, a shipped text).")
    settings.validate()
    text = read_text_file(data, "--text-file") if data is not None else long_text(settings.text)
    return run_long(state.model, text, settings)


def all_figures(state, style: FigureStyle, data: bytes | None = None) -> list:
    """Every figure of the page (what ``--out x.html`` holds)."""
    return long_figures(*_cli_run(state, data), state.long, style)


def main_figure(state, style: FigureStyle, data: bytes | None = None):
    """The small multiples: what ``--out x.png`` or ``.svg`` holds."""
    return all_figures(state, style, data)[0]


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    return json.dumps(long_record(*_cli_run(state, data), state.long)).encode("utf-8")
