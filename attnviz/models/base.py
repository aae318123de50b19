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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from attnviz.core.multihead import MultiHeadAttention, MultiHeadSteps
from attnviz.inputs.record import Input


class ModelError(ValueError):
    """A model that cannot be found, verified or run; the message says what to do."""


@dataclass
class HeadParts:
    """What the followed layer's heads hand to its output projection: enough to weigh each
    head's values (Kobayashi et al. 2020) and to knock a head out.

        out = joined W_O^T + b_O,  joined = [head_0 | head_1 | ... ]   (N, L, H·D)

    ``w_o``'s columns h·D .. (h+1)·D are W_O^h, the slice head h's output multiplies.
    ``q`` and ``k`` are the ones the scores use, kept only where

        weights = softmax(q·k · scale + bias + mask)

    gives the model's own weights (``qk_note`` says why not). A model with rotary positions
    rotates q and k by position before q·k (``rotary``: these are the rotated ones); one with a
    relative position bias (T5) adds ``bias`` to the scores (None: no bias).
    ``knock_out(n, heads)``: for a causal LM, the next-token probabilities (len(heads), V)
    after sequence ``n``, row r with head ``heads[r]``'s output zeroed before W_O (-1: none),
    from one batched rerun of the whole model; None elsewhere.
    """

    v: torch.Tensor  # values per head, a grouped key/value head repeated per query head (N, H, S, D)
    joined: torch.Tensor  # the output projection's input (N, L, H·D)
    output: torch.Tensor  # its output (N, L, E)
    w_o: torch.Tensor  # (E, H·D), as nn.Linear holds it
    b_o: torch.Tensor | None  # (E,)
    q: torch.Tensor | None = None  # (N, H, L, D), as the scores use them
    k: torch.Tensor | None = None  # (N, H, S, D)
    scale: float = 1.0  # scores = q·k · scale (+ bias)
    bias: torch.Tensor | None = None  # a position bias added to the scores, before the mask (N, H, L, S)
    rotary: bool = False  # q and k are rotated by position (rotary positions) before q·k
    qk_note: str = ""  # why q and k are not kept
    knock_out: Callable[[int, list[int]], torch.Tensor] | None = None
    token_name: Callable[[int], str] | None = None  # a vocabulary id's token, with knock_out
    qk_check: Callable[[], str] | None = None  # "" when q and k give the weights, else why not (run once)

    def confirm_qk(self) -> bool:
        """Whether q and k are the ones the scores use: a model's pending check runs once (on
        the first view that needs them, not in every forward pass); on failure q and k are
        dropped and ``qk_note`` says why."""
        if self.qk_check is not None:
            why, self.qk_check = self.qk_check(), None
            if why:
                self.q = self.k = self.bias = None
                self.qk_note = why
        return self.q is not None and self.k is not None

    @property
    def heads(self) -> int:
        return int(self.v.shape[1])

    @property
    def head_dim(self) -> int:
        return int(self.v.shape[-1])

    @classmethod
    def of_module(cls, module: MultiHeadAttention, steps: MultiHeadSteps) -> HeadParts:
        """The parts of attnviz's own layer, from its steps (every model that runs it)."""
        return cls(steps.v, steps.joined, steps.output, module.out_proj.weight.detach(),
                   None if module.out_proj.bias is None else module.out_proj.bias.detach(),
                   steps.q, steps.k, steps.attention.scale)


@dataclass
class ModelRun:
    steps: MultiHeadSteps  # the followed layer's every intermediate (or its weights only, when lean)
    module: MultiHeadAttention  # the followed layer's attention (CPU): verify and gradients rerun it
    layer_input: torch.Tensor  # the followed layer's input X (N, L, E)
    layer_weights: torch.Tensor | None = None  # every layer's weights (layers, N, H, L, S); None: one layer
    last_hidden: torch.Tensor | None = None  # the model's output (N, L, E), for a deep model
    next_tokens: list[list[tuple[str, float]]] | None = None  # a causal LM's top 10 after each sequence
    parts: HeadParts | None = None  # the followed layer's values and W_O (None: the run cannot give them)


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
