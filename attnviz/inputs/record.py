"""``Input``: what every kind of input becomes before attention sees it.

Text, source text, image patches, audio frames and graph nodes each return this one
record, knowing nothing about attention or models: one label per token, the vectors
(or the token ids, for a model with its own vocabulary), which positions are padding,
and an optional structural mask (a graph's adjacency, an image's 2-D window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

PAD = "[PAD]"


@dataclass
class Input:
    kind: str  # "text", "source text", "image", "audio", "graph"
    tokens: list[list[str]]  # per sequence, padded to L with PAD
    lengths: list[int]  # real (unpadded) lengths: later positions are key padding
    x: torch.Tensor | None  # (N, L, E) the tokens' vectors; None when the model embeds ``ids`` itself
    # or until ``embed`` makes them: a run decides its memory plan from the tokens alone.
    ids: torch.Tensor | None = None  # (N, L) token ids, for a model with its own tokenizer
    mask: torch.Tensor | None = None  # (L, L) bool, True = may attend: structure the data itself has
    mask_name: str = ""  # what ``mask`` is called in sentences ("adjacency", "window2d")
    meta: dict = field(default_factory=dict)  # kind-specific: grid shape, frame times, edges
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)  # how long reading it took, by step
    embed: Callable[[], torch.Tensor] | None = None  # makes ``x`` on first use

    def vectors(self) -> torch.Tensor:
        """X (N, L, E), made now if it was left for later."""
        if self.x is None and self.embed is not None:
            self.x, self.embed = self.embed(), None
        return self.x

    @property
    def L(self) -> int:
        return len(self.tokens[0])

    @property
    def padded(self) -> bool:
        return any(n < self.L for n in self.lengths)

    @property
    def labels(self) -> list[str]:
        """The first sequence's labels (a modality input has one sequence)."""
        return self.tokens[0]


def single(kind: str, labels: list[str], x: torch.Tensor, mask: torch.Tensor | None = None, mask_name: str = "",
           meta: dict | None = None, notes: list[str] | None = None) -> Input:
    """One sequence of vectors ``x`` (L, E) with no padding: an image, a sound, a graph."""
    return Input(kind, [list(labels)], [len(labels)], x.to(torch.float32).unsqueeze(0), None, mask, mask_name,
                 meta or {}, list(notes or []))
