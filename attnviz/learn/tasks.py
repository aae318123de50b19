"""Tasks where attention has a visible job, as seeded batches of token ids.

- ``induction``: BOS, random tokens, and a random block of 6–14 tokens repeated right
  after itself at a random offset (a fixed offset lets layer-0 heads solve it by position
  alone, which is not induction). The part that counts is the repeat.
- ``marked``: BOS, random tokens, one of them preceded by a MARK token, and a QUERY token
  at the end whose answer is the marked token: one head must attend to it.

Each batch comes with ``focus`` (N, L) bool: the positions whose next-token loss is the
task's (the repeat, the answer); the rest is "elsewhere".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnviz.models.tiny import BOS, FIRST_TOKEN, MARK, QUERY

TASKS = ("induction", "marked")


@dataclass
class Batch:
    ids: torch.Tensor  # (N, L) long
    focus: torch.Tensor  # (N, L) bool: predicting ids[:, i + 1] there is the task's part
    first: list[int]  # per sequence: where the repeat (or the marked token) starts
    period: list[int]  # per sequence: the repeated block's length (0 for marked)


def batch(task: str, n: int, length: int, vocab: int, gen: torch.Generator) -> Batch:
    if task == "induction":
        return _induction(n, length, vocab, gen)
    if task == "marked":
        return _marked(n, length, vocab, gen)
    raise ValueError(f"Unknown task {task!r}; choose one of {', '.join(TASKS)}.")


def _randint(lo: int, hi: int, gen: torch.Generator) -> int:
    return int(torch.randint(lo, hi + 1, (1,), generator=gen))


def _induction(n: int, length: int, vocab: int, gen: torch.Generator) -> Batch:
    ids = torch.randint(FIRST_TOKEN, vocab, (n, length), generator=gen)  # (N, L)
    ids[:, 0] = BOS
    focus = torch.zeros(n, length, dtype=torch.bool)
    first, period = [], []
    for row in range(n):
        b = _randint(6, min(14, (length - 2) // 2), gen)
        o = _randint(1, length - 2 * b, gen)
        ids[row, o + b:o + 2 * b] = ids[row, o:o + b]  # the block again, right after itself
        focus[row, o + b:o + 2 * b - 1] = True  # predicting the 2nd…last token of the repeat
        first.append(o + b)
        period.append(b)
    return Batch(ids, focus, first, period)


def _marked(n: int, length: int, vocab: int, gen: torch.Generator) -> Batch:
    ids = torch.randint(FIRST_TOKEN, vocab, (n, length), generator=gen)  # (N, L)
    ids[:, 0] = BOS
    focus = torch.zeros(n, length, dtype=torch.bool)
    first = []
    for row in range(n):
        p = _randint(2, length - 3, gen)
        ids[row, p - 1] = MARK
        ids[row, -2] = QUERY
        ids[row, -1] = ids[row, p]  # the answer: the marked token
        focus[row, -2] = True
        first.append(p)
    return Batch(ids, focus, first, [0] * n)
