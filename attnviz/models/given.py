"""Weights computed elsewhere (an attention file, a notebook's tensors) behind the model seam.

The model is the weights themselves: (layers, H, L, S), already masked and normalised by
whoever made them. It keeps only the weights (a lean run): the views that need Q, K, V or
the output vectors say that this run has none.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.core.attention import AttentionSteps
from attnviz.core.multihead import MultiHeadSteps
from attnviz.inputs.record import Input
from attnviz.models.base import ModelRun


def given_input(tokens: list[str], L: int) -> Input:
    """The tokens of given weights: no vectors (width 0), no padding."""
    return Input("attention file", [list(tokens)], [L], torch.zeros(1, L, 0))


class GivenWeights:
    honours_masks = False  # what was masked is in the weights already

    def __init__(self, weights: np.ndarray, name: str = "attention file") -> None:
        self.name = name
        self.weights = torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32))  # (layers, H, L, S)
        self.layers, self.heads = int(self.weights.shape[0]), int(self.weights.shape[1])
        self.width = 0

    def own_mask(self, inp: Input) -> str:
        """What the weights show was masked: "causal" when every weight above the diagonal is
        0 (a decoder's file), else "none". attnviz masks nothing more; the record names it."""
        L, S = self.weights.shape[-2:]
        causal = L == S and L > 1 and not bool(torch.triu(self.weights, diagonal=1).any())
        return "causal" if causal else "none"

    def plan(self, N: int, L: int, S: int) -> str:
        return "full"  # the weights are all there is (their size was checked when they were read)

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool = True, dropout: float = 0.0, layer: int = 0) -> ModelRun:
        if not 0 <= layer < self.layers:
            raise ValueError(f"Layer {layer} does not exist: the file has {self.layers} layers (0–{self.layers - 1}).")
        w = self.weights[layer].unsqueeze(0)  # (1, H, L, S)
        H, L, S = w.shape[1:]
        empty = torch.zeros(1, H, L, 0)  # no per-head vectors
        steps = MultiHeadSteps(empty, torch.zeros(1, H, S, 0), torch.zeros(1, H, S, 0),
                               AttentionSteps(None, None, None, w, w, empty, 1.0, None),
                               torch.zeros(1, L, 0), torch.zeros(1, L, 0))
        return ModelRun(steps, None, inp.x, self.weights.unsqueeze(1))  # layer_weights (layers, 1, H, L, S)
