"""A BERT-family encoder run with attnviz's own attention.

Every layer is computed with ``attnviz.MultiHeadAttention`` holding the checkpoint's
Q/K/V/O weights, so the step-by-step, verify and shapes views apply to it:

    X0 = LayerNorm(word[ids] + position[0..L) + token_type[0])
    per layer: A = MHA(X) ; X = LayerNorm(X + A) ; X = LayerNorm(X + W2·GELU(W1·X))

Its tokens are WordPiece, from the checkpoint's own ``tokenizer.json``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from attnviz import limits
from attnviz.core.multihead import MultiHeadAttention, MultiHeadSteps
from attnviz.i18n import N_, _
from attnviz.inputs.record import Input
from attnviz.inputs.text import pad_tokens
from attnviz.models.base import ModelError, ModelRun

MAX_WORDPIECES = 512  # BERT's position table
# Marked for translation; translated where it is raised.
SUPPORTED = N_("attnviz runs BERT-family encoders: config.json with model_type \"bert\" (or architectures "
             "naming a Bert model), absolute position embeddings and GELU activations")

@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @classmethod
    def read(cls, path: Path) -> BertConfig:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ModelError(f"Cannot read {path}: {e}.") from None
        kind = str(raw.get("model_type", ""))
        archs = " ".join(map(str, raw.get("architectures") or []))
        if kind != "bert" and "Bert" not in archs:
            raise ModelError(_(SUPPORTED) + "; " + _("{path} has model_type {kind}.").format(
                path=path, kind=repr(kind)))
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ModelError(f"{SUPPORTED}; {path} has position_embedding_type "
                             f"{raw.get('position_embedding_type')!r}.")
        if raw.get("hidden_act", "gelu") != "gelu":
            raise ModelError(f"{SUPPORTED}; {path} has hidden_act {raw.get('hidden_act')!r}.")
        try:
            cfg = cls(int(raw["vocab_size"]), int(raw["hidden_size"]), int(raw["num_hidden_layers"]),
                      int(raw["num_attention_heads"]), int(raw["intermediate_size"]),
                      int(raw.get("max_position_embeddings", 512)), int(raw.get("type_vocab_size", 2)),
                      float(raw.get("layer_norm_eps", 1e-12)))
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"{path} lacks a usable {e} for a BERT encoder.") from None
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ModelError(f"{path}: {cfg.num_attention_heads} heads do not divide width {cfg.hidden_size}.")
        return cfg


class BertLayer(nn.Module):
    """Attention (attnviz's), residual, LayerNorm, feed-forward (GELU), residual, LayerNorm."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        E = cfg.hidden_size
        self.attention = MultiHeadAttention(E, cfg.num_attention_heads)
        self.ln1 = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.ffn_in = nn.Linear(E, cfg.intermediate_size)
        self.ffn_out = nn.Linear(cfg.intermediate_size, E)
        self.ln2 = nn.LayerNorm(E, eps=cfg.layer_norm_eps)

    def after_attention(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x + attended)  # (N, L, E)
        return self.ln2(h + self.ffn_out(F.gelu(self.ffn_in(h))))  # (N, L, E)


class BertEncoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        E = cfg.hidden_size
        self.word = nn.Embedding(cfg.vocab_size, E)
        self.position = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type = nn.Embedding(cfg.type_vocab_size, E)
        self.ln = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        L = ids.shape[1]
        pos = torch.arange(L, device=ids.device)
        return self.ln(self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids)))  # (N, L, E)

    @torch.no_grad()
    def run(self, ids: torch.Tensor, mask: torch.Tensor, keep: int) -> EncoderRun:
        """Every layer's weights, and layer ``keep``'s input and every intermediate.

        ``mask``: bool (N, 1, 1, S), True for real tokens (padding blocked as keys).
        """
        x = self.embed(ids)  # (N, L, E)
        weights, inputs, kept = [], [], None
        for i, layer in enumerate(self.layers):
            inputs.append(x)
            if i == keep:
                kept = layer.attention.steps(x, attn_mask=mask)
                attended, w = kept.output, kept.weights
            else:
                attended, w = layer.attention(x, attn_mask=mask)  # (N, L, E), (N, H, L, S)
            weights.append(w)
            x = layer.after_attention(x, attended)
        return EncoderRun(torch.stack(weights), inputs[keep], kept, x)  # (layers, N, H, L, S)


@dataclass
class EncoderRun:
    layer_weights: torch.Tensor  # (layers, N, H, L, S)
    layer_input: torch.Tensor  # the chosen layer's input X (N, L, E)
    steps: MultiHeadSteps  # the chosen layer's every intermediate
    last_hidden: torch.Tensor  # (N, L, E)


_STATE_PREFIXES = ("bert.", "")


def _tensor(state: dict, name: str) -> torch.Tensor:
    for prefix in _STATE_PREFIXES:
        if prefix + name in state:
            return state[prefix + name]
    raise ModelError(f"model.safetensors has no {name!r}: {SUPPORTED}.")


def _load_weights(enc: BertEncoder, state: dict) -> None:
    t = lambda name: _tensor(state, name).to(torch.float32)  # noqa: E731
    with torch.no_grad():
        enc.word.weight.copy_(t("embeddings.word_embeddings.weight"))
        enc.position.weight.copy_(t("embeddings.position_embeddings.weight"))
        enc.token_type.weight.copy_(t("embeddings.token_type_embeddings.weight"))
        enc.ln.weight.copy_(t("embeddings.LayerNorm.weight"))
        enc.ln.bias.copy_(t("embeddings.LayerNorm.bias"))
        for i, layer in enumerate(enc.layers):
            p = f"encoder.layer.{i}."
            a = layer.attention
            a.in_proj_weight.copy_(torch.cat([t(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]))
            a.in_proj_bias.copy_(torch.cat([t(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]))
            a.out_proj.weight.copy_(t(p + "attention.output.dense.weight"))
            a.out_proj.bias.copy_(t(p + "attention.output.dense.bias"))
            layer.ln1.weight.copy_(t(p + "attention.output.LayerNorm.weight"))
            layer.ln1.bias.copy_(t(p + "attention.output.LayerNorm.bias"))
            layer.ffn_in.weight.copy_(t(p + "intermediate.dense.weight"))
            layer.ffn_in.bias.copy_(t(p + "intermediate.dense.bias"))
            layer.ffn_out.weight.copy_(t(p + "output.dense.weight"))
            layer.ffn_out.bias.copy_(t(p + "output.dense.bias"))
            layer.ln2.weight.copy_(t(p + "output.LayerNorm.weight"))
            layer.ln2.bias.copy_(t(p + "output.LayerNorm.bias"))


@dataclass
class BertModel:
    """A loaded encoder behind the model seam (``attnviz.models.base.Model``)."""

    name: str
    folder: Path
    cfg: BertConfig
    encoder: BertEncoder
    tokenizer: object  # tokenizers.Tokenizer
    honours_masks = False  # trained with padding masks only: the run blocks padding alone

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> BertModel:
        """Read config.json, model.safetensors and tokenizer.json (already verified)."""
        try:
            from safetensors.torch import load_file
            from tokenizers import Tokenizer
        except ImportError as e:  # pragma: no cover - both are in requirements.txt
            raise ModelError(f"Loading {name} needs the {e.name} package: pip install {e.name}.") from None
        cfg = BertConfig.read(folder / "config.json")
        enc = BertEncoder(cfg)
        try:
            _load_weights(enc, load_file(str(folder / "model.safetensors")))
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except ModelError:
            raise
        except Exception as e:  # noqa: BLE001 - a corrupt or foreign file: say which model
            raise ModelError(f"Cannot load {name} from {folder}: {type(e).__name__}: {e}.") from None
        tok.no_padding()
        tok.no_truncation()
        enc.eval()
        return cls(name, folder, cfg, enc, tok)

    @property
    def heads(self) -> int:
        return self.cfg.num_attention_heads

    @property
    def width(self) -> int:
        return self.cfg.hidden_size

    @property
    def layers(self) -> int:
        return self.cfg.num_hidden_layers

    def encode(self, lines: list[str]) -> tuple[list[list[str]], list[list[int]]]:
        """WordPiece tokens ([CLS] … [SEP]) and ids per line; ``ModelError`` past 512."""
        tokens, ids = [], []
        most = min(MAX_WORDPIECES, self.cfg.max_position_embeddings)
        for i, line in enumerate(lines):
            enc = self.tokenizer.encode(line)
            if len(enc.ids) > most:
                msg = (_("Line {line} has {n} WordPiece tokens; {model} reads at most {most} ([CLS] and [SEP] "
                         "included). Shorten the text.") if len(lines) > 1 else
                       _("The text has {n} WordPiece tokens; {model} reads at most {most} ([CLS] and [SEP] "
                         "included). Shorten the text."))
                raise ModelError(msg.format(line=i + 1, n=len(enc.ids), model=self.name, most=most))
            tokens.append(list(enc.tokens))
            ids.append(list(enc.ids))
        return tokens, ids

    def read_text(self, lines: list[str], *, pad_to: int, tokenize_mode: str = "", positional: bool = True,
                  max_tokens: int = limits.MAX_TOKENS, kind: str = "text") -> Input:
        """The model's own tokens and ids ([PAD] = id 0); the run's tokenizer settings do not apply."""
        tokens, ids = self.encode(lines)
        lengths = [len(t) for t in tokens]
        L = max(max(lengths), min(pad_to, limits.MAX_TOKENS))
        if L > self.cfg.max_position_embeddings:
            raise ValueError(f"pad_to {pad_to} is past {self.name}'s {self.cfg.max_position_embeddings} positions.")
        id_tensor = torch.zeros(len(lines), L, dtype=torch.long)  # (N, L)
        for n, row in enumerate(ids):
            id_tensor[n, : len(row)] = torch.tensor(row)
        return Input(kind, pad_tokens(tokens, L), lengths, None, id_tensor)

    def plan(self, N: int, L: int, S: int) -> str:
        """Every step of one layer, plus every layer's weights, or a message naming what fits."""
        size = limits.RunSize(N, self.heads, L, S, self.width)
        total = size.bytes + (self.layers - 1) * size.lean_bytes
        budget = limits.memory_budget_bytes()
        if total > budget:
            fits = limits.longest_that_fits(N, self.heads * self.layers, self.width, budget)
            raise ValueError(f"This run would hold about {total / 2**20:,.0f} MB ({self.layers} layers × {N} × "
                             f"{self.heads} heads × {L} × {S}), over this server's budget of {budget / 2**20:,.0f} "
                             f"MB. Use fewer lines or a shorter text: about {fits} WordPiece tokens fit with {N} "
                             f"line(s).")
        return "full"

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool = False, dropout: float = 0.0, layer: int = 0) -> ModelRun:
        if source is not None:
            raise ValueError("Cross-attention runs on the random model: a BERT encoder attends within one text.")
        if not 0 <= layer < self.layers:
            raise ValueError(f"Layer {layer} does not exist: {self.name} has {self.layers} layers "
                             f"(0–{self.layers - 1}).")
        # Shared by every session on the CPU (read-only); a device gets its own copy.
        encoder = self.encoder if device.type == "cpu" else copy.deepcopy(self.encoder).to(device)
        run = encoder.run(inp.ids.to(device), mask.to(device), keep=layer)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return ModelRun(run.steps, self.encoder.layers[layer].attention, run.layer_input.cpu(),
                        run.layer_weights.cpu(), run.last_hidden.cpu())
