"""Attention at the lengths language models run: a model's own attention over up to
``limits.MAX_MODEL_LONG_TOKENS`` tokens, summarised without ever holding an L × L matrix.

``long_attention(model, text, blocks=256)`` runs the model once with SDPA (no weights kept),
reading each layer's q and k as the pass reaches it (``attnviz.models.capture``), and folds the
layer's weights tile by tile into (``attnviz.core.blockstats``), for every layer and query head:

- ``overview``: the largest weight in each block of queries × keys (B × B blocks of ⌈N / B⌉
  tokens, the last one shorter), and ``overview_mean``, each block's mean weight with masked
  cells counted as 0 (so block means × block areas sum to the attention received);
- ``received``: the attention each key receives, summed over the queries (H2O's accumulated score);
- ``sink``: the mean over queries of the share of attention on the first 4 tokens (StreamingLLM);
- ``distance``: the mean over queries of Σ_j a_ij |i − j| (near heads and far heads, DuoAttention);
- ``entropy``: the mean, over the queries that may see at least 2 keys, of the row's entropy
  divided by the log of the number of keys that query may see (1: spread evenly; 0: one key);
- ``window(layer, head, q0, k0, size)``: the exact weights of one close-up.

Memory grows with N·d (q, k and a few numbers per token and head) plus one tile, never N².
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz import limits
from attnviz.core import blockstats
from attnviz.inputs.embeddings import embed_padded
from attnviz.inputs.tokens import tokenize
from attnviz.models import capture
from attnviz.models.base import ModelError
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.models.hf import HFModel
from attnviz.models.random import RANDOM, RandomLayer
from attnviz.run.config import AttentionConfig
from attnviz.run.run import random_layer

DEFINITIONS = {
    "overview": "the largest weight in each block of queries × keys",
    "overview_mean": "the mean weight in each block (masked cells count as 0)",
    "received": "the attention each key receives, summed over the queries (H2O's accumulated score)",
    "sink": "the mean over queries of the share of attention on the first 4 tokens",
    "distance": "the mean over queries of Σ_j a_ij |i − j|, in tokens",
    "entropy": "the mean row entropy over log(keys the query may see), queries seeing ≥ 2 keys",
}


class _Stop(Exception):
    """Raised by a consumer that has what it came for: the rest of the forward pass is not needed."""


@dataclass
class LongAttention:
    """Every layer's and query head's numbers over one long sequence (see the module doc)."""

    model: str
    tokens: list[str]
    causal: bool
    block: int  # tokens per block of the overview (the last block may be shorter)
    kv_heads: int
    overview: np.ndarray  # (layers, H, B, B) float32
    overview_mean: np.ndarray  # (layers, H, B, B) float32
    received: np.ndarray  # (layers, H, N) float32
    sink: np.ndarray  # (layers, H) float64
    distance: np.ndarray  # (layers, H) float64
    entropy: np.ndarray  # (layers, H) float64
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    _kept: list | None = field(default=None, repr=False)  # per layer (q scaled, k, lse), when they fit
    _rerun: object = field(default=None, repr=False)  # layer -> (q scaled, k, lse), when they were not kept

    @property
    def layers(self) -> int:
        return int(self.overview.shape[0])

    @property
    def heads(self) -> int:
        return int(self.overview.shape[1])

    @property
    def N(self) -> int:
        return len(self.tokens)

    def window(self, layer: int, head: int, q0: int, k0: int, size: int = 64) -> np.ndarray:
        """The exact weights of queries q0…q0+size over keys k0…k0+size of one head (fewer rows or
        columns at the end of the text): (rows, columns) float32, recomputed from q and k."""
        for name, value, most in (("layer", layer, self.layers - 1), ("head", head, self.heads - 1),
                                  ("q0", q0, self.N - 1), ("k0", k0, self.N - 1)):
            _whole(name, value, 0, most)
        _whole("size", size, 1, limits.MAX_LONG_WINDOW)
        q, k, lse = self._kept[layer] if self._kept is not None else self._rerun(layer)
        g = head // (self.heads // self.kv_heads)
        with torch.no_grad():
            a = blockstats.window(q[head], k[g], lse[head], causal=self.causal, q0=int(q0), k0=int(k0), size=int(size))
        return a.numpy()


def _whole(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    return int(value)


def _blocks(blocks) -> int:
    return _whole("blocks", blocks, 1, limits.MAX_LONG_BLOCKS)


def text_or_ids(text) -> str | list[int]:
    """The text (bounded in bytes before anything reads it) or the token ids as given."""
    if isinstance(text, str):
        if len(text.encode("utf-8", "replace")) > limits.MAX_LONG_TEXT_BYTES:
            raise ValueError(f"The text is over {limits.MAX_LONG_TEXT_BYTES // 2**10:,} KB (MAX_LONG_TEXT_BYTES): "
                             "shorten it.")
        if not text.strip():
            raise ValueError("The text is empty: give a few words.")
        return text
    try:
        ids = [int(i) for i in text]
    except (TypeError, ValueError):
        raise ValueError("text must be a string or a list of token ids.") from None
    if not ids:
        raise ValueError("The token ids are empty: give at least one.")
    return ids


def within(n: int, positions: int | None, name: str) -> None:
    """``n`` tokens within the long bound and the model's own positions (the smaller), one message naming both."""
    most = min(limits.MAX_MODEL_LONG_TOKENS, positions or limits.MAX_MODEL_LONG_TOKENS)
    if n > most:
        own = f"{name} reads at most {positions:,} positions" if positions else f"{name} has no position bound"
        raise ValueError(f"The text has {n:,} tokens; long attention reads at most {most:,}: the bound is "
                         f"{limits.MAX_MODEL_LONG_TOKENS:,} tokens (MAX_MODEL_LONG_TOKENS) and {own}. "
                         "Shorten the text.")


class HFReader:
    """A transformers model of the registry (or one loaded already), run through its twin."""

    def __init__(self, hf) -> None:
        self.hf, self.name = hf, hf.name
        if hf.kind not in ("causal", "encoder"):
            raise ValueError(f"{hf.name} is {'an encoder–decoder' if hf.seq2seq else 'a vision transformer'}: long "
                             "attention reads one text with a causal LM or an encoder.")
        cfg = hf.model.config
        self.layers = hf.layers
        self.positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        self.kv_heads = hf.kv_heads

    def ids(self, text) -> list[int]:
        if isinstance(text, str):
            ids = self.hf.tokenizer(text, add_special_tokens=True)["input_ids"]
        else:
            V = int(self.hf.model.config.vocab_size)
            if any(not 0 <= i < V for i in text):
                raise ValueError(f"Token ids must be in 0–{V - 1} for {self.name}.")
            ids = list(text)
        if not ids:
            raise ValueError("The text is empty: give a few words.")
        within(len(ids), self.positions, self.name)
        return ids

    def tokens(self, ids: list[int]) -> list[str]:
        return [str(t) for t in self.hf.tokenizer.convert_ids_to_tokens(ids)]

    def run(self, ids: list[int], consumer) -> None:
        model = capture.twin(self.hf, self.hf.model)
        body = getattr(model, "base_model", model)  # the stack without the unembedding: no (N, vocab) logits
        with capture.each_layer(consumer), torch.no_grad():
            body(input_ids=torch.tensor([ids]), use_cache=False)


class RandomReader:
    """The random layer (``attnviz.models.random``), reading the text causally, as a language model would."""

    kv_heads = None
    positions = None

    layers = 1

    def __init__(self, layer) -> None:
        self.layer, self.name = layer, layer.name
        self.kv_heads = layer.heads

    def ids(self, text) -> list[str]:
        if not isinstance(text, str):
            raise ValueError("The random layer reads text, not token ids: it has no vocabulary.")
        toks = tokenize(text, "auto", max_tokens=limits.MAX_MODEL_LONG_TOKENS + 1)
        within(len(toks), None, self.name)
        return toks

    def tokens(self, ids: list[str]) -> list[str]:
        return ids

    def run(self, toks: list[str], consumer) -> None:
        x = embed_padded([toks], len(toks), self.layer.width, True)  # (1, L, E)
        with torch.no_grad():
            q, k, _v = self.layer.module.project(x)  # 3 × (1, H, L, D)
            consumer(q[0], k[0], None, q.shape[-1] ** -0.5, True)


def long_reader(model):
    if isinstance(model, RandomLayer):
        return RandomReader(model)
    if isinstance(model, HFModel):
        return HFReader(model)
    if not isinstance(model, str) or not model.strip():
        raise ValueError("model must be a model's name, a folder, or 'random'.")
    if model == RANDOM:
        return RandomReader(random_layer(AttentionConfig()))  # the random layer at its settings' defaults
    handle = open_model(model)
    if handle.problem:
        raise ValueError(handle.problem)
    if not handle.can(Cap.TEXT, Cap.LOADS) or handle.can(Cap.STACKS):  # one text through one stack
        raise ValueError(f"{model} is {handle.what}: long attention reads one text with a causal LM (GPT-2, LLaMA, "
                         "Qwen2, GPT-NeoX), an encoder, or the random layer.")
    loaded = handle.load()
    if not isinstance(loaded, HFModel):
        raise ValueError(f"{model} runs on attnviz's own BERT encoder, which keeps every weight: long attention "
                         "runs on a transformers folder or the random layer.")
    return HFReader(loaded)


def long_attention(model, text, *, blocks: int = limits.LONG_BLOCKS, tile: int = blockstats.TILE,
                   progress=None) -> LongAttention:
    """Every layer's and head's long-context numbers (see the module doc) for ``text`` (a string,
    read with the model's own tokenizer, or token ids used as given: nothing is prepended) under
    ``model``: a registry name or folder of a causal LM or encoder, a loaded ``HFModel``, or
    ``"random"`` (the random layer with its default settings) or a ``RandomLayer``. ``tile``:
    rows and columns of one tile of scores (the numbers do not depend on it). ``progress(fraction)``
    is told after each layer (a background job's progress bar)."""
    t0 = time.perf_counter()
    blocks = _blocks(blocks)
    tile = _whole("tile", tile, 1, limits.MAX_BLOCK)
    text = text_or_ids(text)
    subject = long_reader(model)
    ids = subject.ids(text)
    N = len(ids)
    per_layer: list[blockstats.LayerStats] = []
    kept: list = []
    state = {"causal": None, "kv": None, "bytes": 0}
    budget = limits.memory_budget_bytes()

    def consume(q, k, lse, scale, causal):
        q = (q.float() * scale).contiguous()  # (H, L, D): the scale folded in once
        k = k.float().contiguous()  # (KV, L, D)
        lse = blockstats.row_lse(q, k, causal=causal, tile=tile) if lse is None else lse.float()  # (H, L)
        state["causal"], state["kv"] = causal, k.shape[0]
        per_layer.append(blockstats.layer_stats(q, k, lse, causal=causal, blocks=blocks, tile=tile))
        if progress is not None:
            progress(len(per_layer) / subject.layers)
        state["bytes"] += 4 * (q.numel() + k.numel() + lse.numel())
        kept.append((q, k, lse) if state["bytes"] <= budget else None)

    try:
        subject.run(ids, consume)
    except ModelError as e:
        raise ValueError(f"{subject.name}: {e}") from None
    if not per_layer:
        raise ValueError(f"{subject.name}: its attention does not run through transformers' attention interface, "
                         "so attnviz cannot read its queries and keys.")
    b, _nb = blockstats.blocks_of(N, blocks)
    sizes = np.diff(np.minimum(np.arange(0, N + b, b), N))  # each block's tokens
    area = np.outer(sizes, sizes).astype(np.float64)  # (B, B)

    def stack(name):
        return np.stack([getattr(s, name).numpy() for s in per_layer])

    sums = stack("block_sum")
    result = LongAttention(
        getattr(subject, "name", str(model)), subject.tokens(ids), bool(state["causal"]), b, int(state["kv"]),
        stack("block_max").astype(np.float32), (sums / area).astype(np.float32), stack("received").astype(np.float32),
        stack("sink"), stack("distance"), stack("entropy"))
    # q and k make close-ups quick, but a server keeps the result as a finished job, every kind's results
    # together within limits.CACHE_SHARES["jobs"]: they stay only where the result with them takes at most half
    # of that, so that one result never pushes out every other (nor is refused as too large to keep).
    held = state["bytes"] + result.overview.nbytes + result.overview_mean.nbytes + result.received.nbytes
    if all(x is not None for x in kept) and held <= limits.cache_bytes("jobs") // 2:
        result._kept = kept
    else:
        result._rerun = _last_layer(lambda layer: _one_layer(subject, ids, layer, tile))
        result.notes.append("q and k of every layer did not fit the memory budget together, or with the overviews "
                            "would take more than half of what the server keeps for finished work: a close-up in "
                            "another layer runs the model again up to it (one layer's are kept).")
    result.seconds = time.perf_counter() - t0
    return result


def _last_layer(rerun):
    """``rerun`` keeping the last layer's (q, k, lse): the close-ups of one layer (a click on its overview moves
    the corner) then cost no pass, and the memory is one layer's, N·d numbers."""
    last: dict = {}

    def get(layer: int):
        got = last.get(layer)
        if got is None:
            got = rerun(layer)
            last.clear()
            last[layer] = got
        return got

    return get


def layer_args(subject, ids, layer: int) -> tuple:
    """What ``capture.each_layer`` hands a consumer for ``layer`` (q, k, lse or None, scale, causal), from one
    pass of ``subject`` (a reader: ``HFReader``, ``RandomReader``) over ``ids`` stopped after that layer."""
    seen: list = []

    def consume(*args):
        seen.append(args if len(seen) == layer else None)
        if len(seen) > layer:
            raise _Stop

    try:
        subject.run(ids, consume)
    except _Stop:
        pass
    return seen[layer]


def _one_layer(subject, ids, layer: int, tile: int):
    """(q scaled, k, lse) of one layer, from a forward pass stopped after it."""
    q, k, lse, scale, causal = layer_args(subject, ids, layer)
    q = (q.float() * scale).contiguous()
    k = k.float().contiguous()
    return q, k, blockstats.row_lse(q, k, causal=causal, tile=tile) if lse is None else lse.float()
