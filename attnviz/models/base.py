"""What every model gives a run, whatever it is.

A model reads an ``Input`` (vectors X, or token ids it embeds itself) and returns a
``ModelRun``: every layer's attention weights, plus every intermediate step of the
layer the views follow (Q, K, V, scores, masked scores, weights, outputs) and the
``MultiHeadAttention`` module that computed them. A model that honours the sidebar's
masks takes any mask; a pretrained one says so (``honours_masks = False``) and the run
blocks the mask it was trained with: ``own_mask(input)`` ("causal" for a decoder, the
"padding" of an encoder when the model does not say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from attnviz.core.multihead import MultiHeadAttention, MultiHeadSteps
from attnviz.inputs.record import Input


class ModelError(ValueError):
    """A model that cannot be found, verified or run; the message says what to do."""


@dataclass
class ModelRun:
    steps: MultiHeadSteps  # the followed layer's every intermediate (or its weights only, when lean)
    module: MultiHeadAttention  # the followed layer's attention (CPU): verify and gradients rerun it
    layer_input: torch.Tensor  # the followed layer's input X (N, L, E)
    layer_weights: torch.Tensor | None = None  # every layer's weights (layers, N, H, L, S); None: one layer
    last_hidden: torch.Tensor | None = None  # the model's output (N, L, E), for a deep model
    next_tokens: list[list[tuple[str, float]]] | None = None  # a causal LM's top 10 after each sequence


class Model(Protocol):
    name: str
    heads: int
    width: int
    layers: int
    honours_masks: bool  # False: only padding is masked (a pretrained encoder)

    def read_text(self, lines: list[str], *, pad_to: int, tokenize_mode: str, positional: bool,
                  max_tokens: int, kind: str = "text") -> Input: ...

    def plan(self, N: int, L: int, S: int) -> str: ...  # "full" or "lean", or ValueError over the budget

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool, dropout: float, layer: int) -> ModelRun: ...

    # Optional, for a model with honours_masks = False: the mask it was trained with
    # for this input ("causal" or "padding"; "padding" when absent).
    # def own_mask(self, inp: Input) -> str: ...
