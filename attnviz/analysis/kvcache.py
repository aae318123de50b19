"""Which tokens a KV-cache policy keeps, and what evicting the rest costs the next token.

``kv_keep(model, text, policy=, ratio=)`` scores every (layer, key/value head, key) of a causal
model's prompt as NVIDIA's kvpress 0.5.5 scores it, and keeps the top ``compute_n_kept(N, ratio)``
= max(1, ⌊N·(1 − ratio)⌋) by ``torch.topk`` (its ``ScorerPress.compress``); ``ratio`` is the
fraction evicted, in [0, 1), and 0 keeps everything (kvpress returns before scoring):

- ``"streaming"`` (``StreamingLLMPress``): 4 sink tokens and the most recent ones, i.e. a score of 1
  everywhere but positions 4 … 4 + (N − ⌊N·(1 − ratio)⌋), scored 0;
- ``"observed"`` (``ObservedAttentionPress``, H2O-style): the attention each key received, summed
  over the queries, divided by the number of queries that can see it (N − j), averaged over the
  query heads of its key/value group;
- ``"snapkv"`` (``SnapKVPress``): the mean weight of the last 64 queries on each earlier key,
  average-pooled along the keys (kernel 5, padding 2, stride 1, zeros counted), averaged over the
  group; the 64 window keys score the maximum + 1, so they are always kept;
- ``"knorm"`` (``KnormPress``): −‖k‖, the keys (as cached: rotated where the model is rotary) with
  the smallest norm kept.

**Cost**: the cache of the prompt without its last token is compressed by the same policy, then the
last token runs on it (at its own position, as kvpress's pipeline runs a question) and on the full
cache: the KL divergence KL(full ‖ compressed) of the two next-token distributions, whether the top
token changes (None without a language-model head: the random layer), and per layer and query head
the share of the last token's attention (full cache) that fell on the evicted tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.analysis import longcontext as LC
from attnviz.core import blockstats
from attnviz.models import capture
from attnviz.models.base import ModelError

POLICIES = ("streaming", "observed", "snapkv", "knorm")
N_SINK = 4  # StreamingLLMPress.n_sink
WINDOW = 64  # SnapKVPress.window_size
KERNEL = 5  # SnapKVPress.kernel_size


def compute_n_kept(k_len: int, ratio: float) -> int:
    """kvpress.utils.compute_n_kept: the pairs kept when ``ratio`` of ``k_len`` is evicted."""
    return 0 if ratio >= 1.0 else max(1, int(k_len * (1 - ratio)))


def streaming_scores(kv: int, n: int, ratio: float) -> torch.Tensor:
    """(KV, n): 1, but 0 on the n_pruned tokens after the sinks."""
    if n <= N_SINK:
        raise ValueError(f"The streaming policy needs more than {N_SINK} tokens (its sink tokens); the text has {n}.")
    pruned = n - int(n * (1 - ratio))
    scores = torch.ones(kv, n)
    scores[:, N_SINK:N_SINK + pruned] = 0
    return scores


def observed_scores(received: torch.Tensor, kv: int) -> torch.Tensor:
    """(KV, n) from the attention each key received (H, n), summed over the queries."""
    H, n = received.shape
    scores = received.float() / torch.arange(n, 0, -1, dtype=torch.float32)  # (H, n) per query that sees it
    return scores.view(kv, H // kv, n).mean(1)


def snapkv_scores(window_weights: torch.Tensor, kv: int) -> torch.Tensor:
    """(KV, n) from the last ``WINDOW`` queries' weights over every key (H, WINDOW, n)."""
    H, w, n = window_weights.shape
    if n <= WINDOW:
        raise ValueError(f"The snapkv policy needs more than {WINDOW} tokens (its observation window); the text "
                         f"has {n}.")
    scores = window_weights[..., :-WINDOW].float().mean(-2)  # (H, n − w)
    scores = F.avg_pool1d(scores, kernel_size=KERNEL, padding=KERNEL // 2, stride=1)  # (H, n − w)
    scores = scores.view(kv, H // kv, n - WINDOW).mean(1)  # (KV, n − w)
    return F.pad(scores, (0, WINDOW), value=scores.max().item() + 1)  # (KV, n)


def knorm_scores(keys: torch.Tensor) -> torch.Tensor:
    """(KV, n) −‖k‖ of the cached keys (KV, n, D)."""
    return -torch.linalg.vector_norm(keys.float(), dim=-1)


def kept_from_scores(scores: torch.Tensor, ratio: float) -> torch.Tensor:
    """(KV, n_kept) the sorted positions ``ScorerPress.compress`` keeps: the top n_kept scores by torch.topk."""
    n_kept = compute_n_kept(scores.shape[-1], ratio)
    return scores.topk(n_kept, dim=-1).indices.sort(-1).values


@dataclass
class KVKeep:
    """What one policy keeps at one ratio, and what it costs the next token."""

    model: str
    policy: str
    ratio: float
    tokens: list[str]
    kept: list[list[list[int]]]  # layers × KV heads: sorted positions kept of the whole prompt
    kept_before_last: list[list[list[int]]]  # the same for the prompt without its last token (the cost's cache)
    lost: np.ndarray  # (layers, H) the last token's attention on the tokens evicted from kept_before_last
    kl: float | None  # KL(full ‖ compressed) of the next-token distributions; None without an LM head
    top_changed: bool | None
    top_full: str | None = None
    top_compressed: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def n_kept(self) -> int:
        return len(self.kept[0][0])


def _check(policy, ratio) -> float:
    if policy not in POLICIES:
        raise ValueError(f"Unknown policy {policy!r}; choose one of {', '.join(POLICIES)}.")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.floating)) or not 0 <= ratio < 1:
        raise ValueError(f"ratio (the fraction of the cache evicted) must be in [0, 1), got {ratio!r}.")
    return float(ratio)


def _scorer(policy: str, ratio: float, tile: int):
    """A consumer of each layer's (q, k, lse, scale, causal) that appends the layer's scores (KV, n)."""
    out: list[torch.Tensor] = []

    def consume(q, k, lse, scale, causal):
        q = (q.float() * scale).contiguous()  # (H, n, D)
        k = k.float().contiguous()  # (KV, n, D)
        KV, n = k.shape[0], k.shape[1]
        if ratio == 0:  # kvpress returns before scoring: everything kept
            out.append(torch.zeros(KV, n))
        elif policy == "streaming":
            out.append(streaming_scores(KV, n, ratio))
        elif policy == "knorm":
            out.append(knorm_scores(k))
        else:
            lse = blockstats.row_lse(q, k, causal=causal, tile=tile) if lse is None else lse.float()  # (H, n)
            if policy == "observed":
                stats = blockstats.layer_stats(q, k, lse, causal=causal, blocks=1, tile=tile)
                out.append(observed_scores(stats.received, KV))
            else:
                G = q.shape[0] // KV
                rows = q[:, -WINDOW:] @ k.repeat_interleave(G, 0).transpose(-1, -2)  # (H, w, n)
                rows = torch.exp(rows - lse[:, -WINDOW:, None])
                rows = rows.masked_fill(torch.arange(n)[None, :] > torch.arange(n - WINDOW, n)[:, None], 0.0)
                out.append(snapkv_scores(rows, KV))

    return out, consume


def kv_keep(model, text, *, policy: str, ratio: float, tile: int = blockstats.TILE) -> KVKeep:
    """The tokens ``policy`` keeps when ``ratio`` of a causal model's cache is evicted at the end of
    ``text`` (a string, or token ids used as given), and the cost (see the module doc)."""
    ratio = _check(policy, ratio)
    text = LC.text_or_ids(text)
    subject = LC.long_reader(model)
    if isinstance(subject, LC.HFReader) and not subject.hf.causal:
        raise ValueError(f"{subject.name} is an encoder: it keeps no cache to evict. KV-cache policies need a causal "
                         "language model.")
    ids = subject.ids(text)
    N = len(ids)
    if N < 2:
        raise ValueError("The cost compares the last token on a compressed and a full cache: give at least 2 tokens.")
    need = {"streaming": N_SINK, "snapkv": WINDOW}.get(policy, 0)
    if ratio > 0 and N - 1 <= need:  # the cost's cache is the prompt without its last token
        what = "its sink tokens" if policy == "streaming" else "its observation window"
        raise ValueError(f"The {policy} policy needs more than {need + 1} tokens ({need}, {what}, and the last "
                         f"token that the cost runs on the compressed cache); the text has {N}.")
    try:
        if isinstance(subject, LC.RandomReader):
            kept, cost = _random_cost(subject, ids, policy, ratio, tile)
        else:
            kept, cost = _model_cost(subject, ids, policy, ratio, tile)
    except ModelError as e:
        raise ValueError(f"{subject.name}: {e}") from None
    result = KVKeep(subject.name, policy, ratio, subject.tokens(ids), [k.tolist() for k in kept], **cost)
    return result


def _lost(q_last, keys, kept, scale) -> np.ndarray:
    """(H,) the last token's attention (over the prefix's keys and itself) on the prefix keys not kept."""
    H, KV = q_last.shape[0], keys.shape[0]
    G = H // KV
    q = q_last.float().reshape(H, -1) * scale  # (H, D)
    a = torch.softmax(torch.einsum("hd,hnd->hn", q, keys.float().repeat_interleave(G, 0)), -1)  # (H, n)
    evicted = torch.ones(KV, keys.shape[1], dtype=torch.bool)
    evicted[:, -1] = False  # the last token's own key is never in the compressed prefix's cache: it is new
    evicted.scatter_(1, kept, False)
    return (a * evicted.repeat_interleave(G, 0)).sum(-1).double().numpy()


def _random_cost(subject, ids, policy, ratio, tile) -> tuple[list[torch.Tensor], dict]:
    """The random layer's kept sets, the prefix's, and the last token's attention lost (it has no next token to
    compare), from its one pass: the prefix's q and k are the prompt's without their last position."""
    whole, score_whole = _scorer(policy, ratio, tile)
    prefix, score_prefix = _scorer(policy, ratio, tile)
    q, k, _lse, scale, _causal = LC.layer_args(subject, ids, 0)  # (H, N, D) each
    score_whole(q, k, None, scale, True)
    score_prefix(q[:, :-1], k[:, :-1], None, scale, True)
    kept = kept_from_scores(prefix[0], ratio)
    return [kept_from_scores(whole[0], ratio)], dict(
        kept_before_last=[kept.tolist()], lost=_lost(q[:, -1:], k, kept, scale)[None], kl=None, top_changed=None,
        notes=["The random layer has no language-model head: no next-token cost."])


def _model_cost(subject, ids, policy, ratio, tile) -> tuple[list[torch.Tensor], dict]:
    """The whole prompt's kept sets, the prefix's, and the last token on the prefix's compressed and full caches,
    from one forward pass over the prompt and two one-token steps. In a causal model the prefix's queries, keys,
    log-sum-exps and cache are the prompt's without their last position, so the prefix is scored and cached from
    the same pass (a second pass over N − 1 tokens computed the same numbers)."""
    whole, score_whole = _scorer(policy, ratio, tile)
    prefix, score_prefix = _scorer(policy, ratio, tile)

    def consume(q, k, lse, scale, causal):  # q (H, N, D), k (KV, N, D), lse (H, N) or None
        score_whole(q, k, lse, scale, causal)
        score_prefix(q[:, :-1], k[:, :-1], None if lse is None else lse[:, :-1], scale, causal)

    hf = subject.hf
    twin = capture.twin(hf, hf.model)
    body = getattr(twin, "base_model", twin)  # no (N, vocab) logits: the last token's come from its own step
    with capture.each_layer(consume), torch.no_grad():
        cache = body(input_ids=torch.tensor([ids]), use_cache=True).cache
    n = len(ids) - 1
    for layer in cache.layers:  # the prefix's cache: the prompt's without its last position
        layer.keys, layer.values = layer.keys[:, :, :n].contiguous(), layer.values[:, :, :n].contiguous()
    return [kept_from_scores(s, ratio) for s in whole], _cost(hf, twin, cache, ids, prefix, ratio)


def _cost(hf, twin, cache, ids, scores, ratio) -> dict:
    """The last token on the prefix's full ``cache`` and on it compressed to the prefix's kept sets."""
    kept = [kept_from_scores(s, ratio) for s in scores]
    prefix = [(layer.keys, layer.values) for layer in cache.layers]  # (1, KV, n, D) each
    seen: list = []
    at = torch.tensor([[len(ids) - 1]])
    with capture.each_layer(lambda q, k, lse, scale, causal: seen.append((q, k, scale))), torch.no_grad():
        full = twin(input_ids=torch.tensor([ids[-1:]]), cache=cache, position_ids=at, use_cache=True)
    for layer, (keys, values), keep in zip(cache.layers, prefix, kept, strict=True):
        index = keep[None, :, :, None].expand(1, -1, -1, keys.shape[-1])  # (1, KV, n_kept, D)
        layer.keys, layer.values = keys.gather(2, index).contiguous(), values.gather(2, index).contiguous()
    with torch.no_grad():
        small = twin(input_ids=torch.tensor([ids[-1:]]), cache=cache, position_ids=at, use_cache=True)
    lost = np.stack([_lost(q, k, keep, scale) for (q, k, scale), keep in zip(seen, kept, strict=True)])
    p, r = (torch.log_softmax(o.logits[0, -1].double(), -1) for o in (full, small))
    top_full, top_small = int(p.argmax()), int(r.argmax())
    name = hf.tokenizer.convert_ids_to_tokens
    return dict(kept_before_last=[k.tolist() for k in kept], lost=lost, kl=float((p.exp() * (p - r)).sum()),
                top_changed=top_full != top_small, top_full=str(name(top_full)), top_compressed=str(name(top_small)))
