"""A model over a corpus, for the Q/K map: every real token's query and key at one layer
(``corpus_run``, once per process for the same model, settings and sentences), one head's map
of them (``head_map``) and every head's, thinned for drawing (``layer_overview``), computed in
the background once per model, corpus and layer (``overview_in_background``: an
``attnviz.jobs`` job). The map itself is ``attnviz.analysis.qkmap``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attnviz import cache, jobs, limits
from attnviz.analysis.longcontext import HFReader, layer_args
from attnviz.analysis.qkmap import DEFAULT_NORMALISATION, K_NEIGHBOURS, map_record
from attnviz.i18n import _
from attnviz.inputs.corpus import corpus_digest
from attnviz.jobs import Job
from attnviz.models.door import Cap
from attnviz.models.door import open as open_model
from attnviz.models.hf import HFModel
from attnviz.run.run import model_for, run


def reads_one_text(name: str) -> bool:
    """A model whose twin reads one text through one stack (a causal LM or an encoder): its q and k are read."""
    handle = open_model(name)
    return handle.can(Cap.TEXT, Cap.LOADS) and not handle.can(Cap.STACKS)


@dataclass
class CorpusRun:
    """Every real token of a corpus at one layer: its query and key in every head."""

    model: str
    layer: int
    sentences: list[str]
    tokens: list[str]  # (T,) every real token, sentence by sentence
    sentence: np.ndarray  # (T,) its sentence
    position: np.ndarray  # (T,) its place in the sentence (the model's own tokens, [CLS] at 0)
    q: np.ndarray  # (T, H, D) float32
    k: np.ndarray  # (T, H, D) float32
    best: np.ndarray  # (T, H): each query's most-attended key of its sentence (a token index)
    seconds: float  # the forward passes

    @property
    def heads(self) -> int:
        return self.q.shape[1]


RUNS = cache.named("qk-runs")


def corpus_run(config, lines: list[str], progress: Callable[[float], None] | None = None) -> CorpusRun:
    """Run ``config``'s model over ``lines`` in batches that each fit the memory budget;
    keep every real token's Q and K at ``config.layer``. Raises ``ValueError`` for a model
    that gives only attention weights, or a corpus over the token bound."""
    t0 = time.perf_counter()
    model = model_for(config)
    if not 0 <= config.layer < model.layers:
        raise ValueError(_("Layer {layer} does not exist: {model} has {n} layer(s).").format(
            layer=config.layer, model=model.name, n=model.layers))
    if isinstance(model, HFModel) and reads_one_text(config.model):
        return _twin_run(config, model, lines, progress, t0)
    if getattr(model, "seq2seq", False) or not hasattr(model, "read_text"):
        raise ValueError(_("The Q/K map reads one text's queries and keys: the random model, MiniLM, a BERT "
                           "folder, a causal LM (SmolLM2, GPT-2, LLaMA) or an encoder. {model} gives attention "
                           "weights only.").format(model=model.name))
    read = dict(pad_to=0, tokenize_mode=config.tokenize_mode, positional=config.positional,
                max_tokens=config.max_tokens)
    mask = config.mask if model.honours_masks and config.mask != "none" else "padding"
    chunks = [lines[i:i + limits.QK_BATCH] for i in range(0, len(lines), limits.QK_BATCH)]
    inputs = [model.read_text(c, **read) for c in chunks]
    total = sum(sum(inp.lengths) for inp in inputs)
    if total > limits.MAX_CORPUS_TOKENS:
        raise ValueError(_("The corpus has {n:,} tokens for this model; the limit is {limit:,}. Use fewer or shorter "
                           "sentences.").format(n=total, limit=limits.MAX_CORPUS_TOKENS))
    todo = list(zip(chunks, inputs, strict=True))
    tokens, sentence, position, qs, ks, bests = [], [], [], [], [], []
    done_lines, offset = 0, 0
    while todo:
        chunk, inp = todo.pop(0)
        try:
            fits = model.plan(len(chunk), inp.L, inp.L) == "full"
        except ValueError:
            fits = False
        if not fits:
            if len(chunk) == 1:
                model.plan(1, inp.L, inp.L)  # raises the budget's own message
                raise ValueError(_("Sentence {i} alone is too long for this server's memory budget.").format(
                    i=done_lines + 1))
            half = len(chunk) // 2
            todo[:0] = [(c, model.read_text(c, **read)) for c in (chunk[:half], chunk[half:])]
            continue
        result = run(inp, model, mask=mask, layer=config.layer)
        steps = result.steps
        if steps.q is None or steps.q.shape[-1] == 0:
            raise ValueError(_("The Q/K map reads one text's queries and keys: the random model, MiniLM, a BERT "
                               "folder, a causal LM (SmolLM2, GPT-2, LLaMA) or an encoder. {model} gives attention "
                               "weights only.").format(
                model=model.name))
        w = steps.attention.weights  # (N, H, L, S), before dropout
        for n, length in enumerate(inp.lengths):
            tokens.extend(inp.tokens[n][:length])
            sentence.extend([done_lines + n] * length)
            position.extend(range(length))
            qs.append(steps.q[n, :, :length].permute(1, 0, 2).numpy())  # (length, H, D)
            ks.append(steps.k[n, :, :length].permute(1, 0, 2).numpy())  # (length, H, D)
            best = w[n, :, :length, :length].argmax(-1)  # (H, length)
            bests.append(best.T.numpy() + offset)  # (length, H)
            offset += length
        done_lines += len(chunk)
        if progress is not None:
            progress(done_lines / len(lines))
    return CorpusRun(config.model, config.layer, list(lines), tokens, np.asarray(sentence, dtype=np.int64),
                     np.asarray(position, dtype=np.int64), np.concatenate(qs).astype(np.float32),
                     np.concatenate(ks).astype(np.float32), np.concatenate(bests).astype(np.int64),
                     time.perf_counter() - t0)


def layer_qk(model: HFModel, ids: list[int], layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One text's (q, k, best) at ``layer`` of a transformers model, as its scores use them (rotated by position
    where it is rotary), read by its twin (``attnviz.models.capture``) from a pass stopped after that layer:
    q and k (L, H, D), each query head beside its key/value head's keys; best (L, H), each query's most-attended
    key (the argmax of its scores under the model's own mask, which is the softmax's)."""
    import torch

    q, k, _lse, _scale, causal = layer_args(HFReader(model), ids, layer)  # q (H, L, D), k (KV, L, D)
    q, k = q.float(), k.float().repeat_interleave(q.shape[0] // k.shape[0], 0)  # each query head beside its keys
    scores = q @ k.transpose(-1, -2)  # (H, L, L)
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores[0], dtype=torch.bool).triu(1), float("-inf"))
    return q.permute(1, 0, 2).numpy(), k.permute(1, 0, 2).numpy(), scores.argmax(-1).T.numpy()


def _twin_run(config, model: HFModel, lines: list[str], progress, t0: float) -> CorpusRun:
    """``corpus_run`` for a transformers causal LM or encoder: each sentence alone (no padding to mask), its own
    tokens, read up to the followed layer."""
    inputs = [model.read_text([line], pad_to=0) for line in lines]
    total = sum(inp.lengths[0] for inp in inputs)
    if total > limits.MAX_CORPUS_TOKENS:
        raise ValueError(_("The corpus has {n:,} tokens for this model; the limit is {limit:,}. Use fewer or shorter "
                           "sentences.").format(n=total, limit=limits.MAX_CORPUS_TOKENS))
    tokens, sentence, position, qs, ks, bests = [], [], [], [], [], []
    offset = 0
    for i, inp in enumerate(inputs):
        length = inp.lengths[0]
        q, k, best = layer_qk(model, inp.ids[0, :length].tolist(), config.layer)
        tokens.extend(inp.tokens[0][:length])
        sentence.extend([i] * length)
        position.extend(range(length))
        qs.append(q)
        ks.append(k)
        bests.append(best + offset)
        offset += length
        if progress is not None:
            progress((i + 1) / len(inputs))
    return CorpusRun(config.model, config.layer, list(lines), tokens, np.asarray(sentence, dtype=np.int64),
                     np.asarray(position, dtype=np.int64), np.concatenate(qs).astype(np.float32),
                     np.concatenate(ks).astype(np.float32), np.concatenate(bests).astype(np.int64),
                     time.perf_counter() - t0)


def run_key(config, lines) -> tuple:
    """What a corpus run depends on: for a pretrained model, neither the random model's
    width, heads, seed nor its tokenizer settings."""
    own = (config.d_model, config.num_heads, config.seed, config.projections, config.positional,
           config.tokenize_mode, config.max_tokens, config.mask) if config.model == "random" else ()
    return ("qk-run", config.model, config.layer, own, corpus_digest(lines))


def cached_corpus_run(config, lines: list[str], progress=None) -> CorpusRun:
    """``corpus_run``, once per process for the same model, settings and sentences."""
    return RUNS.get_or_compute(run_key(config, lines), lambda: corpus_run(config, lines, progress))


def head_map(crun: CorpusRun, head: int, *, method: str = "pca", seed: int = 0, k: int = K_NEIGHBOURS,
             normalisation: str = DEFAULT_NORMALISATION) -> dict:
    """One head's map over the corpus run: ``map_record`` with the model, layer, head and sentences."""
    if not 0 <= head < crun.heads:
        raise ValueError(_("Head {head} does not exist: this layer has {n} heads (0–{last}).").format(
            head=head, n=crun.heads, last=crun.heads - 1))
    meta = {"source": "model", "model": crun.model, "layer": crun.layer, "head": head,
            "sentences": crun.sentences}
    return map_record(crun.q[:, head], crun.k[:, head], crun.tokens, crun.sentence, crun.position,
                      crun.best[:, head], method=method, seed=seed, k=k, normalisation=normalisation, meta=meta)


def thinned(record: dict, most: int = limits.QK_OVERVIEW_POINTS) -> dict:
    """The record with at most ``most`` points drawn (every n-th query and its key, so both
    kinds stay paired); its numbers (agreement, baseline) are the full map's."""
    n = record["queries"]
    step = max(1, math.ceil(2 * n / most))
    keep = list(range(0, n, step))
    pts = record["points"]
    return {**{k: v for k, v in record.items() if k not in ("points", "sentences")},
            "points": [pts[i] for i in keep] + [pts[n + i] for i in keep], "thinned": step > 1}


def layer_overview(crun: CorpusRun, *, seed: int = 0, k: int = K_NEIGHBOURS,
                   normalisation: str = DEFAULT_NORMALISATION,
                   progress: Callable[[float], None] | None = None) -> list[dict]:
    """Every head's PCA map of the layer (thinned for drawing), head by head."""
    out = []
    for h in range(crun.heads):
        out.append(thinned(head_map(crun, h, method="pca", seed=seed, k=k, normalisation=normalisation)))
        if progress is not None:
            progress((h + 1) / crun.heads)
    return out


OVERVIEWS = jobs.kind("qk-overview")  # every head of a layer, by model, corpus, layer


def overview_key(config, lines: list[str], seed: int, normalisation: str = DEFAULT_NORMALISATION) -> tuple:
    return ("qk-overview", *run_key(config, lines), seed, normalisation)


def overview_in_background(config, lines: list[str], seed: int = 0,
                           normalisation: str = DEFAULT_NORMALISATION) -> Job:
    """The (one, shared) overview of ``config``'s model and layer over ``lines``: finished, or
    being computed by a background thread started now if no one started it. A class opening the
    same link computes it once; the last few are kept (``limits.JOB_SHARES``). Its ``value`` is
    ``layer_overview``'s records."""
    def work(job: Job) -> list[dict]:
        crun = cached_corpus_run(config, lines, lambda f: job.report(0.5 * f))
        return layer_overview(crun, seed=seed, normalisation=normalisation,
                              progress=lambda f: job.report(0.5 + 0.5 * f))

    return OVERVIEWS.start(overview_key(config, lines, seed, normalisation), work)
