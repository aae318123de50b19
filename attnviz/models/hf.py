"""Any Hugging Face model in a local folder, run by ``transformers`` with eager attention.

``HFModel.from_folder`` reads ``config.json`` first and refuses, before any weight is
loaded, a folder over the model-size bound (the weight files' bytes against
``limits.max_model_bytes()``) or of a kind this seam does not run yet. The weights are then
loaded with ``attn_implementation="eager"`` (the kernels that never form the weights cannot
return them) and every forward pass asks for ``output_attentions=True``: the run keeps every
layer's weights (N, H, L, S), and the followed layer's as its steps. Tokens come from the
folder's own tokenizer. Decoders (GPT-2, LLaMA with grouped-query attention) and encoders
(BERT, RoBERTa) run; a LLaMA-style model's note says which query heads share a key/value
head. An encoder–decoder (T5, BART) runs both stacks at once and the run shows the one
``AttentionConfig.stack`` names: the encoder's self-attention, the decoder's (causal)
self-attention, or the decoder's cross-attention over the encoder (``read_pair``). A vision
transformer (ViT) reads an image through the folder's own image processor, its patches as
tokens (``attnviz.models.vision``). Nothing is ever downloaded: ``local_files_only=True``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnviz import limits
from attnviz.core.attention import AttentionSteps
from attnviz.core.multihead import MultiHeadSteps
from attnviz.core.nexttoken import top_tokens
from attnviz.inputs.record import Input
from attnviz.models import hooks
from attnviz.models.base import ModelError, ModelRun

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
ENCODER_DECODERS = ("t5", "mt5", "bart", "mbart", "marian", "pegasus")
VISION = ("vit", "deit", "dinov2")
# Two towers (a picture's and a text's, compared), not a picture's patches entering a language model as tokens.
TWO_TOWERS = ("clip", "siglip", "siglip2", "blip", "align", "chinese_clip", "owlvit", "owlv2", "x_clip", "groupvit")
STACKS = ("encoder", "decoder", "cross")  # an encoder–decoder's three kinds of attention


def kind_of(cfg: dict) -> str:
    """"seq2seq", "vision", "vlm" (a vision-language model: a vision tower and a language model in one folder),
    "causal" or "encoder", from config.json alone."""
    kind = str(cfg.get("model_type", "?"))
    if "vision_config" in cfg and "text_config" in cfg and kind not in TWO_TOWERS:
        return "vlm"
    if kind in ENCODER_DECODERS or cfg.get("is_encoder_decoder"):
        return "seq2seq"
    if kind in VISION:
        return "vision"
    archs = " ".join(map(str, cfg.get("architectures") or []))
    return "causal" if "CausalLM" in archs or "LMHead" in archs or cfg.get("is_decoder") else "encoder"


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
    if kind in ("beit", "swin", "clip", "siglip"):
        raise ModelError(f"{folder.name} is a {kind} model: its attention is not one weight matrix over its patches "
                         f"(relative or shifted windows, or two towers); attnviz runs ViT, DeiT and DINOv2.")
    if kind_of(cfg) == "vlm":
        raise ModelError(f"{folder.name} is a vision-language model ({kind}): its attention from text to a picture is "
                         "read on the vision-language page (attnviz.vl_attention).")
    size, most = weight_bytes(folder), limits.max_model_bytes()
    if size > most:
        raise ModelError(f"{folder.name} has {size / 2**20:,.0f} MB of weights, over this server's bound of "
                         f"{most / 2**20:,.0f} MB (ATTNVIZ_MAX_MODEL_MB); it was not loaded.")
    if kind_of(cfg) == "vision":
        if not (folder / "preprocessor_config.json").is_file():
            raise ModelError(f"{folder.name} has no preprocessor_config.json: attnviz reads images with the model's "
                             f"own image processor.")
    elif not (folder / "tokenizer.json").is_file() and not (folder / "tokenizer_config.json").is_file():
        raise ModelError(f"{folder.name} has no tokenizer (tokenizer.json): attnviz reads text with the model's own.")
    return cfg


# Hugging Face configs name the same numbers differently (GPT-2, BERT/LLaMA, T5, BART): the first present counts.
HEADS_KEYS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model")
LAYERS_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers")


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
    tokenizer: object  # its tokenizer, or a vision model's image processor
    heads: int
    width: int
    layers: int
    kind: str  # kind_of(config): "causal", "encoder", "seq2seq" or "vision"
    kv_heads: int
    notes: list[str] = field(default_factory=list)
    stack_layers: dict[str, int] = field(default_factory=dict)  # an encoder–decoder's layers per stack
    bytes: int = 0  # its weight files' size, counted against the loaded-models bound
    honours_masks = False  # it was trained with its own masks: the run shows that mask, not the sidebar's

    @property
    def causal(self) -> bool:
        return self.kind == "causal"

    @property
    def seq2seq(self) -> bool:
        return self.kind == "seq2seq"

    @classmethod
    def from_folder(cls, name: str, folder: Path, phase=lambda what: None) -> HFModel:
        """Load the folder (checked first, before any weight); ``phase(words)`` is told
        what is happening, for a progress display."""
        phase("config")
        cfg = check_folder(folder)
        try:
            import transformers as T
        except ImportError:
            raise ModelError("Running this model needs the transformers package: pip install transformers.") from None
        kind = kind_of(cfg)
        # Its progress bars and load reports would go to the server's log or the CLI's stderr.
        T.utils.logging.disable_progress_bar()
        T.utils.logging.set_verbosity_error()
        loader = {"causal": T.AutoModelForCausalLM, "seq2seq": T.AutoModelForSeq2SeqLM}.get(kind, T.AutoModel)
        try:
            phase("weights")
            model = loader.from_pretrained(str(folder), attn_implementation="eager", local_files_only=True)
            phase("tokenizer")
            if kind == "vision":
                # The PIL backend: torchvision is not a dependency.
                tokenizer = T.AutoImageProcessor.from_pretrained(str(folder), local_files_only=True, backend="pil")
            else:
                tokenizer = T.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - a broken or foreign folder: say which, never a traceback
            raise ModelError(f"{folder.name} cannot be run with its attention weights: "
                             f"{type(e).__name__}: {str(e)[:300]}") from None
        model.eval()
        heads = config_int(cfg, *HEADS_KEYS)
        kv = cfg.get("num_key_value_heads") or heads
        notes = []
        if kv != heads:
            per = heads // kv
            groups = "; ".join(f"query heads {g * per}–{g * per + per - 1} share key/value head {g}" for g in range(kv))
            notes.append(f"{name} uses grouped-query attention: {heads} query heads, {kv} key/value heads ({groups}).")
        layers = config_int(cfg, *LAYERS_KEYS)
        stacks = {}
        if kind == "seq2seq":
            dec = int(cfg.get("num_decoder_layers") or cfg.get("decoder_layers") or layers)
            stacks = {"encoder": layers, "decoder": dec, "cross": dec}
            if cfg.get("decoder_attention_heads", heads) != heads:
                raise ModelError(f"{folder.name}'s encoder and decoder have different head counts: not shown yet.")
        return cls(name, folder, model, tokenizer, heads, config_int(cfg, *WIDTH_KEYS),
                   layers, kind, int(kv), notes, stacks, weight_bytes(folder))

    def own_mask(self, inp: Input) -> str:
        """The mask it was trained with, for this input: what the run blocks and names."""
        if self.causal or (self.seq2seq and inp.meta.get("stack") == "decoder"):
            return "causal"
        return "padding"

    def read_text(self, lines: list[str], *, pad_to: int = 0, tokenize_mode: str = "", positional: bool = True,
                  max_tokens: int = limits.MAX_TOKENS, kind: str = "text", start: list[int] = ()) -> Input:
        """The model's own tokens and ids, padded on the right with its pad token (or 0).
        ``start``: ids put before each line's (a decoder's start token)."""
        if self.kind == "vision":
            raise ValueError(f"{self.name} is a vision model: it reads images. Open the Image patches page.")
        rows = [list(start) + self.tokenizer(line, add_special_tokens=True)["input_ids"] for line in lines]
        cfg = self.model.config
        most = min(max_tokens, int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
                                   or max_tokens))
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

    def read_pair(self, lines: list[str], source: list[str] | None, stack: str, **read) -> tuple[Input, Input | None]:
        """An encoder–decoder's (queries, keys) inputs for ``stack``. The encoder reads the
        source (or, without one, the text); the decoder reads the text after its start
        token, as in training with teacher forcing. Both carry the pair, for ``forward``."""
        if stack not in STACKS:
            raise ValueError(f"stack must be one of {', '.join(STACKS)}, got {stack!r}.")
        enc = self.read_text(source or lines, kind="text" if stack == "encoder" else "source text", **read)
        start = getattr(self.model.config, "decoder_start_token_id", None)
        dec = self.read_text(lines, start=[start] if start is not None else [], **read)
        for inp in (enc, dec):
            inp.meta.update(pair=(enc, dec), stack=stack)
        notes = [f"{self.name} is an encoder–decoder: showing its {stack} attention "
                 + {"encoder": "(the encoder's tokens over themselves).",
                    "decoder": "(the decoder's tokens over the ones before them).",
                    "cross": "(each decoder token over the encoder's tokens)."}[stack]]
        enc.notes, dec.notes = enc.notes + notes, dec.notes + notes
        return {"encoder": (enc, None), "decoder": (dec, None), "cross": (dec, enc)}[stack]

    def plan(self, N: int, L: int, S: int) -> str:
        """Every layer's weights are kept (nothing else): over the budget, a message. An
        encoder–decoder forms all three stacks, so each is counted at the longer side."""
        side = max(L, S)
        need = (self.layers * limits.RunSize(N, self.heads, L, S, self.width).lean_bytes if not self.seq2seq else
                3 * max(self.stack_layers.values()) * limits.RunSize(N, self.heads, side, side, self.width).lean_bytes)
        budget = limits.memory_budget_bytes()
        if need > budget:
            raise ValueError(f"{self.name}'s {self.layers} layers × {N} × {self.heads} heads × {L} × {S} weights "
                             f"would take about {need / 2**20:,.0f} MB, over this server's budget of "
                             f"{budget / 2**20:,.0f} MB. Use a shorter text or fewer lines.")
        return "full"

    def _weights(self, out, name: str = "attentions") -> torch.Tensor:
        got = getattr(out, name, None)
        if not got or got[0] is None:
            raise ModelError(f"{self.name} returned no attention weights (its attention cannot return them).")
        return torch.stack([a.float() for a in got])  # (layers, N, H, L, S)

    def attentions(self, ids: torch.Tensor, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every layer's weights (layers, N, H, L, S) and the logits (N, L, V) or None."""
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=_key_mask(ids, lengths), output_attentions=True)
        return self._weights(out), getattr(out, "logits", None)

    def stack(self, enc: Input, dec: Input, which: str) -> torch.Tensor:
        """An encoder–decoder's ``which`` stack (encoder, decoder or cross), every layer
        (layers, N, H, L, S), from one forward pass (the other two are not stacked)."""
        with torch.no_grad():
            out = self.model(input_ids=enc.ids, attention_mask=_key_mask(enc.ids, enc.lengths),
                             decoder_input_ids=dec.ids, decoder_attention_mask=_key_mask(dec.ids, dec.lengths),
                             output_attentions=True)
        return self._weights(out, f"{which}_attentions")

    def forward(self, inp: Input, source: Input | None, mask: torch.Tensor | None, *, device: torch.device,
                lean: bool = True, dropout: float = 0.0, layer: int = 0) -> ModelRun:
        stack = inp.meta.get("stack", "")
        if source is not None and not self.seq2seq:
            raise ValueError(f"{self.name} attends within one text: cross-attention needs an encoder–decoder "
                             f"(T5, BART) or the random model.")
        layers = self.stack_layers.get(stack, self.layers)
        if not 0 <= layer < layers:
            raise ValueError(f"Layer {layer} does not exist: {self.name} has {layers} layers (0–{layers - 1}).")
        logits = None
        watched = self.attention_module(stack, layer)
        with hooks.watch(watched) as seen:
            if self.kind == "vision":
                with torch.no_grad():
                    weights = self._weights(self.model(pixel_values=inp.meta["pixels"], output_attentions=True))
            elif self.seq2seq:
                weights = self.stack(*inp.meta["pair"], stack)
            else:
                weights, logits = self.attentions(inp.ids, inp.lengths)  # (layers, N, H, L, S), (N, L, V)
        w = weights[layer]  # (N, H, L, S)
        N, H, L, S = w.shape
        empty = torch.zeros(N, H, L, 0)
        steps = MultiHeadSteps(empty, torch.zeros(N, H, S, 0), torch.zeros(N, H, S, 0),
                               AttentionSteps(None, None, None, w, w, empty, 1.0, None),
                               torch.zeros(N, L, 0), torch.zeros(N, L, 0))
        # A causal LM's next tokens come from the same pass: each sequence's last real position.
        following = ([self.top_tokens(logits[n, inp.lengths[n] - 1]) for n in range(N)]
                     if self.causal and logits is not None else None)
        parts = hooks.head_parts(watched, seen, w, mask, inp.lengths, (source or inp).lengths)
        if parts is not None and self.causal:
            parts.knock_out = lambda n, heads: self.next_without(inp, stack, layer, n, heads)
            parts.token_name = lambda i: self.tokenizer.convert_ids_to_tokens(int(i))
        return ModelRun(steps, None, torch.zeros(N, L, 0), weights, next_tokens=following, parts=parts)

    # -- the followed layer's projections, watched by hooks (attnviz.models.hooks) -----------
    def attention_module(self, stack: str, layer: int) -> tuple | None:
        """(module, q, k, v, o) of the followed layer, or None where attnviz knows no such module."""
        found = self.__dict__.get("_attention_modules")
        if found is None:  # found once per loaded model (a walk over every module)
            found = self.__dict__.setdefault("_attention_modules", hooks.attention_modules(self.model))
        mods = found.get(stack) if self.seq2seq else next(iter(found.values()), None)
        return mods[layer] if mods and layer < len(mods) else None

    def _inputs(self, inp: Input, n: int, B: int) -> dict:
        """The model's inputs for sequence ``n`` of ``inp``, repeated ``B`` times."""
        rep = lambda t: t[n:n + 1].repeat(B, *([1] * (t.dim() - 1)))  # noqa: E731
        if self.kind == "vision":
            return {"pixel_values": rep(inp.meta["pixels"])}
        if self.seq2seq:
            enc, dec = inp.meta["pair"]
            return {"input_ids": rep(enc.ids), "attention_mask": rep(_key_mask(enc.ids, enc.lengths)),
                    "decoder_input_ids": rep(dec.ids), "decoder_attention_mask": rep(_key_mask(dec.ids, dec.lengths))}
        return {"input_ids": rep(inp.ids), "attention_mask": rep(_key_mask(inp.ids, inp.lengths))}

    def rerun_without(self, inp: Input, stack: str, layer: int, n: int,
                      heads: list[int]) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Sequence ``n`` rerun once per entry of ``heads`` (one batch), row r with head
        ``heads[r]``'s output zeroed before the followed layer's output projection (a forward
        pre-hook; -1 zeroes none). Returns (a causal LM's next-token probabilities after the
        sequence (B, V), or None; the output projection's output (B, L, E))."""
        watched = self.attention_module(stack, layer)
        if watched is None:
            raise ModelError(f"attnviz does not know {self.name}'s attention modules: it cannot knock a head out.")
        out, projected = hooks.rerun_without(self.model, watched[4], self._inputs(inp, n, len(heads)), heads,
                                             self.heads)
        logits = getattr(out, "logits", None)
        probs = (torch.softmax(logits[:, inp.lengths[n] - 1].float(), -1) if self.causal and logits is not None
                 else None)  # (B, V)
        return probs, projected

    def next_without(self, inp: Input, stack: str, layer: int, n: int, heads: list[int]) -> torch.Tensor:
        """``rerun_without``'s next-token probabilities (len(heads), V), in batches whose every
        layer's weights (rows × H × L × L) stay within the memory budget."""
        L = inp.L
        per_row = max(1, self.heads * L * L * 4 * 3)  # the weights and the scores a layer forms, with room
        rows = max(1, min(len(heads), limits.memory_budget_bytes() // per_row))
        return torch.cat([self.rerun_without(inp, stack, layer, n, heads[i:i + rows])[0]
                          for i in range(0, len(heads), rows)])

    def top_tokens(self, logits: torch.Tensor, k: int = 10) -> list[tuple[str, float]]:
        """The k most likely tokens under ``logits`` (V,), with their probabilities."""
        return top_tokens(logits, self.tokenizer.convert_ids_to_tokens, k)

    def next_tokens(self, ids: list[int], k: int = 10) -> list[tuple[str, float]]:
        """A causal LM's top-k next tokens after ``ids``, with their probabilities."""
        if not self.causal:
            raise ValueError(f"{self.name} is not a causal language model: it predicts no next token.")
        _w, logits = self.attentions(torch.tensor([ids]), [len(ids)])
        return self.top_tokens(logits[0, -1], k)


def _key_mask(ids: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """1 for real tokens, 0 for padding: (N, L)."""
    return (torch.arange(ids.shape[1])[None, :] < torch.tensor(lengths)[:, None]).long()
