"""The joint map of one head's queries and keys over many sentences (AttentionViz's idea): its
geometry (normalisation, projection, agreement) for any queries and keys; a model run over a
corpus to get them is ``attnviz.analysis.qkcorpus``.

Yeh et al., "AttentionViz: A Global View of Transformer Attention" (IEEE VIS 2023) put a
head's query and key vectors from many sentences into one 2-D map, so that a query lands
near the keys it attends to. Before projecting, they use the two changes that leave every
attention weight as it was. In the words of the method's write-up by one of its authors
(Cynthia Chen, chenxcynthia.github.io/projects/attention): "there are two ``free parameters''
when computing attention: translation and scaling. The operations of *translation* (shifting
query and key vectors by a constant vector) and *scaling in opposite directions* (multiplying
query vectors by c and dividing key vectors by c) can both be performed without changing the
resulting attention value", and the maps are of "the query and key embeddings after they have
been scaled by the respective constant and then translated so the query and key clouds have
the same centroid". attnviz does exactly that, in that order:

1. **Scaling.** ``(c·q)·(k/c) = q·k``. c = sqrt(mean‖k‖ / mean‖q‖), norms measured from the
   origin: queries × c and keys ÷ c then have the same mean norm (the write-up's experiment
   took the median norms; attnviz takes the means).
2. **Translation.** Adding one vector ``t`` to every key adds ``q·t`` to every score of a
   query ``q``: a constant per query, which softmax removes. The scaled keys are moved so
   that their centroid is the scaled queries' centroid: ``k' = k/c - mean(k/c) + mean(c·q)``.
   After it, the two centroids coincide (tested); the mean norms, measured from the origin,
   were equal before it.

After both, a small distance ``‖q - k‖² = ‖q‖² + ‖k‖² - 2 q·k`` goes with a large dot
product, but only among keys of similar norms: a key of larger norm can win the dot product
from farther away.

The other normalisation, **the max-inner-product to nearest-neighbour reduction** (Bachrach
et al., "Speeding up the Xbox recommender system using a Euclidean transformation for
inner-product spaces", RecSys 2014), removes that: each key gets one more coordinate,
``√(M² - ‖k‖²)`` with M the largest key norm, and each query a 0. Every augmented key then has
the norm M, and ``‖q - k‖² = ‖q‖² + M² - 2 q·k``: for each query, the order of the distances
is exactly the reverse order of the dot products (tested), before any projection.

Either is applied over the whole corpus, then the queries and keys are projected
**jointly**: PCA (exact SVD in float64, each component's sign fixed so that its largest
loading is positive: the same input gives the same map bit for bit) or t-SNE
(scikit-learn's, Barnes-Hut, PCA-initialised, seeded).

**Neighbourhood agreement** (how much the map distorts): the fraction of queries whose
most-attended key (the largest weight in the real attention of its own sentence) is among
its ``k`` nearest keys of the same sentence in the map (``K_NEIGHBOURS = 3``). The
**random baseline** is the same measure over points placed uniformly at random (the mean
of ``BASELINE_DRAWS`` seeded placements); its expectation is the mean of
``min(k, n) / n`` over queries, n being the keys of the query's sentence, which the record
also holds. A query whose sentence has ``k`` keys or fewer always agrees, in both.
"""

from __future__ import annotations

import math
import time
import unicodedata
from dataclasses import dataclass

import numpy as np
import torch

from attnviz import limits
from attnviz.i18n import _

METHODS = ("pca", "tsne")
NORMALISATIONS = ("mips", "attentionviz")
# The default is the one whose maps follow attention (agreement above the random baseline) on more of
# MiniLM's 72 heads over the shipped corpus: bench/bench_qkmap_heads.py, the table in docs/qk-map.md.
DEFAULT_NORMALISATION = "mips"
TRUST_MARGIN = 0.05  # a map whose agreement is not above its random baseline by this much says so
K_NEIGHBOURS = 3
BASELINE_DRAWS = 20
TOKEN_KINDS = ("word", "punctuation", "special")
TSNE_ITERATIONS = 500  # scikit-learn's minimum is 250; 500 settles a few thousand points


def token_kind(token: str) -> str:
    """"special" ([CLS], [SEP], [PAD], <s>, <|endoftext|>), "punctuation" (every character a
    punctuation mark or symbol, after a subword marker) or "word"."""
    t = token.strip()
    if len(t) > 2 and ((t[0] == "[" and t[-1] == "]") or (t[0] == "<" and t[-1] == ">")):
        return "special"
    core = t.removeprefix("##").lstrip("Ġ▁")
    if core and all(unicodedata.category(c)[0] in "PS" for c in core):
        return "punctuation"
    return "word"


# --- normalisation, projection, agreement ------------------------------------------


@dataclass(frozen=True)
class Normalised:
    queries: np.ndarray  # (n, D) float64: c·q (the reduction: (n, D + 1), q then 0)
    keys: np.ndarray  # (m, D) float64: k / c, then translated by ``shift`` (the reduction: k then √(M² − ‖k‖²))
    shift: np.ndarray  # (D,) added to every scaled key: mean(c·q) - mean(k / c) (the reduction: zeros)
    scale: float  # c: queries times c, keys divided by c (the reduction: 1)


def scale_and_translate(queries: np.ndarray, keys: np.ndarray) -> Normalised:
    """AttentionViz's scaling, then translation (see the module doc); every q·k is kept up to a
    constant per query, which softmax removes."""
    q = np.asarray(queries, dtype=np.float64)  # (n, D)
    k = np.asarray(keys, dtype=np.float64)  # (m, D)
    nq = float(np.linalg.norm(q, axis=1).mean())
    nk = float(np.linalg.norm(k, axis=1).mean())
    c = math.sqrt(nk / nq) if nq > 0 and nk > 0 else 1.0
    q, k = q * c, k / c  # (n, D), (m, D): the same mean norm
    shift = q.mean(0) - k.mean(0)  # (D,)
    return Normalised(q, k + shift, shift, c)  # the keys' centroid is now the queries'


def mips_augment(queries: np.ndarray, keys: np.ndarray) -> Normalised:
    """The max-inner-product to nearest-neighbour reduction (see the module doc): keys get
    √(M² - ‖k‖²), queries 0, so that ‖q - k‖² = ‖q‖² + M² - 2 q·k and, for each query, a
    nearer key is one of a larger dot product."""
    q = np.asarray(queries, dtype=np.float64)  # (n, D)
    k = np.asarray(keys, dtype=np.float64)  # (m, D)
    norms2 = (k**2).sum(1)  # (m,)
    top = float(norms2.max()) if len(norms2) else 0.0  # M²
    extra = np.sqrt(np.clip(top - norms2, 0.0, None))  # (m,) the longest key's is 0 (clipped: rounding)
    aq = np.concatenate([q, np.zeros((len(q), 1))], axis=1)  # (n, D + 1)
    ak = np.concatenate([k, extra[:, None]], axis=1)  # (m, D + 1): every key of norm M
    return Normalised(aq, ak, np.zeros(ak.shape[1]), 1.0)


def qk_normalisation(queries: np.ndarray, keys: np.ndarray, how: str) -> tuple[Normalised, dict]:
    """``how``'s normalisation of the queries and keys, and the record's words for it."""
    if how == "attentionviz":
        norm = scale_and_translate(queries, keys)
        return norm, {"name": how, "key_shift_norm": float(np.linalg.norm(norm.shift)), "scale": norm.scale,
                      "method": "queries × c, keys ÷ c (c = sqrt(mean key norm / mean query norm), norms from the "
                                "origin), then keys translated so their centroid is the queries'"}
    if how == "mips":
        norm = mips_augment(queries, keys)
        return norm, {"name": how, "max_key_norm": float(np.linalg.norm(norm.keys[:1])) if len(norm.keys) else 0.0,
                      "method": "each key gets sqrt(M² − ‖k‖²) as one more coordinate (M the largest key norm) and "
                                "each query 0, so ‖q − k‖² = ‖q‖² + M² − 2 q·k"}
    raise ValueError(f"Unknown normalisation {how!r}; choose one of {', '.join(NORMALISATIONS)}.")


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Exact PCA to 2-D: (coordinates (n, 2), the fraction of variance each axis keeps)."""
    x = np.asarray(x, dtype=np.float64)  # (n, D)
    xc = x - x.mean(0)  # (n, D)
    if xc.shape[1] < 2:  # a one-feature head: its one axis, and 0
        xc = np.concatenate([xc, np.zeros((len(xc), 2 - xc.shape[1]))], axis=1)  # (n, 2)
    _u, s, vt = np.linalg.svd(xc, full_matrices=False)  # vt (D, D)
    comps = vt[:2].copy()  # (2, D)
    for row in comps:  # a fixed sign: the largest loading positive
        if row[np.argmax(np.abs(row))] < 0:
            row *= -1
    total = float((s**2).sum())
    explained = [float(v) / total if total > 0 else 0.0 for v in (s[:2] ** 2)]
    return xc @ comps.T, explained  # (n, 2)


def tsne_2d(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """scikit-learn's t-SNE (Barnes-Hut, PCA init, ``random_state=seed``): (n, 2)."""
    from sklearn.manifold import TSNE

    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 8:
        raise ValueError(_("t-SNE needs at least 8 points (4 tokens); this map has {n}. Use PCA.").format(n=n))
    perplexity = float(min(30.0, (n - 1) / 3))
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=int(seed),
                max_iter=TSNE_ITERATIONS, learning_rate="auto")
    return tsne.fit_transform(x).astype(np.float64)  # (n, 2)


def project(x: np.ndarray, method: str, seed: int = 0) -> tuple[np.ndarray, list[float] | None]:
    if method == "pca":
        return pca_2d(x)
    if method == "tsne":
        return tsne_2d(x, seed), None
    raise ValueError(f"Unknown projection {method!r}; choose one of {', '.join(METHODS)}.")


def agreement(q_xy: np.ndarray, k_xy: np.ndarray, sentence: np.ndarray, best: np.ndarray,
              k: int = K_NEIGHBOURS) -> float:
    """The fraction of queries whose most-attended key (``best``: an index into the keys,
    of the same sentence) is among their ``k`` nearest keys of the same sentence in the map.

    ``q_xy``, ``k_xy``: (n, 2), row i of both the same token; ``sentence``: (n,) ids."""
    hits = 0
    for s in np.unique(sentence):
        rows = np.flatnonzero(sentence == s)  # this sentence's tokens
        d = ((q_xy[rows, None, :] - k_xy[None, rows, :]) ** 2).sum(-1)  # (n_s, n_s)
        local = np.searchsorted(rows, best[rows])  # the best key's place among the sentence's keys
        own = d[np.arange(len(rows)), local]  # (n_s,)
        closer = (d < own[:, None]).sum(1)  # keys strictly nearer than the best one
        hits += int((closer < k).sum())
    return hits / len(sentence) if len(sentence) else 0.0


def random_baseline(sentence: np.ndarray, best: np.ndarray, k: int = K_NEIGHBOURS, seed: int = 0,
                    draws: int = BASELINE_DRAWS) -> float:
    """``agreement`` of points placed uniformly at random, the mean of ``draws`` placements."""
    rng = np.random.default_rng(seed)
    n = len(sentence)
    return float(np.mean([agreement(rng.random((n, 2)), rng.random((n, 2)), sentence, best, k)
                          for _ in range(draws)]))


def expected_baseline(sentence: np.ndarray, k: int = K_NEIGHBOURS) -> float:
    """The random baseline's expectation: the mean over queries of min(k, n) / n."""
    _ids, inverse, counts = np.unique(sentence, return_inverse=True, return_counts=True)
    n = counts[inverse]
    return float(np.mean(np.minimum(k, n) / n)) if len(n) else 0.0


# --- the record ---------------------------------------------------------------------


def _positions(sentence: np.ndarray) -> np.ndarray:
    out = np.zeros(len(sentence), dtype=np.int64)
    for s in np.unique(sentence):
        rows = np.flatnonzero(sentence == s)
        out[rows] = np.arange(len(rows))
    return out


def best_keys_by_score(queries: np.ndarray, keys: np.ndarray, sentence: np.ndarray) -> np.ndarray:
    """Each query's most-attended key of its own sentence, from softmax(q·k/√d) with no mask
    (an index into the keys): the argmax of the scores."""
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    best = np.zeros(len(q), dtype=np.int64)
    for s in np.unique(sentence):
        rows = np.flatnonzero(sentence == s)
        scores = q[rows] @ k[rows].T  # (n_s, n_s)
        best[rows] = rows[np.argmax(scores, axis=1)]
    return best


def map_record(queries: np.ndarray, keys: np.ndarray, tokens: list[str], sentence: np.ndarray,
               position: np.ndarray, best: np.ndarray, *, method: str = "pca", seed: int = 0,
               k: int = K_NEIGHBOURS, normalisation: str = DEFAULT_NORMALISATION, meta: dict | None = None) -> dict:
    """The map as a plain record (what the JSON export, the page and ``attnviz.qk_map``
    give): ``points`` holds the queries in input order, then the keys in input order;
    ``warning`` is ``trust_warning``'s line, or None for a map above its baseline by
    ``TRUST_MARGIN``."""
    if method not in METHODS:
        raise ValueError(f"Unknown projection {method!r}; choose one of {', '.join(METHODS)}.")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a whole number ≥ 1, got {k!r}.")
    t0 = time.perf_counter()
    norm, about = qk_normalisation(queries, keys, normalisation)
    n = len(norm.queries)
    xy, explained = project(np.concatenate([norm.queries, norm.keys]), method, seed)  # (2n, 2)
    q_xy, k_xy = xy[:n], xy[n:]
    took = time.perf_counter() - t0
    kinds = [token_kind(t) for t in tokens]
    points = []
    for kind, block in (("query", q_xy), ("key", k_xy)):
        for i in range(n):
            points.append({"kind": kind, "token": tokens[i], "token_kind": kinds[i], "sentence": int(sentence[i]),
                           "position": int(position[i]), "x": round(float(block[i, 0]), 5),
                           "y": round(float(block[i, 1]), 5)})
    record = {
        **(meta or {}),
        "method": method, "seed": int(seed), "k": k,
        "agreement": agreement(q_xy, k_xy, sentence, best, k),
        "baseline": random_baseline(sentence, best, k, seed),
        "baseline_expected": expected_baseline(sentence, k),
        "explained": explained,
        "normalisation": about,
        "queries": n, "keys": n, "seconds": round(took, 4),
        "points": points,
    }  # fmt: skip
    record["warning"] = trust_warning(record)
    return record


def trusted(record: dict) -> bool:
    """Whether the map's agreement is above its random baseline by at least ``TRUST_MARGIN``."""
    return record["agreement"] - record["baseline"] >= TRUST_MARGIN - 1e-12


def trust_warning(record: dict) -> str | None:
    """One line, in the current language, for a map whose nearness does not follow attention
    (its agreement not above its random baseline by ``TRUST_MARGIN``); None otherwise."""
    if trusted(record):
        return None
    return _("Do not read this map as attention: its agreement ({a:.1%}) is not above random placement ({b:.1%}) "
             "by {m:.0f} points, so a query's nearest keys here are often not the ones it attends to.").format(
        a=record["agreement"], b=record["baseline"], m=100 * TRUST_MARGIN)


def qk_map(queries, keys, tokens, *, sentences=None, positions=None, method: str = "pca", seed: int = 0,
           k: int = K_NEIGHBOURS, normalisation: str = DEFAULT_NORMALISATION) -> dict:
    """The joint map of query and key vectors you bring: ``queries`` and ``keys`` (n, d),
    row i of both belonging to token i (``tokens``: n labels). ``sentences``: each row's
    sentence id (default: one sentence); ``positions``: each row's place in its sentence
    (default: counted in order). Each query's most-attended key is the argmax of q·k over
    the keys of its sentence (no mask). ``normalisation``: "attentionviz" (scale, then
    translate) or "mips" (the max-inner-product reduction); ``method``: "pca" or "tsne".
    Returns the record ``map_record`` describes."""
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"Unknown normalisation {normalisation!r}; choose one of {', '.join(NORMALISATIONS)}.")
    q = np.asarray(queries.detach().cpu() if isinstance(queries, torch.Tensor) else queries, dtype=np.float64)
    kk = np.asarray(keys.detach().cpu() if isinstance(keys, torch.Tensor) else keys, dtype=np.float64)
    if q.ndim != 2 or kk.ndim != 2 or q.shape != kk.shape:
        raise ValueError(f"queries and keys must both be (n, d) with the same shape; got {q.shape} and {kk.shape}.")
    n = len(q)
    if n < 1:
        raise ValueError("queries and keys are empty: give at least one row.")
    if n > limits.MAX_CORPUS_TOKENS:
        raise ValueError(f"{n} rows; the Q/K map takes at most {limits.MAX_CORPUS_TOKENS} tokens.")
    if not np.isfinite(q).all() or not np.isfinite(kk).all():
        raise ValueError("queries and keys must be finite (no NaN or infinity).")
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} token labels for {n} rows: give one label per row.")
    sentence = np.zeros(n, dtype=np.int64) if sentences is None else np.asarray(sentences, dtype=np.int64)
    if sentence.shape != (n,):
        raise ValueError(f"sentences must hold one id per row ({n}), got shape {sentence.shape}.")
    position = _positions(sentence) if positions is None else np.asarray(positions, dtype=np.int64)
    if position.shape != (n,):
        raise ValueError(f"positions must hold one number per row ({n}), got shape {position.shape}.")
    best = best_keys_by_score(q, kk, sentence)
    return map_record(q, kk, tokens, sentence, position, best, method=method, seed=seed, k=k,
                      normalisation=normalisation, meta={"source": "vectors"})
