"""What the non-text inputs share: seeded projections into the model's width, and
standardised features, so every kind of data reaches attention on the same scale."""

from __future__ import annotations

import math

import torch

from attnviz import limits
from attnviz.i18n import _


def seeded_projection(n_in: int, d_model: int, seed: int, salt: int) -> torch.Tensor:
    """A seeded (n_in, d_model) projection with unit-variance outputs for unit inputs."""
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + salt)
    return torch.randn(n_in, d_model, generator=gen) / math.sqrt(max(1, n_in))


def standardise(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance per feature over the tokens (an all-equal feature stays 0)."""
    return (x - x.mean(0)) / x.std(0, unbiased=False).clamp_min(1e-6)


def check_upload(data: bytes) -> None:
    """An uploaded file's size, before anything reads it."""
    if len(data) > limits.MAX_UPLOAD_BYTES:
        raise ValueError(_("The file has {mb} MB; the limit is {limit} MB.").format(
            mb=f"{len(data) / 2**20:.1f}", limit=f"{limits.MAX_UPLOAD_BYTES / 2**20:.0f}"))
