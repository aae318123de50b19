"""A GGUF file (llama.cpp's format, as Ollama, LM Studio and llama.cpp keep local models) as a model.

Two steps, each checked before the next:

1. ``read_header(path)`` reads the file's header with attnviz's own parser (the format's magic, version,
   key/value pairs and tensor table; GGUF v2 and v3, little-endian) and refuses, before any tensor is read:
   a file that is not GGUF, one cut short (its tensor table reaches past its end), an architecture that
   ``transformers`` cannot de-quantize (named), a vocabulary or context past ``limits.MAX_GGUF_VOCAB`` /
   ``limits.MAX_GGUF_CONTEXT``, and weights whose de-quantized float32 bytes are over the model bound
   (``ATTNVIZ_MAX_MODEL_MB``) or the loaded-models bound (``ATTNVIZ_MAX_LOADED_MB``).
2. ``dequantized_folder(path)`` runs ``transformers``' own GGUF loader once (``from_pretrained(gguf_file=…)``:
   its ``load_gguf_checkpoint`` de-quantizes each tensor with ``gguf``'s ``dequantize`` and undoes llama.cpp's
   rotary permutation of q and k) and keeps the result as a Hugging Face folder (``config.json``,
   ``model.safetensors``, the tokenizer and its chat template) in the model cache
   (``ATTNVIZ_MODEL_CACHE``, default ``~/.cache/attnviz/models``), keyed by the file's path, size and time.
   A restarted server reads that folder in well under a second; the folder is written under a temporary
   name and renamed, so a reader never sees half of it.

The folder then runs as any Hugging Face folder does (``attnviz.models.hf``).

May import: attnviz.core, attnviz.i18n, attnviz.limits (and the models package's own modules).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from attnviz import limits
from attnviz.models.base import ModelError

GGUF_MAGIC = b"GGUF"
GGUF_SUFFIX = ".gguf"
CACHE_ENV = "ATTNVIZ_MODEL_CACHE"
# GGUF's value types (gguf-py's GGUFValueType): struct formats of the fixed-size ones
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# Architectures transformers reads from GGUF that have no attention to show (or too little of it to read as one)
NO_ATTENTION = {"mamba": "a state-space model", "lfm2": "a hybrid of short convolutions and a few attention layers"}
# The header's own size is bounded too: a file that claims 10^12 keys is refused, not parsed.
MAX_HEADER_ITEMS = 2**24


@dataclass(frozen=True)
class GGUFFacts:
    """What a GGUF file's header says, read without any tensor."""

    path: Path
    architecture: str
    name: str
    tensors: int
    numbers: int  # the weights' numbers, all tensors together
    layers: int
    heads: int
    kv_heads: int
    width: int
    vocab: int
    context: int
    chat_template: bool

    @property
    def float32_bytes(self) -> int:
        """The de-quantized weights' bytes: what the model holds in memory once loaded (float32)."""
        return self.numbers * 4


class _Reader:
    """Little-endian reads from an open file, each bounded by the file's size."""

    def __init__(self, f, size: int, name: str):
        self.f, self.size, self.name = f, size, name

    def take(self, n: int) -> bytes:
        if n < 0 or self.f.tell() + n > self.size:
            raise ModelError(f"{self.name} is cut short: its header reaches past the file's end "
                             f"({self.size:,} bytes).")
        return self.f.read(n)

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.unpack("Q")).decode("utf-8", errors="replace")

    def value(self, vtype: int, keep: bool):
        """One value; an array's elements are read (to pass them) but kept only where ``keep`` (its length is)."""
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.unpack("I"), self.unpack("Q")
            if count > MAX_HEADER_ITEMS:
                raise ModelError(f"{self.name}'s header claims an array of {count:,} values: not a GGUF file "
                                 "attnviz reads.")
            if etype in _SCALARS:  # fixed size: skipped in one step
                data = self.take(count * struct.calcsize(_SCALARS[etype]))
                return list(struct.unpack(f"<{count}{_SCALARS[etype]}", data)) if keep else count
            items = [self.value(etype, keep) for _ in range(count)]
            return items if keep else count
        raise ModelError(f"{self.name}'s header has a value of unknown type {vtype}: the file is damaged or "
                         "not GGUF.")


# Keys whose arrays are kept (the others: only their length, the tokenizer's 49k tokens and merges among them)
_KEEP = ("general.", "GGUF.")


def read_header(path: Path) -> GGUFFacts:
    """The facts of the GGUF file at ``path``, from its header alone; ``ModelError`` naming the cause for a file
    that is not GGUF, is cut short, or holds what attnviz cannot load (see the module's doc)."""
    name = path.name
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise ModelError(f"{name} is not a GGUF file: it does not begin with the bytes “GGUF”.")
            r = _Reader(f, size, name)
            version = r.unpack("I")
            if version not in (2, 3):
                raise ModelError(f"{name} is GGUF version {version}; attnviz reads versions 2 and 3.")
            n_tensors, n_kv = r.unpack("Q"), r.unpack("Q")
            if n_tensors > MAX_HEADER_ITEMS or n_kv > MAX_HEADER_ITEMS:
                raise ModelError(f"{name}'s header claims {n_tensors:,} tensors and {n_kv:,} keys: the file is "
                                 "damaged.")
            kv = {}
            for _i in range(n_kv):
                key = r.string()
                kv[key] = r.value(r.unpack("I"), keep=key.startswith(_KEEP) or key == "tokenizer.chat_template")
            table = []
            for _i in range(n_tensors):
                tname, dims = r.string(), r.unpack("I")
                if dims > 8:
                    raise ModelError(f"{name}'s tensor {tname[:40]} has {dims} dimensions: the file is damaged.")
                shape = [r.unpack("Q") for _d in range(dims)]
                table.append((tname, shape, r.unpack("I"), r.unpack("Q")))
            align = int(kv.get("general.alignment", 32)) or 32
            start = -(-f.tell() // align) * align
    except OSError as e:
        raise ModelError(f"{name} cannot be read: {e.strerror or e}.") from None
    return _facts(path, size, kv, table, start)


def _facts(path: Path, size: int, kv: dict, table: list, start: int) -> GGUFFacts:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    name = path.name
    arch = str(kv.get("general.architecture", ""))
    supported = supported_architectures()
    if arch in NO_ATTENTION:
        raise ModelError(f"{name} holds a “{arch}” model, {NO_ATTENTION[arch]}: there are no attention weights to "
                         "show.")
    if arch not in supported:
        raise ModelError(f"{name} holds a “{arch or 'unnamed'}” model, which transformers cannot de-quantize "
                         f"from GGUF (it reads {', '.join(sorted(supported))}).")
    numbers, end = 0, start
    for tname, shape, ttype, offset in table:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
        except (ValueError, KeyError):
            raise ModelError(f"{name}'s tensor {tname[:40]} is of a type ({ttype}) that gguf does not know.") from None
        count = 1
        for d in shape:
            count *= d
        numbers += count
        end = max(end, start + offset + count // block * type_size)
    if end > size:
        raise ModelError(f"{name} is cut short: its tensors need {end:,} bytes and the file has {size:,}.")

    def number(key: str, default: int = 0) -> int:
        v = kv.get(f"{arch}.{key}", default)
        return int(max(v) if isinstance(v, list) else v)  # per-layer lists (head counts of some models)

    vocab = number("vocab_size") or int(kv.get("tokenizer.ggml.tokens", 0) or 0)
    context = number("context_length")
    if vocab > limits.MAX_GGUF_VOCAB:
        raise ModelError(f"{name} has a vocabulary of {vocab:,} tokens, over attnviz's {limits.MAX_GGUF_VOCAB:,}.")
    if context > limits.MAX_GGUF_CONTEXT:
        raise ModelError(f"{name} claims a context of {context:,} tokens, over attnviz's "
                         f"{limits.MAX_GGUF_CONTEXT:,}.")
    heads = number("attention.head_count")
    facts = GGUFFacts(path, arch, str(kv.get("general.name", path.stem)), len(table), numbers,
                      number("block_count"), heads, number("attention.head_count_kv", heads),
                      number("embedding_length"), vocab, context, "tokenizer.chat_template" in kv)
    check_bytes(facts)
    return facts


def check_bytes(facts: GGUFFacts) -> None:
    """The one check of a GGUF model's bytes: its float32 weights against the model bound and the loaded-models
    bound, from the header."""
    size = facts.float32_bytes
    for most, env in ((limits.max_model_bytes(), "ATTNVIZ_MAX_MODEL_MB"), (limits.max_loaded_bytes(),
                                                                          "ATTNVIZ_MAX_LOADED_MB")):
        if size > most:
            raise ModelError(f"{facts.path.name} holds {size / 2**20:,.0f} MB of weights once de-quantized (float32), "
                             f"over this server's bound of {most / 2**20:,.0f} MB ({env}); it was not loaded.")


def supported_architectures() -> frozenset[str]:
    """The GGUF architectures ``transformers`` de-quantizes (its ``GGUF_SUPPORTED_ARCHITECTURES``)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    # its table's keys include two that are sections of the file, not architectures
    return frozenset(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"} - set(NO_ATTENTION)


@contextlib.contextmanager
def _progress(phase):
    """transformers' loader walks the tensors under its own tqdm bar, which would print to the server's log: for
    the load's length, that walk reports to ``phase("dequantize", share)`` instead, silently. One load at a time
    runs here (the registry's lock), so the module's name is put back as it was."""
    from transformers import modeling_gguf_pytorch_utils as loader

    def quiet(items, total=None, **_kw):
        total = total or (len(items) if hasattr(items, "__len__") else 0)
        for i, item in enumerate(items):
            if total and i % 16 == 0:
                phase("dequantize", i / total)
            yield item

    held = loader.tqdm
    loader.tqdm = quiet
    try:
        yield
    finally:
        loader.tqdm = held


def cache_root() -> Path:
    raw = os.environ.get(CACHE_ENV, "").strip()
    base = Path(raw) if raw else Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache") / \
        "attnviz" / "models"
    return base


def folder_for(path: Path) -> Path:
    """Where ``path``'s de-quantized folder is kept: named by the file's stem, its absolute path, size and time (a
    replaced file is de-quantized afresh)."""
    st = path.stat()
    tag = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_root() / f"{path.stem[:60]}-{tag}"


def is_dequantized(path: Path) -> bool:
    folder = folder_for(path)
    return (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()


def dequantized_folder(path: Path, phase=lambda what: None, verify=None) -> Path:
    """``path`` as a Hugging Face folder in the model cache, de-quantized by ``transformers`` the first time
    (``read_header`` first; ``verify(path)`` before any tensor is read, where given: a packaged file's SHA-256)."""
    facts = read_header(path)
    folder = folder_for(path)
    if is_dequantized(path):
        return folder
    if verify is not None:
        verify(path)
    try:
        import transformers as T
        from safetensors.torch import save_model
    except ImportError:
        raise ModelError("Reading a GGUF file needs transformers and gguf: pip install transformers gguf.") from None
    T.utils.logging.disable_progress_bar()
    T.utils.logging.set_verbosity_error()
    phase("dequantize")
    try:
        loader = T.AutoModelForSeq2SeqLM if facts.architecture.startswith("t5") else T.AutoModelForCausalLM
        with _progress(phase):
            model = loader.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager")
        phase("tokenizer")
        tokenizer = T.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as e:  # noqa: BLE001 - a file transformers' own reader refuses: say which, never a traceback
        raise ModelError(f"{path.name} cannot be de-quantized by transformers: {type(e).__name__}: "
                         f"{str(e)[:300]}") from None
    phase("save")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        save_model(model, str(tmp / "model.safetensors"))  # tied weights once (save_pretrained refuses GGUF models)
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)  # the weights kept are float32, no longer GGUF's
        cfg["architectures"] = [type(model).__name__]  # a GGUF load leaves it unset: what says "causal LM"
        model.config.__class__.from_dict(cfg).save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "source.json").write_text(json.dumps({"gguf": str(path.resolve()), "architecture": facts.architecture,
                                                     "name": facts.name}), encoding="utf-8")
        try:
            tmp.rename(folder)
        except OSError:  # another process kept it first: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder
