"""``long_view``: a model's attention over a long text in a notebook, offline: every layer × head as
small multiples, one head's overview and, with a policy, what a KV cache keeps and what that costs
(``attnviz.analysis.longcontext`` and ``kvcache``)."""

from __future__ import annotations

from attnviz import limits
from attnviz.analysis.kvcache import kv_keep
from attnviz.analysis.longcontext import long_attention
from attnviz.plots.html import Rendered, check_action, deliver
from attnviz.plots.longcontext import head_figure, kept_strip_figure, small_multiples_figure
from attnviz.plots.style import FigureStyle


def long_view(model, text, *, blocks: int = limits.LONG_BLOCKS, layer: int = 0, head: int = 0,
              policy: str | None = None, ratio: float = 0.5, display_mode: str = "light",
              html_action: str = "view"):
    """Small multiples of every layer × head's overview of ``text`` (a string or token ids) under
    ``model`` (a model's name or folder, or "random"), then head ``head`` of ``layer`` at ``blocks``
    blocks a side and, with ``policy`` ("streaming", "observed", "snapkv", "knorm"), the tokens it
    keeps when ``ratio`` of the cache is evicted. Returns a ``Rendered`` (``html_action="return"``)
    or shows it in Jupyter."""
    check_action(html_action)
    if display_mode not in ("light", "dark"):
        raise ValueError(f"display_mode must be 'dark' or 'light', not {display_mode!r}.")
    result = long_attention(model, text, blocks=blocks)
    if not 0 <= layer < result.layers or not 0 <= head < result.heads:
        raise ValueError(f"Layer {layer}, head {head} does not exist: {result.model} has {result.layers} layers × "
                         f"{result.heads} heads.")
    style = FigureStyle(theme=display_mode)
    n = len(result.tokens)
    figures = [small_multiples_figure(result.overview, result.sink, result.distance, style,
                                      title=f"{result.model}: every layer × head over {n:,} tokens"),
               head_figure(result.overview[layer, head], result.block, n, style,
                           title=f"layer {layer}, head {head} (log10 block max)")]
    if policy is not None:
        kept = kv_keep(model, text, policy=policy, ratio=ratio)
        cost = f"KL {kept.kl:.3g}" if kept.kl is not None else "no language-model head"
        figures.append(kept_strip_figure(kept.kept, n, style, title=f"{policy}, {ratio:.0%} evicted ({cost})"))
    return deliver(Rendered(figures), html_action)
