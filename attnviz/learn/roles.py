"""The tiny model's head roles, as the explorer names them for any model.

The scores, thresholds and roles are ``attnviz.analysis.roles``'s (``head_scores``,
``head_roles``), measured on the explorer's kind of probe: ``PROBE_LENGTH`` seeded random
tokens of the model's vocabulary (ordinary tokens, no BOS, MARK or QUERY), repeated once,
after the BOS every training sequence starts with. All six scores (previous token, first
token, self, duplicate token, induction, entropy) are read on that probe: it is the input
the training records every checkpoint's roles on, so that they can be followed as it learns.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.analysis.roles import PROBE_LENGTH, PROBE_SEED, head_roles, head_scores, probe_ids
from attnviz.learn.tasks import BOS, FIRST_TOKEN
from attnviz.models.tiny import AttentionOnly


def probe(vocab: int) -> list[int]:
    """BOS, then ``PROBE_LENGTH`` seeded random ordinary tokens, then the same tokens again."""
    return [BOS] + probe_ids(vocab, PROBE_LENGTH, PROBE_SEED, low=FIRST_TOKEN)


def probe_weights(model: AttentionOnly) -> np.ndarray:
    """Every layer's weights on ``probe(model.vocab)``: (layers, H, L, L)."""
    with torch.no_grad():
        _logits, weights = model(torch.tensor([probe(model.vocab)]))  # [(1, H, L, L)]
    return torch.stack([w[0] for w in weights]).numpy()  # (layers, H, L, L)


def scores(weights: np.ndarray, vocab: int) -> dict[str, np.ndarray]:
    """``head_scores`` of ``weights`` (layers, H, L, L) on the probe: {score: (layers, H)}."""
    return head_scores(weights, [str(t) for t in probe(vocab)])


def roles(s: dict) -> np.ndarray:
    """(layers, H) role names ("" for none): every score, the probe's roles too, read on the probe."""
    s = {k: np.asarray(v, dtype=np.float64) for k, v in s.items()}
    return head_roles(s, s)


def of_model(model: AttentionOnly) -> dict[str, np.ndarray]:
    """``model``'s scores on its probe: {score: (layers, H)}."""
    return scores(probe_weights(model), model.vocab)


def record(model: AttentionOnly) -> dict[str, list]:
    """A checkpoint's roles for its JSON record: {score: (layers, H) as lists}."""
    return {k: v.tolist() for k, v in of_model(model).items()}
