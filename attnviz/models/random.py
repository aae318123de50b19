"""The random model: one layer of seeded random projections over tokenizer-free embeddings.

All randomness (the projection weights, dropout) comes from one CPU ``torch.Generator``
seeded by ``seed``, so the same settings give bit-identical results on the same device
and the same weights on every device. The generator is used in a fixed order: the
projections when the layer is built, then dropout when it runs.
"""

from __future__ import annotations

import copy

import torch

from attnviz import cache, limits
from attnviz.core.multihead import MultiHeadAttention
from attnviz.inputs.record import Input
from attnviz.inputs.text import text_input, tokenize_lines
from attnviz.models.base import ModelRun

RANDOM = "random"

# The layers drawn so far and the generator's state after each, shared read-only by the
# runs (as a pretrained model's layers are): (d_model, heads, seed, projections) -> both.
LAYERS = cache.named("layers",
                     size_of=lambda drawn: 4 * sum(p.numel() for p in drawn[0].parameters()) + drawn[1].numel())


class RandomLayer:
    name = RANDOM
    layers = 1
    honours_masks = True

    def __init__(self, d_model: int, heads: int, seed: int = 0, projections: bool = True) -> None:
        MultiHeadAttention.check_heads(d_model, heads)  # said before anything is drawn
        self.width, self.heads, self.projections = d_model, heads, projections
        self.seed = int(seed)
        self.generator = torch.Generator().manual_seed(self.seed)  # CPU: same draws on every device
        self._module: MultiHeadAttention | None = None

    @property
    def module(self) -> MultiHeadAttention:
        """The layer, drawn from the generator when first needed (after the run's memory
        plan). The layers already drawn are shared (``LAYERS``): a class whose links share
        a seed builds each layer once. The generator then goes on from where drawing that
        layer left it, so dropout draws what it would have."""
        if self._module is None:
            self._module, after = LAYERS.get_or_compute((self.width, self.heads, self.seed, self.projections),
                                                        self._draw)
            self.generator.set_state(after)
        return self._module

    def _draw(self) -> tuple[MultiHeadAttention, torch.Tensor]:
        generator = torch.Generator().manual_seed(self.seed)
        module = MultiHeadAttention(self.width, self.heads, generator=generator)
        if not self.projections:
            module.identity_()
        return module, generator.get_state()

    def read_text(self, lines: list[str], *, pad_to: int, tokenize_mode: str, positional: bool,
                  max_tokens: int, kind: str = "text") -> Input:
        seqs = tokenize_lines(lines, tokenize_mode, max_tokens)
        return text_input(seqs, d_model=self.width, positional=positional, pad_to=pad_to, kind=kind)

    def plan(self, N: int, L: int, S: int) -> str:
        return limits.plan(limits.RunSize(N, self.heads, L, S, self.width))

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool, dropout: float, layer: int = 0) -> ModelRun:
        x = inp.vectors()  # (N, L, E)
        if x.shape[-1] != self.width:
            raise ValueError(f"The input vectors have width {x.shape[-1]}, the model {self.width}.")
        on_cpu = device.type == "cpu"  # the layer is drawn there: no Module.to walk (a torch call per tensor)
        with torch.no_grad():
            # The drawn layer is shared (LAYERS): it is never changed, so another device gets a copy.
            module = self.module if on_cpu else copy.deepcopy(self.module).to(device)
            run = module.lean_steps if lean else module.steps
            def here(t):  # on the run's device
                return t if on_cpu or t is None else t.to(device)

            steps = run(here(x), here(None if source is None else source.vectors()), None, here(mask),
                        dropout_p=dropout, generator=self.generator)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return ModelRun(steps, module if on_cpu else module.cpu(), x)
