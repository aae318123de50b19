"""A tuned lens (Belrose et al. 2023, "Eliciting Latent Predictions from Transformers with the
Tuned Lens"): one affine translator per layer, h ↦ h + A_ℓ h + b_ℓ for the stream into layer ℓ
(the embeddings are ℓ = 0), applied before the final norm and the unembedding
(``attnviz.analysis.lens``). Its folder is tuned-lens 0.2.0's (read from its source,
``tuned_lens/nn/lenses.py``: ``TunedLens.save`` and ``from_unembed_and_pretrained``):

- ``config.json``: ``TunedLensConfig``'s fields (``base_model_name_or_path``, ``d_model``,
  ``num_hidden_layers``, ``bias``, ``base_model_revision``, ``unembed_hash``, ``lens_type``
  "linear_tuned_lens");
- ``params.pt``: the ``state_dict`` of its ``layer_translators``, an ``nn.ModuleList`` of
  ``nn.Linear(d_model, d_model)``: ``"ℓ.weight"`` (A_ℓ, (E, E), as ``nn.Linear`` holds it) and
  ``"ℓ.bias"`` (b_ℓ, (E,)) for ℓ = 0 … layers − 1.

A folder is untrusted: its files' sizes are bounded before they are read (``limits.max_lens_bytes``),
``params.pt`` is read with ``torch.load(weights_only=True)`` (tensors only, no code), and every key,
shape and value is checked against the model it is read for. attnviz never imports tuned-lens.

**Training** (``fit``), as the paper does: the translators start at zero (the lens starts as the
logit lens) and minimise Σ_ℓ KL(p ‖ q_ℓ) over a corpus's tokens, p the model's own distribution
and q_ℓ the tuned lens's at layer ℓ; here with Adam on minibatches of ``LENS_BATCH_TOKENS`` tokens
of residual streams computed once (the paper: SGD with Nesterov momentum on 2¹⁸-token batches).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from attnviz import limits
from attnviz.analysis.lens import unembed
from attnviz.analysis.subjects import Subject

CONFIG, PARAMS = "config.json", "params.pt"
LENS_TYPE = "linear_tuned_lens"
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 1e-3  # the paper's, here on A and b: it pulls the lens toward the logit lens


def unembed_hash(w_u: torch.Tensor) -> str:
    """tuned-lens's hash of the unembedding (``tuned_lens.utils.tensor_hash``): SHA-256 of NumPy's
    printed summary of the matrix at one decimal, so that its loader knows the lens's model."""
    return hashlib.sha256(np.array_str(w_u.detach().cpu().float().numpy(), precision=1).encode()).hexdigest()


def _width(subject: Subject) -> int:
    return int(subject.stack.unembedding().w_u.shape[1])


@dataclass
class TunedLens:
    """A tuned lens: its translators, its config (tuned-lens's fields), where it was read or written."""

    weight: torch.Tensor  # (layers, E, E): A_ℓ, as nn.Linear holds it (out, in)
    bias: torch.Tensor | None  # (layers, E): b_ℓ; None for a lens without biases
    config: dict
    folder: Path | None = None
    notes: list[str] = field(default_factory=list)
    fit: dict | None = None  # how it was trained here: steps, tokens, seconds, each layer's KL before and after

    @property
    def layers(self) -> int:
        return int(self.weight.shape[0])

    @property
    def width(self) -> int:
        return int(self.weight.shape[-1])

    def translate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """h + A_ℓ h + b_ℓ for streams ``h`` (..., E) into layer ``layer``: ``TunedLens.transform_hidden``."""
        out = h + h @ self.weight[layer].T  # (..., E)
        return out if self.bias is None else out + self.bias[layer]

    def check(self, subject: Subject) -> None:
        """``ValueError`` unless it was made for a model of ``subject``'s layers and width."""
        _fits(self.folder, self.layers, self.width, subject)

    def save(self, folder) -> Path:
        """Write ``config.json`` and ``params.pt`` into ``folder`` (made where missing): tuned-lens's ``save``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {}
        for i in range(self.layers):
            state[f"{i}.weight"] = self.weight[i].detach().clone().contiguous()
            if self.bias is not None:
                state[f"{i}.bias"] = self.bias[i].detach().clone().contiguous()
        torch.save(state, folder / PARAMS)
        (folder / CONFIG).write_text(json.dumps(self.config), encoding="utf-8")
        self.folder = folder
        return folder


def _fits(folder, layers: int, width: int, subject: Subject) -> None:
    """``ValueError`` unless a lens of ``layers`` translators of ``width`` fits ``subject``."""
    if (layers, width) != (subject.stack.layers, _width(subject)):
        where = f"The lens at {folder}" if folder else "The lens"
        raise ValueError(f"{where} was tuned for a model of {layers} layers and width {width}; {subject.name} has "
                         f"{subject.stack.layers} layers and width {_width(subject)}.")


def config_for(subject: Subject, bias: bool = True) -> dict:
    """tuned-lens 0.2.0's ``TunedLensConfig`` for ``subject``."""
    return {"base_model_name_or_path": subject.name, "d_model": _width(subject),
            "num_hidden_layers": subject.stack.layers, "bias": bias, "base_model_revision": None,
            "unembed_hash": unembed_hash(subject.stack.unembedding().w_u), "lens_type": LENS_TYPE}


def _sized(path: Path, most: int, what: str) -> None:
    if not path.is_file():
        raise ValueError(f"{path.parent} is not a tuned lens folder: it has no {path.name} (tuned-lens 0.2.0's format: "
                         f"{CONFIG} and {PARAMS}).")
    size = path.stat().st_size
    if size > most:
        raise ValueError(f"{path} has {size:,} bytes; {what} holds at most {most:,}.")


def _config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not JSON ({e}).") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a tuned lens's config: it holds no object.")
    if config.get("lens_type", LENS_TYPE) != LENS_TYPE:
        raise ValueError(f"{path} is a lens of type {config.get('lens_type')!r}; attnviz reads {LENS_TYPE!r} only.")
    for key in ("d_model", "num_hidden_layers"):
        if isinstance(config.get(key), bool) or not isinstance(config.get(key), int):
            raise ValueError(f"{path} gives no whole number for {key}: it is not a tuned lens's config.")
    if not isinstance(config.get("bias", True), bool):
        raise ValueError(f"{path}'s bias must be true or false.")
    return config


def read_lens(folder, subject: Subject) -> TunedLens:
    """The tuned lens in ``folder`` (tuned-lens 0.2.0's format) for ``subject``, every file bounded and
    every tensor checked before use; ``ValueError`` with one sentence for anything else."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder: a tuned lens is a folder with {CONFIG} and {PARAMS}.")
    layers, width = subject.stack.layers, _width(subject)
    _sized(folder / CONFIG, limits.MAX_LENS_CONFIG_BYTES, "a tuned lens's config")
    config = _config(folder / CONFIG)
    _fits(folder, config["num_hidden_layers"], config["d_model"], subject)
    _sized(folder / PARAMS, limits.max_lens_bytes(layers, width), f"a tuned lens for {layers} layers of width {width}")
    try:
        state = torch.load(folder / PARAMS, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a file that is not tensors alone: refused, whatever the unpickler says
        raise ValueError(f"{folder / PARAMS} cannot be read as tensors alone (torch.load with weights_only=True): "
                         f"{str(e).splitlines()[0][:200]}") from None
    bias = config.get("bias", True)
    want = {f"{i}.weight": (width, width) for i in range(layers)}
    want.update({f"{i}.bias": (width,) for i in range(layers)} if bias else {})
    if not isinstance(state, dict) or set(state) != set(want):
        keys = sorted(state)[:4] if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{folder / PARAMS} does not hold one translator per layer for {layers} layers "
                         f"(\"0.weight\" … \"{layers - 1}.weight\"{' and biases' if bias else ''}); it holds {keys}.")
    for key, shape in want.items():
        t = state[key]
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or tuple(t.shape) != shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{folder / PARAMS}'s {key} must be a float tensor of shape {shape} for width {width}; "
                             f"it is {got}.")
        if not torch.isfinite(t).all():
            raise ValueError(f"{folder / PARAMS}'s {key} holds a value that is not finite.")
    weight = torch.stack([state[f"{i}.weight"].float() for i in range(layers)])  # (layers, E, E)
    b = torch.stack([state[f"{i}.bias"].float() for i in range(layers)]) if bias else None  # (layers, E)
    lens = TunedLens(weight, b, config, folder)
    if config.get("unembed_hash") and config["unembed_hash"] != unembed_hash(subject.stack.unembedding().w_u):
        lens.notes.append("The lens's unembed_hash is not this model's: it was tuned with another unembedding "
                          "(tuned-lens warns of it too).")
    return lens


def streams(subject: Subject, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(the stream into every layer (layers, N, E), the final stream (N, E)) over the tokens of
    ``sequences``, in order, up to ``LENS_TRAIN_TOKENS`` tokens and half the memory budget."""
    stack = subject.stack
    E, n = _width(subject), stack.layers
    most = min(limits.LENS_TRAIN_TOKENS, max(1, limits.memory_budget_bytes() // 2 // ((n + 1) * E * 4)))
    into, final, held = [], [], 0
    for ids in sequences:
        if held >= most:
            break
        ids = ids[:most - held]
        trace = stack.run(torch.tensor([ids]))
        into.append(torch.stack([r[0] for r in trace.resid_pre]))  # (layers, L, E)
        final.append(trace.resid_final[0])  # (L, E)
        held += len(ids)
    if not held:
        raise ValueError("The corpus is empty: give texts (or token ids) to train the lens on.")
    return torch.cat(into, 1), torch.cat(final)


def _kl(u, h: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """(B,) KL(p ‖ q) per token: q the lens's distribution at translated streams ``h`` (B, E), p the model's
    own, its log ``own`` (B, V)."""
    logq = torch.log_softmax(unembed(u, h, u.scale(h)), -1)  # (B, V)
    return (own.exp() * (own - logq)).sum(-1)


def _batch(subject: Subject, tokens: int) -> int:
    """Tokens per step: ``LENS_BATCH_TOKENS``, fewer where a layer's logits and their gradients (about
    8 vectors of the vocabulary a token) would pass half the memory budget."""
    V = int(subject.stack.unembedding().w_u.shape[0])
    return max(1, min(tokens, limits.LENS_BATCH_TOKENS, limits.memory_budget_bytes() // 2 // (8 * 4 * V)))


def _own(u, final: torch.Tensor) -> torch.Tensor:
    """(B, V) the model's own log-probabilities from its final streams (B, E)."""
    with torch.no_grad():
        return torch.log_softmax(unembed(u, final, u.scale(final)), -1)


def mean_kl(lens: TunedLens | None, subject: Subject, into: torch.Tensor, final: torch.Tensor) -> list[float]:
    """Each layer's mean KL(p ‖ q_ℓ) over the tokens of ``into`` (layers, N, E), ``final`` (N, E): the
    tuned ``lens``'s, or the logit lens's (None)."""
    u, n, N = subject.stack.unembedding(), into.shape[0], into.shape[1]
    B, total = _batch(subject, N), torch.zeros(n, dtype=torch.float64)
    with torch.no_grad():
        for i0 in range(0, N, B):
            own = _own(u, final[i0:i0 + B])  # (B, V)
            for layer in range(n):
                h = into[layer, i0:i0 + B]  # (B, E)
                total[layer] += _kl(u, h if lens is None else lens.translate(h, layer), own).double().sum()
    return (total / N).tolist()


def fit(subject: Subject, sequences: list[list[int]], *, steps: int, seed: int = 0,
        progress: Callable[[float], None] | None = None) -> TunedLens:
    """A tuned lens for ``subject`` trained on ``sequences`` (token ids) for ``steps`` steps (see the module doc)."""
    lo, hi = limits.LENS_STEPS
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not lo <= steps <= hi:
        raise ValueError(f"steps must be a whole number from {lo} to {hi}; got {steps!r}.")
    t0 = time.perf_counter()
    u = subject.stack.unembedding()
    into, final = streams(subject, sequences)  # (layers, N, E), (N, E)
    n, N, E = into.shape
    g = torch.Generator().manual_seed(int(seed))
    A = torch.zeros(n, E, E, requires_grad=True)  # (layers, E, E)
    b = torch.zeros(n, E, requires_grad=True)  # (layers, E)
    opt = torch.optim.AdamW([A, b], lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    B = _batch(subject, N)
    for step in range(int(steps)):
        rows = torch.randperm(N, generator=g)[:B]
        own = _own(u, final[rows])  # (B, V)
        opt.zero_grad()
        for layer in range(n):  # a layer's loss and gradient at a time: its own translator's
            h = into[layer, rows]  # (B, E)
            _kl(u, h + h @ A[layer].T + b[layer], own).mean().backward()
        opt.step()
        if progress is not None:
            progress((step + 1) / steps)
    lens = TunedLens(A.detach(), b.detach(), config_for(subject))
    lens.fit = {"steps": int(steps), "seed": int(seed), "tokens": N, "batch": B, "seconds": time.perf_counter() - t0,
                "kl_logit_lens": mean_kl(None, subject, into, final),
                "kl_tuned_lens": mean_kl(lens, subject, into, final)}
    return lens
