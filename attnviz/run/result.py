"""``AttentionResult``: the one record every view reads, whatever the input and the model."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attnviz import limits
from attnviz.core.multihead import MultiHeadAttention, MultiHeadSteps
from attnviz.i18n import _
from attnviz.models.base import HeadParts
from attnviz.run.config import AttentionConfig


@dataclass
class AttentionResult:
    """Everything one run produced; tensors live on the CPU, detached."""

    config: AttentionConfig | None  # the text run's settings (None for an image, a sound, a graph)
    tokens: list[list[str]]  # per sequence, padded to L with PAD (queries)
    source_tokens: list[list[str]]  # keys/values; same as tokens for self-attention
    lengths: list[int]  # real (unpadded) query lengths
    source_lengths: list[int]
    embeddings: torch.Tensor  # the followed layer's input X (N, L, E)
    source_embeddings: torch.Tensor  # keys'/values' input (N, S, E); `embeddings` for self-attention
    mask: torch.Tensor | None  # bool, broadcastable to (N, H, L, S); True = may attend
    steps: MultiHeadSteps  # every intermediate (CPU)
    model: MultiHeadAttention  # the module that ran (CPU copy)
    device: str
    timings_ms: dict[str, float]
    notes: list[str] = field(default_factory=list)
    layer_weights: torch.Tensor | None = None  # every layer's weights (layers, N, H, L, S)
    last_hidden: torch.Tensor | None = None  # a pretrained encoder's output (N, L, E)
    kind: str = "text"  # the input's kind: text, image, audio, graph
    model_name: str = "random"
    layer: int = 0  # the followed layer
    mask_name: str = "none"  # what blocks keys, in words ("causal", "adjacency")
    dropout: float = 0.0
    settings: dict = field(default_factory=dict)  # the plain settings that made it (JSON export)
    next_tokens: list[list[tuple[str, float]]] | None = None  # a causal LM's top 10 after each sequence
    parts: HeadParts | None = None  # the followed layer's values and W_O, for contributions (None: not given)
    # Values derived from this run once, whoever reads them (a knock-out reruns the model): ``derived``.
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def derived(self, key, build):
        """``build()``, once per run and ``key`` (a plain value): the run is shared read-only, and
        what is derived from it is the same for every reader."""
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]

    def __post_init__(self) -> None:
        if self.layer_weights is None:  # a one-layer model: layers = 1 (a view, no copy)
            self.layer_weights = self.steps.weights.unsqueeze(0)

    @property
    def weights(self) -> torch.Tensor:
        return self.steps.weights  # (N, H, L, S)

    @property
    def output(self) -> torch.Tensor:
        return self.steps.output  # (N, L, E)

    @property
    def heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def width(self) -> int:
        return int(self.embeddings.shape[-1])

    @property
    def layers(self) -> int:
        return int(self.layer_weights.shape[0])

    @property
    def pretrained(self) -> bool:
        return self.model_name != "random"

    @property
    def complete(self) -> bool:
        """Every intermediate kept (False for a long, lean run: weights only)."""
        return self.steps.complete

    def require_complete(self) -> None:
        """Raise the budget's ``ValueError`` (which sizes fit) for a page that needs every step,
        or say that this model exposes its weights only."""
        if self.width == 0:
            raise ValueError(_("{model} gives its attention weights only (no Q, K, V or output vectors): this page "
                               "needs every step. The explorer shows every view of its weights.").format(
                model=self.model_name))
        if not self.complete:
            N, H, L, S = self.weights.shape
            limits.check_budget(limits.RunSize(N, H, L, S, self.width))

    @property
    def is_cross(self) -> bool:
        return self.source_embeddings is not self.embeddings

    def mask_matrix(self, n: int = 0) -> torch.Tensor:
        """The (L, S) bool mask of sequence ``n`` (all True when unmasked)."""
        N, H, L, S = self.weights.shape
        if self.mask is None:
            return torch.ones(L, S, dtype=torch.bool)
        return self.mask.expand(N, 1, L, S)[n, 0]  # (L, S)

    def blocked(self, n: int = 0) -> int:
        """How many query–key pairs of sequence ``n`` the mask blocks."""
        return int((~self.mask_matrix(n)).sum())

    def fully_masked_rows(self, n: int = 0) -> list[int]:
        """The queries of sequence ``n`` that may see no key at all."""
        return [int(i) for i in torch.nonzero(~self.mask_matrix(n).any(-1)).flatten()]

    def visible_keys(self, n: int, query: int) -> int:
        """How many keys query ``query`` of sequence ``n`` may attend to."""
        return int(self.mask_matrix(n)[query].sum())

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor of the run by name; for a model that gives its weights only (width 0),
        the followed layer's weights and every layer's, not empty Q, K and V."""
        if self.width == 0:
            return {"weights": tuple(self.weights.shape), "every layer's weights": tuple(self.layer_weights.shape)}
        return {"X": tuple(self.embeddings.shape), **self.steps.shapes()}

    def to_dict(self) -> dict:
        """Plain data for JSON export: settings, tokens, weights, output."""
        return {
            "config": self.settings,
            "tokens": self.tokens,
            "source_tokens": self.source_tokens,
            "lengths": self.lengths,
            "shapes": {k: list(v) for k, v in self.shapes().items()},
            "weights": self.weights.tolist(),  # (N, H, L, S)
            "output": self.output.tolist(),  # (N, L, E)
            **({"layer_weights": self.layer_weights.tolist()} if self.layers > 1 else {}),  # (layers, N, H, L, S)
        }
