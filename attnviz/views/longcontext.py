"""The long-context view: a model's attention over a long text (``attnviz.analysis.longcontext``),
its heads labelled, and what a KV-cache policy keeps and costs (``attnviz.analysis.kvcache``).

``LongSettings`` declares the view's settings once (the CLI's flags come from it, as a page's
sidebar and link would); ``long_record`` is every number the view draws, ``long_figures`` its
figures. ``python -m attnviz render --page long-context --model M --text-file F --out x.json``
writes the record (``.png``/``.svg``/``.html``: the figures).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attnviz import limits
from attnviz.analysis.kvcache import POLICIES, kv_keep
from attnviz.analysis.longcontext import DEFINITIONS, LongAttention, long_attention
from attnviz.plots.longcontext import head_figure, kept_strip_figure, multiples_side, pooled, small_multiples_figure
from attnviz.plots.style import FigureStyle
from attnviz.settings.spec import setting, validate

PAGE = "long-context"
PAGES = (PAGE,)
SINK_HEAD = 0.5  # a sink head puts at least half its attention, on average, on the first 4 tokens
LOCAL_HEAD = 32.0  # a local head's mean distance is at most this many tokens; a far head's is more
HEAD_RULE = (f"sink head: sink share ≥ {SINK_HEAD}; else local head: mean distance ≤ {LOCAL_HEAD:g} tokens; "
             "else far head")


@dataclass(frozen=True)
class LongSettings:
    """The view's settings, declared once (labels in English until a page shows them and they are translated)."""

    blocks: int = setting(limits.LONG_BLOCKS, url="long_blocks", pages=PAGES, lo=1, hi=limits.MAX_LONG_BLOCKS,
                          label="Blocks per side", help="The overview's resolution: blocks of queries × keys.")
    policy: str = setting("streaming", url="long_policy", pages=PAGES, choices=POLICIES, label="KV-cache policy",
                          help="kvpress's presses: streaming (sinks + recent), observed (H2O), snapkv, knorm.")
    ratio: float = setting(0.5, url="long_ratio", pages=PAGES, lo=0.0, hi=limits.MAX_LONG_RATIO,
                           label="Evicted fraction", help="The fraction of the cache evicted, in [0, 1).")
    layer: int = setting(0, url="long_layer", pages=PAGES, lo=0, hi=limits.MAX_LAYERS - 1, label="Layer")
    head: int = setting(0, url="long_head", pages=PAGES, lo=0, hi=limits.MAX_HEADS - 1, label="Head")

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


def run_long(model, text, settings: LongSettings) -> tuple[LongAttention, object | None]:
    """The long attention and (a causal model's) policy at the settings' ratio; the policy is None for
    an encoder, or where the text is too short for it (its reason in the result's notes)."""
    settings.validate()
    result = long_attention(model, text, blocks=settings.blocks)
    if not 0 <= settings.layer < result.layers or not 0 <= settings.head < result.heads:
        raise ValueError(f"Layer {settings.layer}, head {settings.head} does not exist: {result.model} has "
                         f"{result.layers} layers × {result.heads} heads.")
    if not result.causal:
        result.notes.append("An encoder keeps no cache to evict: no policy.")
        return result, None
    try:
        return result, kv_keep(model, text, policy=settings.policy, ratio=settings.ratio)
    except ValueError as e:
        result.notes.append(str(e))
        return result, None


def long_record(result: LongAttention, kept, settings: LongSettings) -> dict:
    """Every number the view draws: the overviews (full resolution and the small multiples), the
    heads' numbers and labels, the chosen head's overview, and the policy's kept sets and cost."""
    side = multiples_side(result.layers, result.heads, result.overview.shape[-1])
    rec = {
        "model": result.model, "tokens": result.tokens, "causal": result.causal, "block": result.block,
        "kv_heads": result.kv_heads, "definitions": DEFINITIONS, "head_rule": HEAD_RULE,
        "overview": result.overview.tolist(), "overview_mean": result.overview_mean.tolist(),
        "small_multiples": pooled(result.overview, side).tolist(), "received": result.received.tolist(),
        "sink": result.sink.tolist(), "distance": result.distance.tolist(), "entropy": result.entropy.tolist(),
        "labels": head_labels(result.sink, result.distance).tolist(), "seconds": result.seconds,
        "chosen": {"layer": settings.layer, "head": settings.head}, "notes": result.notes,
    }
    if kept is not None:
        rec["policy"] = {"name": kept.policy, "ratio": kept.ratio, "n_kept": kept.n_kept, "kept": kept.kept,
                         "kept_before_last": kept.kept_before_last, "lost": kept.lost.tolist(), "kl": kept.kl,
                         "top_changed": kept.top_changed, "top_full": kept.top_full,
                         "top_compressed": kept.top_compressed, "notes": kept.notes}
    return rec


def long_figures(result: LongAttention, kept, settings: LongSettings, style: FigureStyle) -> list:
    """The small multiples, the chosen head's overview and, for a causal model, the policy's strip."""
    n = len(result.tokens)
    figs = [small_multiples_figure(result.overview, result.sink, result.distance, style,
                                   title=f"{result.model}: every layer × head over {n:,} tokens (log10 block max)"),
            head_figure(result.overview[settings.layer, settings.head], result.block, n, style,
                        title=f"layer {settings.layer}, head {settings.head}: {result.overview.shape[-1]} blocks "
                              f"of {result.block} tokens a side")]
    if kept is not None:
        cost = (f"KL {kept.kl:.3g}, top token {'changes' if kept.top_changed else 'stays'}"
                if kept.kl is not None else "no language-model head")
        figs.append(kept_strip_figure(kept.kept, n, style, title=f"{kept.policy}, {kept.ratio:.0%} evicted: "
                                      f"{kept.n_kept:,} of {n:,} kept per KV head ({cost})"))
    return figs
