"""A finished training, loaded back as a small causal LM: predictions for a typed
sequence, its attention, and the loss on the task's part with a head knocked out."""

from __future__ import annotations

from pathlib import Path

import torch

from attnviz.analysis.subjects import Subject, TinySubject, registry_subject
from attnviz.core.nexttoken import top_tokens
from attnviz.learn.train import VOCAB, LearnSettings, build, losses
from attnviz.learn.worker import trained_weights
from attnviz.models.registry import TRAINED
from attnviz.models.tiny import AttentionOnly, read_token, token_name


def load_trained(settings: LearnSettings, weights: Path) -> AttentionOnly:
    """The trained model from its safetensors file (shapes checked against the settings)."""
    from safetensors.torch import load_file

    model, _held, _probe = build(settings)
    state = load_file(str(weights))
    model.load_state_dict(state, strict=True)
    model.eval()
    return model


def trained_model(settings: LearnSettings | None = None) -> AttentionOnly:
    """The model ``settings`` train to (the page's defaults unless given), trained first where it never was."""
    settings = settings or LearnSettings()
    return load_trained(settings, trained_weights(settings))


def parse_sequence(text: str, length: int) -> list[int]:
    """A typed sequence: token numbers (or BOS, MARK, QUERY) separated by spaces or commas;
    ``ValueError`` naming what is wrong."""
    out = []
    for item in text.replace(",", " ").split():
        t = read_token(item)
        if t is None:
            raise ValueError(f"{item[:20]!r} is not a token: type numbers 3–{VOCAB - 1}, "
                             f"or BOS, MARK, QUERY.")
        if not 0 <= t < VOCAB:
            raise ValueError(f"Token {t} is outside the vocabulary 0–{VOCAB - 1}.")
        out.append(t)
    if not out:
        raise ValueError("Type at least one token, for example: BOS 5 9 12 5 9")
    if len(out) > length:
        raise ValueError(f"The model reads at most {length} tokens; this has {len(out)}.")
    return out


def predict(model: AttentionOnly, ids: list[int], k: int = 10) -> tuple[list[tuple[str, float]], torch.Tensor]:
    """The top-k next tokens after ``ids`` with their probabilities, and every layer's
    weights on ``ids`` (layers, H, L, L)."""
    with torch.no_grad():
        logits, weights = model(torch.tensor([ids]))  # (1, L, V)
    return top_tokens(logits[0, -1], lambda top: [token_name(i) for i in top], k), torch.stack([w[0] for w in weights])


def knocked_out_loss(model: AttentionOnly, settings: LearnSettings, layer: int, head: int) -> dict[str, float]:
    """The loss on the task's part and elsewhere, with and without head (layer, head)."""
    _m, held, _probe = build(settings)
    mask = torch.ones(len(model.layers), model.heads)  # (layers, H)
    mask[layer, head] = 0.0
    full, full_other = losses(model, held)
    out, out_other = losses(model, held, mask)
    return {"loss_repeat": full, "loss_other": full_other, "knocked_repeat": out, "knocked_other": out_other}


def subject_of(model, purpose: str = "patch") -> Subject:
    """The model a sweep patches (``attnviz.analysis.subjects``), from what the API, the pages and the CLI name it
    by: a model name, a Hugging Face folder, "watch-it-learn" (this module's trained model) or an
    ``AttentionOnly`` (``purpose``: what it is for, which a refusal names: "patch" or "lens")."""
    if isinstance(model, AttentionOnly):
        return TinySubject(model, "the tiny model")
    if model == TRAINED:
        return TinySubject(trained_model(), TRAINED)
    if isinstance(model, (str, Path)):
        return registry_subject(str(model), purpose)
    raise ValueError(f"model must be a model name, a Hugging Face folder, {TRAINED!r} or an attnviz AttentionOnly "
                     f"model; got {type(model).__name__}.")
