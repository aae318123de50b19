"""``compute()`` for a pretrained encoder: WordPiece tokens, every layer's weights, and
the chosen layer's every step, in the same ``AttentionResult`` as the random model."""

from __future__ import annotations

import copy
import time

import torch

from . import limits
from .devices import resolve_device
from .i18n import _
from .masks import padding_mask
from .models import load
from .pipeline import PAD, AttentionConfig, AttentionResult, _to_cpu, lines_of


def compute_pretrained(config: AttentionConfig) -> AttentionResult:
    timings: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    lines = lines_of(config.text)
    if config.source.strip():
        raise ValueError("Cross-attention runs on the random model: a BERT encoder attends within one text.")
    model = load(config.model)
    timings["load"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    tokens, ids = model.encode(lines)
    lengths = [len(t) for t in tokens]
    L = max(max(lengths), min(config.pad_to, limits.MAX_TOKENS))
    cfg = model.cfg
    if L > cfg.max_position_embeddings:
        raise ValueError(f"pad_to {config.pad_to} is past {model.name}'s {cfg.max_position_embeddings} positions.")
    if not 0 <= config.layer < cfg.num_hidden_layers:
        raise ValueError(f"Layer {config.layer} does not exist: {model.name} has {cfg.num_hidden_layers} layers "
                         f"(0–{cfg.num_hidden_layers - 1}).")
    N, H, E, layers = len(lines), cfg.num_attention_heads, cfg.hidden_size, cfg.num_hidden_layers
    # Every step of one layer, plus every layer's weights: decided before allocating.
    size = limits.RunSize(N, H, L, L, E)
    total = size.bytes + (layers - 1) * size.lean_bytes
    if total > limits.memory_budget_bytes():
        fits = limits.longest_that_fits(N, H * layers, E, limits.memory_budget_bytes())
        raise ValueError(f"This run would hold about {total / 2**20:,.0f} MB ({layers} layers × {N} × {H} heads × "
                         f"{L} × {L}), over this server's budget of {limits.memory_budget_bytes() / 2**20:,.0f} MB. "
                         f"Use fewer lines or a shorter text: about {fits} WordPiece tokens fit with {N} line(s).")
    timings["tokenize"] = (time.perf_counter() - t0) * 1e3
    if config.mask not in ("none", "padding"):
        notes.append(_("{model} is a bidirectional encoder: every token sees every real token. Only padding is "
                       "masked; the sidebar's mask applies to the random model.").format(model=model.name))
    if config.dropout:
        notes.append(_("Dropout is off for a pretrained model (it runs as in inference)."))

    t0 = time.perf_counter()
    device = resolve_device(config.device)
    id_tensor = torch.zeros(N, L, dtype=torch.long)  # (N, L), [PAD] = id 0
    for n, row in enumerate(ids):
        id_tensor[n, : len(row)] = torch.tensor(row)
    mask = padding_mask(lengths, L)  # (N, 1, 1, S): padded keys blocked, as in BERT
    encoder = model.encoder if device.type == "cpu" else copy.deepcopy(model.encoder).to(device)
    run = encoder.run(id_tensor.to(device), mask.to(device), keep=config.layer)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timings["attention"] = (time.perf_counter() - t0) * 1e3
    layer_model = model.encoder.layers[config.layer].attention  # shared, read-only: verify/gradients copy it
    padded = [t + [PAD] * (L - len(t)) for t in tokens]
    return AttentionResult(
        config=config, tokens=padded, source_tokens=padded, lengths=lengths, source_lengths=lengths,
        embeddings=run.layer_input.cpu(), source_embeddings=run.layer_input.cpu(), mask=mask,
        steps=_to_cpu(run.steps), model=layer_model, device=str(device), timings_ms=timings, notes=notes,
        layer_weights=run.layer_weights.cpu(), last_hidden=run.last_hidden.cpu(),
    )  # fmt: skip
