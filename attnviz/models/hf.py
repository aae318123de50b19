"""Any Hugging Face model in a local folder, run by ``transformers`` with eager attention.

``HFModel.from_folder`` reads ``config.json`` first and refuses, before any weight is
loaded, a folder over the model-size bound (the weight files' bytes against
``limits.max_model_bytes()``) or of a kind this seam does not run yet. The weights are then
loaded with ``attn_implementation="eager"`` (the kernels that never form the weights cannot
return them) and every forward pass asks for ``output_attentions=True``: the run keeps every
layer's weights (N, H, L, S), and the followed layer's as its steps. Tokens come from the
folder's own tokenizer. Decoders (GPT-2, LLaMA with grouped-query attention) and encoders
(BERT, RoBERTa) run; a LLaMA-style model's note says which query heads share a key/value
head. Nothing is ever downloaded: ``local_files_only=True``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnviz import limits
from attnviz.core.attention import AttentionSteps
from attnviz.core.multihead import MultiHeadSteps
from attnviz.inputs.record import Input
from attnviz.models.base import ModelError, ModelRun

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
ENCODER_DECODERS = ("t5", "mt5", "bart", "mbart", "marian", "pegasus")
VISION = ("vit", "deit", "beit", "swin", "dinov2")


def read_config(folder: Path) -> dict:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelError(f"{folder} is not a model folder: its config.json cannot be read ({e}).") from None


def weight_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def check_folder(folder: Path) -> dict:
    """The config of a folder this seam can run; ``ModelError`` (which and why) otherwise —
    all before any weight is read."""
    cfg = read_config(folder)
    kind = str(cfg.get("model_type", "?"))
    if kind in ENCODER_DECODERS or cfg.get("is_encoder_decoder"):
        raise ModelError(f"{folder.name} is an encoder–decoder ({kind}): its encoder, decoder and cross attention "
                         f"are not shown by attnviz yet.")
    if kind in VISION:
        raise ModelError(f"{folder.name} is a vision model ({kind}): it reads images, not text.")
    size, most = weight_bytes(folder), limits.max_model_bytes()
    if size > most:
        raise ModelError(f"{folder.name} has {size / 2**20:,.0f} MB of weights, over this server's bound of "
                         f"{most / 2**20:,.0f} MB (ATTNVIZ_MAX_MODEL_MB); it was not loaded.")
    if not (folder / "tokenizer.json").is_file() and not (folder / "tokenizer_config.json").is_file():
        raise ModelError(f"{folder.name} has no tokenizer (tokenizer.json): attnviz reads text with the model's own.")
    return cfg


def config_int(cfg: dict, *names: str) -> int:
    for n in names:
        if isinstance(cfg.get(n), int):
            return int(cfg[n])
    raise ModelError(f"config.json has none of {', '.join(names)}.")


@dataclass
class HFModel:
    name: str
    folder: Path
    model: object  # a transformers PreTrainedModel, eval mode, eager attention
    tokenizer: object
    heads: int
    width: int
    layers: int
    causal: bool
    kv_heads: int
    notes: list[str] = field(default_factory=list)
    honours_masks = False  # it was trained with its own masks: the run blocks padding only

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> HFModel:
        cfg = check_folder(folder)
        try:
            from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise ModelError("Running this model needs the transformers package: pip install transformers.") from None
        archs = " ".join(map(str, cfg.get("architectures") or []))
        causal = "CausalLM" in archs or "LMHead" in archs or bool(cfg.get("is_decoder"))
        loader = AutoModelForCausalLM if causal else AutoModel
        try:
            model = loader.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (ValueError, OSError, KeyError) as e:
            raise ModelError(f"{folder.name} cannot be run with its attention weights: {str(e)[:300]}") from None
        model.eval()
        heads = config_int(cfg, "num_attention_heads", "n_head", "num_heads")
        kv = cfg.get("num_key_value_heads") or heads
        notes = []
        if kv != heads:
            per = heads // kv
            groups = "; ".join(f"query heads {g * per}–{g * per + per - 1} share key/value head {g}" for g in range(kv))
            notes.append(f"{name} uses grouped-query attention: {heads} query heads, {kv} key/value heads ({groups}).")
        return cls(name, folder, model, tokenizer, heads, config_int(cfg, "hidden_size", "n_embd", "d_model"),
                   config_int(cfg, "num_hidden_layers", "n_layer", "num_layers"), causal, int(kv), notes)

    def read_text(self, lines: list[str], *, pad_to: int = 0, tokenize_mode: str = "", positional: bool = True,
                  max_tokens: int = limits.MAX_TOKENS, kind: str = "text") -> Input:
        """The model's own tokens and ids, padded on the right with its pad token (or 0)."""
        rows = [self.tokenizer(line, add_special_tokens=True)["input_ids"] for line in lines]
        most = min(max_tokens, int(getattr(self.model.config, "max_position_embeddings", None)
                                   or getattr(self.model.config, "n_positions", max_tokens)))
        for i, row in enumerate(rows):
            if len(row) > most:
                raise ValueError(f"Line {i + 1} has {len(row)} tokens; {self.name} reads at most {most}.")
        lengths = [len(r) for r in rows]
        L = max(max(lengths), min(pad_to, most))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(rows), L), pad, dtype=torch.long)  # (N, L)
        for n, row in enumerate(rows):
            ids[n, : len(row)] = torch.tensor(row)
        tokens = [self.tokenizer.convert_ids_to_tokens(r) + ["[PAD]"] * (L - len(r)) for r in rows]
        return Input(kind, tokens, lengths, None, ids, notes=list(self.notes))

    def plan(self, N: int, L: int, S: int) -> str:
        """Every layer's weights are kept (nothing else): over the budget, a message."""
        need = self.layers * limits.RunSize(N, self.heads, L, S, self.width).lean_bytes
        budget = limits.memory_budget_bytes()
        if need > budget:
            raise ValueError(f"{self.name}'s {self.layers} layers × {N} × {self.heads} heads × {L} × {S} weights "
                             f"would take about {need / 2**20:,.0f} MB, over this server's budget of "
                             f"{budget / 2**20:,.0f} MB. Use a shorter text or fewer lines.")
        return "full"

    def attentions(self, ids: torch.Tensor, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every layer's weights (layers, N, H, L, S) and the logits (N, L, V) or None."""
        mask = (torch.arange(ids.shape[1])[None, :] < torch.tensor(lengths)[:, None]).long()  # (N, L)
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=mask, output_attentions=True)
        if not out.attentions or out.attentions[0] is None:
            raise ModelError(f"{self.name} returned no attention weights (its attention cannot return them).")
        return torch.stack([a.float() for a in out.attentions]), getattr(out, "logits", None)

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool = True, dropout: float = 0.0, layer: int = 0) -> ModelRun:
        if source is not None:
            raise ValueError(f"Cross-attention runs on the random model: {self.name} attends within one text.")
        if not 0 <= layer < self.layers:
            raise ValueError(f"Layer {layer} does not exist: {self.name} has {self.layers} layers "
                             f"(0–{self.layers - 1}).")
        weights, _logits = self.attentions(inp.ids, inp.lengths)  # (layers, N, H, L, S)
        w = weights[layer]  # (N, H, L, S)
        N, H, L, S = w.shape
        empty = torch.zeros(N, H, L, 0)
        steps = MultiHeadSteps(empty, torch.zeros(N, H, S, 0), torch.zeros(N, H, S, 0),
                               AttentionSteps(None, None, None, w, w, empty, 1.0, None),
                               torch.zeros(N, L, 0), torch.zeros(N, L, 0))
        return ModelRun(steps, None, torch.zeros(N, L, 0), weights)

    def next_tokens(self, ids: list[int], k: int = 10) -> list[tuple[str, float]]:
        """A causal LM's top-k next tokens after ``ids``, with their probabilities."""
        if not self.causal:
            raise ValueError(f"{self.name} is not a causal language model: it predicts no next token.")
        _w, logits = self.attentions(torch.tensor([ids]), [len(ids)])
        p = torch.softmax(logits[0, -1].float(), -1)  # (V,)
        top = torch.topk(p, min(k, p.numel()))
        return [(self.tokenizer.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(top.values, top.indices,
                                                                                          strict=True)]
