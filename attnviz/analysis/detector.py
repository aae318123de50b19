"""TransformerLens's head detector on attention from anywhere: ``detect_head``.

The same definitions and numbers as ``transformer_lens.head_detector.detect_head`` (read from
its source, TransformerLens 4.3): a head's pattern A (L, L) is compared with a 0/1 detection
pattern D (L, L), lower triangular:

- ``"mul"`` (the default): Σ A∘D / Σ A, after zeroing A's first column (``exclude_bos``) and
  its diagonal (``exclude_current_token``): the share of the head's attention that lands on D;
- ``"abs"``: 1 − round(mean|A − D| · L, 3), after zeroing those entries of |A − D|.

The named patterns: ``"previous_token_head"`` (D[i, i−1] = 1), ``"duplicate_token_head"``
(D[i, j] = 1 for j < i with token j equal to token i) and ``"induction_head"`` (the duplicate
pattern shifted one key right: D[i, j+1] = 1 for those j; first column 0). Tokens are
compared by their text (TransformerLens compares ids; a tokenizer that spells two ids alike
is the only difference). Warnings and errors say what TransformerLens's do, as a
``ValueError`` (its ``assert``) or a ``logging`` warning. Unlike it, the caller's attention
is never changed (its "mul" zeroes the cached pattern's first column in place), and one
sequence is scored: the first of a batch.

How these differ from ``attnviz.head_scores`` (its own definitions, kept): docs/notebook.md,
"Head scores and TransformerLens's head detector".
"""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np
import torch

from attnviz.inputs.handover import normalise

HEAD_NAMES = ("previous_token_head", "duplicate_token_head", "induction_head")
ERROR_MEASURES = ("abs", "mul")
# TransformerLens's own words (head_detector.py), so a user who switches reads the same.
INVALID_HEAD_NAME_ERR = f"detection_pattern must be a Tensor or one of head names: {list(HEAD_NAMES)}; got %s"
SEQ_LEN_ERR = "The sequence must be non-empty and must fit within the model's context window."
DET_PAT_NOT_SQUARE_ERR = ("The detection pattern must be a lower triangular matrix of shape (sequence_length, "
                          "sequence_length); sequence_length=%d; got detection pattern of shape %s")
MUL_WARNING = "Using detection pattern with values other than 0 or 1 with error_measure 'mul'"


def previous_token_pattern(L: int) -> torch.Tensor:
    """(L, L): 1 on the sub-diagonal."""
    d = torch.zeros(L, L)
    d[1:, :-1] = torch.eye(L - 1)
    return torch.tril(d)


def duplicate_token_pattern(tokens: list[str]) -> torch.Tensor:
    """(L, L): 1 where an earlier key has the query's token (the diagonal left out)."""
    codes = {t: c for c, t in enumerate(dict.fromkeys(tokens))}
    ids = np.array([codes[t] for t in tokens])  # (L,)
    eq = np.equal(ids[None, :], ids[:, None]).astype(int)  # (L, L)
    np.fill_diagonal(eq, 0)
    return torch.tril(torch.as_tensor(eq).float())


def induction_pattern(tokens: list[str]) -> torch.Tensor:
    """(L, L): the duplicate pattern shifted one key to the right, its first column 0."""
    dup = duplicate_token_pattern(tokens)
    shifted = torch.roll(dup, shifts=1, dims=1)
    return torch.tril(torch.cat((torch.zeros(dup.shape[0], 1), shifted[:, 1:]), dim=1))


def named_pattern(name: str, tokens: list[str] | None, L: int) -> torch.Tensor:
    if name not in HEAD_NAMES:
        raise ValueError(INVALID_HEAD_NAME_ERR % name)
    if name == "previous_token_head":
        return previous_token_pattern(L)
    if tokens is None:
        raise ValueError(f"{name} compares tokens: pass the tokens (one string per position, e.g. TransformerLens's "
                         "model.to_str_tokens(text)).")
    return duplicate_token_pattern(tokens) if name == "duplicate_token_head" else induction_pattern(tokens)


def similarity(pattern: torch.Tensor, detection: torch.Tensor, *, exclude_bos: bool, exclude_current_token: bool,
               error_measure: str) -> float:
    """One head's score: TransformerLens's ``compute_head_attention_similarity_score`` on a
    copy of ``pattern`` (L, L), in its float32 arithmetic."""
    a = pattern.clone()  # (L, L)
    if error_measure == "mul":
        if exclude_bos:
            a[:, 0] = 0
        if exclude_current_token:
            a.fill_diagonal_(0)
        return ((a * detection).sum() / a.sum()).item()
    diff = (a - detection).abs()  # (L, L)
    if (diff - torch.tril(diff)).sum() != 0:
        raise ValueError("error_measure 'abs' compares lower-triangular (causal) patterns: this attention has "
                         "weight above the diagonal (a query attending to a later key). Use error_measure='mul'.")
    size = len(diff)
    if exclude_bos:
        diff[:, 0] = 0
    if exclude_current_token:
        diff.fill_diagonal_(0)
    return 1 - round((diff.mean() * size).item(), 3)


def _heads(heads, layers: int, H: int) -> dict[int, list[int]]:
    if heads is None:
        return {layer: list(range(H)) for layer in range(layers)}
    if isinstance(heads, dict):
        chosen = {int(k): [int(h) for h in v] for k, v in heads.items()}
    else:
        chosen = defaultdict(list)
        for layer, head in heads:
            chosen[int(layer)].append(int(head))
    for layer, hs in chosen.items():
        if not 0 <= layer < layers or any(not 0 <= h < H for h in hs):
            raise ValueError(f"heads names layer {layer}, heads {hs}: this attention has {layers} layers × {H} heads.")
    return dict(chosen)


def detect_head(attention, tokens, detection_pattern, heads=None, *, exclude_bos: bool = False,
                exclude_current_token: bool = False, error_measure: str = "mul") -> torch.Tensor:
    """(layers, heads) float32: each head's score against ``detection_pattern`` (a name in
    ``HEAD_NAMES`` or an (L, L) lower-triangular tensor or array), as TransformerLens's
    ``detect_head`` computes it; heads left out by ``heads`` ([(layer, head)] or
    {layer: [head]}) score −1.

    ``attention``: anything ``attnviz.normalise`` reads (a TransformerLens cache, a stacked
    (layers, N, H, L, S) array, a model's output); ``tokens``: one string per position, BOS
    included (TransformerLens's ``to_str_tokens``)."""
    if error_measure not in ERROR_MEASURES:
        raise ValueError(f"Invalid error_measure={error_measure}; valid values are {ERROR_MEASURES}")
    a = normalise(attention, tokens)
    if a.L != a.S:
        raise ValueError(f"the head detector compares self-attention (L = S); got L={a.L}, S={a.S}.")
    L = a.L
    if isinstance(detection_pattern, str):
        detection = named_pattern(detection_pattern, None if tokens is None else a.tokens, L)
    else:
        detection = torch.as_tensor(np.asarray(detection_pattern, dtype=np.float32))
    if error_measure == "mul" and not set(detection.unique().tolist()).issubset({0, 1}):
        logging.warning(MUL_WARNING)
    if not L > 1:
        raise ValueError(SEQ_LEN_ERR)
    if detection.dim() != 2 or tuple(detection.shape) != (L, L) or not torch.equal(detection, torch.tril(detection)):
        raise ValueError(DET_PAT_NOT_SQUARE_ERR % (L, tuple(detection.shape)))
    w = torch.from_numpy(a.weights)  # (layers, H, L, L) float32
    scores = -torch.ones(a.layers, a.heads, dtype=torch.float32)
    for layer, hs in _heads(heads, a.layers, a.heads).items():
        for h in hs:
            scores[layer, h] = similarity(w[layer, h], detection, exclude_bos=exclude_bos,
                                          exclude_current_token=exclude_current_token, error_measure=error_measure)
    return scores
