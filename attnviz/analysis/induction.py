"""Head scores of Olsson et al. (2022), as pure functions of one head's weights.

- ``prefix_matching``: on a sequence whose block of ``period`` tokens repeats from
  ``first``, the mean attention from each token of the repeat to the position right after
  that token's earlier occurrence (i → i − period + 1): what an induction head does.
- ``previous_token``: the mean of a[i, i − 1].
- ``copying``: how much the head's output raises the logit of the token it attends to
  most, in standard deviations of its logit changes, averaged over positions.
"""

from __future__ import annotations

import torch

from attnviz.analysis.heads import diagonal_score


def prefix_matching(w: torch.Tensor, first: int, period: int) -> float:
    """w (L, L) one head's weights; the repeat starts at ``first`` and has ``period`` tokens."""
    L = w.shape[-1]
    rows = [i for i in range(first, min(first + period, L)) if i - period + 1 >= 0]
    if not rows or period < 1:
        return 0.0
    return float(sum(w[i, i - period + 1] for i in rows) / len(rows))


def previous_token(w: torch.Tensor) -> float:
    """w (L, L): the mean weight each token (but the first) gives the token before it: the head
    table's previous-token score (``heads.diagonal_score`` one below the diagonal), as a number."""
    return float(diagonal_score(w, -1))


def copying(w: torch.Tensor, logit_change: torch.Tensor, ids: torch.Tensor) -> float:
    """w (L, L) the head's weights; logit_change (L, V) what its output adds to each
    position's logits; ids (L,) the tokens. For each position, the z-score of the logit
    change of the token it attends to most, averaged."""
    attended = ids[w.argmax(-1)]  # (L,)
    mean, std = logit_change.mean(-1), logit_change.std(-1).clamp_min(1e-9)  # (L,)
    raised = logit_change.gather(-1, attended.unsqueeze(-1)).squeeze(-1)  # (L,)
    return float(((raised - mean) / std).mean())
