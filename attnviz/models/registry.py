"""Which models exist here, where their files are, and loading each once per process.

The default model is ``"random"`` (``attnviz.models.random``). ``"minilm-l6"`` (BERT) and
``"smollm2-135m"`` (LLaMA, a GGUF file) ship in registry packages (``attnviz.models.packaged``: found
through the packages' metadata, checked against the upstream SHA-256 before use). A GGUF file
(``attnviz.models.gguf``: a path in the API and the CLI, or a ``.gguf`` file in a folder the operator
lists) is read from its header, de-quantized once into the model cache and then runs as the Hugging
Face folder it becomes. Any local folder in the same layout (``config.json`` +
``model.safetensors`` + ``tokenizer.json``) of a BERT-family encoder also works: a path
in the API and the CLI, or the folder named by ``ATTNVIZ_MODEL_DIR``, offered as the
model ``"local"`` (a URL can name a model, never a path).

A loaded model is shared read-only by every session of the process: the loaded models are one
``attnviz.cache.ByteBudgetCache`` bounded by ``limits.max_loaded_bytes()``, and a page asks for a
model's load as one ``attnviz.jobs`` job, whose progress every session that waits for it shows.

A model may also be named by its Hugging Face id ("org/name") when it is already in the local hub
cache (``HF_HUB_CACHE``, or ``HF_HOME``/hub: ``models--org--name/snapshots/<refs/main>/``), as
``from_pretrained`` would find it offline. ``ATTNVIZ_HF_CACHE=0`` turns this off, for a server whose
links may only name the folders its operator listed. Nothing is downloaded unless the operator allows
it, and then only the ids it lists, within ``ATTNVIZ_MAX_MODEL_MB`` (``attnviz.models.hub``): such a
model's load fetches it first, as one more phase of the same background job.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from attnviz import cache, jobs
from attnviz.i18n import N_, _
from attnviz.jobs import Job
from attnviz.limits import max_loaded_bytes
from attnviz.models.base import ModelError
from attnviz.models.bert import BertConfig, BertModel
from attnviz.models.gguf import GGUF_MAGIC, GGUF_SUFFIX, GGUFFacts, dequantized_folder, read_header
from attnviz.models.hf import (
    HEADS_KEYS,
    LAYERS_KEYS,
    WIDTH_KEYS,
    HFModel,
    config_int,
    kind_of,
    read_config,
    weight_bytes,
)
from attnviz.models.hub import HUB_ID, cache_names_allowed, download, download_ids, hub_dir, needs_download, snapshot
from attnviz.models.packaged import (
    MINILM,
    SMOLLM2,
    WHERE,
    installed,
    locate_packaged,
    offered,
    verify_file,
    verify_files,
)
from attnviz.models.random import RANDOM

LOCAL = "local"
# The tiny model Watch it learn trains (its default settings): trained by attnviz.learn, patched on the
# Patching page; the registry only names it (it is no folder), and says where it runs.
TRAINED = "watch-it-learn"
# The tiny vision-language model the vision-language page trains to look at pictures of shapes
# (attnviz.learn.look): trained in the worker process, no folder either.
LOOKING = "learns-to-look"
# The packaged models (MINILM, SMOLLM2) are attnviz.models.packaged's.
MODELS = (RANDOM, MINILM, SMOLLM2, LOCAL, TRAINED, LOOKING)
MODEL_DIR_ENV = "ATTNVIZ_MODEL_DIR"
# Folders the server's operator lists (os.pathsep between them): each sub-folder with a
# config.json (or the folder itself) is a model, offered by its folder's name, never by path.
MODEL_DIRS_ENV = "ATTNVIZ_MODEL_DIRS"
def available_models() -> list[str]:
    """The model names this machine can offer, in the order offered (the random model always): a page opens on the
    first it can run, so the real language model comes before the tiny one trained here (Patching, Circuit, the
    Logit lens open on SmolLM2 where it is installed and offered: ``packaged.offered``)."""
    names = [RANDOM]
    if installed(SMOLLM2) and offered(SMOLLM2):
        names.append(SMOLLM2)
    names += [TRAINED, LOOKING]
    if installed(MINILM) and offered(MINILM):
        names.append(MINILM)
    if os.environ.get(MODEL_DIR_ENV, "").strip():
        names.append(LOCAL)
    return names + [n for n in (*listed_models(), *download_ids()) if n not in names]


def listed_models() -> dict[str, Path]:
    """{name: folder or GGUF file} of the models under ``ATTNVIZ_MODEL_DIRS``: a folder with a config.json, by its
    name; a ``.gguf`` file, by its name less the suffix."""
    out: dict[str, Path] = {}
    for root in filter(None, (p.strip() for p in os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep))):
        base = Path(root)
        for folder in [base, *sorted(p for p in base.iterdir() if p.is_dir())] if base.is_dir() else []:
            if (folder / "config.json").is_file():
                out.setdefault(folder.name, folder)
        for file in sorted(base.glob(f"*{GGUF_SUFFIX}")) if base.is_dir() else []:
            if file.is_file():
                out.setdefault(file.stem, file)
    return out


# Marked for translation (attnviz.i18n.N_); translated where they are shown.
# Short enough to read whole in the sidebar's 240 px box (the model's help says the rest).
MODEL_LABELS = {RANDOM: N_("random layer"), MINILM: N_("MiniLM-L6 (BERT, 6 × 12)"),
                SMOLLM2: N_("SmolLM2-135M (LLaMA, 30 × 9)"),
                TRAINED: N_("watch-it-learn (tiny)"), LOOKING: N_("learns-to-look (tiny, pictures)"),
                LOCAL: N_("local BERT folder")}


def layer_count(model: str, stack: str = "encoder") -> int:
    """How many layers ``model`` has (1 for the random model; an encoder–decoder's
    ``stack``'s); reads config.json only."""
    if model == RANDOM:
        return 1
    folder, _pinned = locate(model)
    if is_gguf(folder):
        return gguf_facts(model).layers
    if is_bert(folder):
        return BertConfig.read(folder / "config.json").num_hidden_layers
    cfg = read_config(folder)
    if stack != "encoder":
        for name in ("num_decoder_layers", "decoder_layers"):
            if isinstance(cfg.get(name), int):
                return int(cfg[name])
    return config_int(cfg, *LAYERS_KEYS)


@dataclass(frozen=True)
class ModelFacts:
    """What a model brings of its own, from config.json alone: what the sidebar shows in
    place of the random layer's settings, which do not apply to it."""

    layers: int
    heads: int
    width: int
    mask: str  # the mask it was trained with: "causal" (a decoder) or "padding" (an encoder)


def model_facts(model: str, stack: str = "encoder") -> ModelFacts:
    """``model``'s layers (its ``stack``'s), heads, width and own mask; reads config.json only.
    ``ModelError`` for a model that cannot be found."""
    if model_kind(model) in ("looking", "vlm"):
        raise ModelError(f"{model} is a vision-language model: a vision tower and a language model, no one stack.")
    folder, _pinned = locate(model)
    layers = layer_count(model, stack)
    if is_gguf(folder):
        facts = gguf_facts(model)
        return ModelFacts(layers, facts.heads, facts.width, "causal" if model_kind(model) == "causal" else "padding")
    if is_bert(folder):
        cfg = BertConfig.read(folder / "config.json")
        return ModelFacts(layers, cfg.num_attention_heads, cfg.hidden_size, "padding")
    cfg = read_config(folder)
    heads = config_int(cfg, *HEADS_KEYS)
    width = config_int(cfg, *WIDTH_KEYS)
    kind = model_kind(model)
    causal = kind == "causal" or (kind == "seq2seq" and stack == "decoder")
    return ModelFacts(layers, heads, width, "causal" if causal else "padding")


def model_kind(model: str) -> str:
    """"random", "tiny" (watch-it-learn), "looking" (learns-to-look), "encoder", "causal", "seq2seq", "vision" or
    "vlm", from config.json alone (no weights read): what the pages offer for it. A model that cannot be found is
    "encoder" (the run then says what is wrong). Read once per folder and config.json time: pages
    ask on every rerun."""
    if model in (RANDOM, TRAINED, LOOKING):
        return {RANDOM: RANDOM, TRAINED: "tiny", LOOKING: "looking"}[model]
    try:
        key = _key(model)
    except ModelError:
        return "encoder"
    # Kept in the byte-bounded lookups share (limits.CACHE_SHARES), as every table looked up per request.
    return cache.named("lookups").get_or_compute(("folder-kind", *key), lambda: _folder_kind(*key))


def _folder_kind(model: str, folder: str, stamp: int) -> str:
    path = Path(folder)
    if is_gguf(path):
        try:
            return "seq2seq" if gguf_facts(model).architecture.startswith("t5") else "causal"
        except ModelError:
            return "causal"  # the load says what is wrong with it
    if is_bert(path):
        return "encoder"
    try:
        return kind_of(json.loads((path / "config.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return "encoder"


def is_bert(folder: Path) -> bool:
    """A BERT encoder in attnviz's own layout: run by the hand-built encoder (every step)."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # let BertConfig.read say what is wrong with it
    return cfg.get("model_type") == "bert" or "Bert" in " ".join(map(str, cfg.get("architectures") or []))


def is_gguf(path: Path) -> bool:
    """A file given as a model is read as GGUF when it is named ``.gguf`` or begins with GGUF's magic (its header
    then says what is wrong with it, if anything)."""
    if path.suffix.lower() == GGUF_SUFFIX:
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def gguf_facts(model: str) -> GGUFFacts:
    """A GGUF model's header facts, read once per file and time (``ModelError`` for a file attnviz refuses)."""
    key = _key(model)
    return cache.named("lookups").get_or_compute(("gguf-header", *key), lambda: read_header(Path(key[1])))


def locate(model: str) -> tuple[Path, dict[str, str] | None]:
    """(folder, pinned hashes or None) for a model name or a folder path: the one way from what the API,
    the CLI, a notebook and the app name a model by to its folder. In this order: the trained tiny model
    (no folder: refused with where it runs), the packaged MiniLM, ``"local"``, a name the operator lists,
    a folder path, a Hugging Face id in the local hub cache. ``ModelError`` saying why where none of them
    is a folder here, so that every door refuses a name with the same words."""
    if model == TRAINED:
        raise ModelError(_("{model} is the tiny model that Watch it learn trains: its heads are patched on the "
                           "Patching page, its attention drawn on Watch it learn.").format(model=TRAINED))
    if model == LOOKING:
        raise ModelError(_("{model} is the tiny vision-language model that the vision-language page trains: its "
                           "attention to a picture is drawn there.").format(model=LOOKING))
    if model in WHERE:  # a packaged model: MiniLM, SmolLM2
        return locate_packaged(model)
    if model == LOCAL:
        raw = os.environ.get(MODEL_DIR_ENV, "").strip()
        if not raw:
            raise ModelError(f"The model 'local' needs {MODEL_DIR_ENV} set to a model folder.")
        if not Path(raw).is_dir():
            raise ModelError(f"The model 'local' is {MODEL_DIR_ENV}={raw}, which is not a folder.")
        return Path(raw), None
    listed = listed_models()
    if model in listed:
        return listed[model], None
    folder = Path(model)
    try:
        is_dir, exists = folder.is_dir(), folder.exists()
    except (OSError, ValueError) as e:  # a name no file system takes (too long, a NUL byte): no folder of ours
        why = getattr(e, "strerror", None) or e
        raise ModelError(f"{model[:60]!r} names no model here and no folder ({why}).") from None
    if is_dir:
        return folder, None
    if exists and folder.is_file() and is_gguf(folder):
        return folder, None
    if not exists and HUB_ID.match(model):  # an existing path is read as one, never as an id
        cached = snapshot(model)
        if cached is not None:
            return cached, None
        if needs_download(model):
            raise ModelError(_("{model} is not downloaded yet: it is fetched when it first loads.").format(
                model=model))
        if cache_names_allowed():
            raise ModelError(f"Model folder {model} does not exist, and no model {model} is in the local Hugging "
                             f"Face cache ({hub_dir()}): attnviz downloads nothing but the ids a server's operator "
                             "lists (ATTNVIZ_ALLOW_DOWNLOAD=1, ATTNVIZ_DOWNLOAD_IDS). Fetch it there first "
                             "(huggingface-cli download), or give its folder.")
    if exists:
        raise ModelError(f"{model} is a file, but neither a model folder nor a GGUF file (.gguf).")
    raise ModelError(f"Model folder {model} does not exist (the models named here: "
                     f"{', '.join(available_models())}).")


# A load's phases: how far it is, in words (marked for translation, translated where shown).
PHASES = {"download": (0.02, N_("downloading its files")),
          "dequantize": (0.1, N_("de-quantizing its GGUF weights (once: they are kept in the model cache)")),
          "save": (0.8, N_("keeping the de-quantized weights in the model cache")),
          "config": (0.05, N_("reading config.json")), "weights": (0.2, N_("loading the weights")),
          "tokenizer": (0.85, N_("loading the tokenizer")), "ready": (1.0, N_("ready"))}


def progress(what: str, share: float = 0.0) -> tuple[float, str]:
    """(fraction, words) of a load ``share`` of the way through phase ``what`` (towards the next phase's start)."""
    start, words = PHASES[what]
    after = min((f for f, _w in PHASES.values() if f > start), default=1.0)
    return start + (after - start) * min(max(share, 0.0), 1.0), words


LOADED = cache.named("models")  # the loaded models, by _key, sized by their weight files
LOADING = jobs.kind("load")  # their background loads, by _key
_LOAD_ONE = threading.Lock()  # one model loads at a time, within the memory bound


def _key(model: str) -> tuple:
    """A loaded model's identity: its name, its folder and its config's time, so a folder the
    operator replaced is loaded afresh."""
    folder, _pinned = locate(model)
    try:
        stamp = (folder if folder.is_file() else folder / "config.json").stat().st_mtime_ns
    except OSError:
        stamp = 0
    return model, str(folder), stamp


def is_loaded(model: str) -> bool:
    try:
        return _key(model) in LOADED
    except ModelError:
        return False


def load(model: str, phase=lambda what, share=0.0: None):
    """The model, loaded once per process (files verified first) and shared read-only by
    every session; thread-safe. A BERT folder runs on attnviz's hand-built encoder (every
    step kept); any other Hugging Face folder on transformers (``attnviz.models.hf``).
    All loaded models together stay within ``limits.max_loaded_bytes()``: the least
    recently used others are unloaded first (sessions that hold one keep their copy).

    One model loads at a time (``_LOAD_ONE``); a loaded model, and a load's progress, stay
    readable meanwhile."""
    if needs_download(model):  # an id the operator lists, not fetched yet
        download(model, phase)
    key = _key(model)
    held = LOADED.get(key)
    if held is not None:
        return held
    folder, pinned = locate(model)
    if folder.is_file():  # a GGUF file: its bytes from its header, checked there
        size, most = gguf_facts(model).float32_bytes, max_loaded_bytes()
    else:
        size, most = weight_bytes(folder), max_loaded_bytes()
    if size > most:
        raise ModelError(f"{folder.name} has {size / 2**20:,.0f} MB of weights, over this server's bound for "
                         f"loaded models of {most / 2**20:,.0f} MB (ATTNVIZ_MAX_LOADED_MB); it was not loaded.")
    LOADED.max_bytes = most
    name = str(folder) if folder == Path(model) else model  # a path as its folder, any name as given

    def build():
        with _LOAD_ONE:
            LOADED.make_room(size)  # what loaded while this one waited counts too
            if folder.is_file():
                hf = dequantized_folder(folder, phase, lambda path: verify_file(path, pinned))
                return HFModel.from_folder(name, hf, phase)
            if is_bert(folder):
                phase("weights")
                verify_files(folder, pinned)
                return BertModel.from_folder(name, folder)
            return HFModel.from_folder(name, folder, phase)

    return LOADED.get_or_compute(key, build, size=size)


def loaded_bytes() -> int:
    """The weight bytes of every model loaded now."""
    return LOADED.total_bytes


def load_in_background(model: str) -> Job | None:
    """None once ``model`` is loaded; else the (one, shared) background load (``attnviz.jobs``),
    started now if no one started it, or again if it failed or its model has since been
    unloaded: a page shows its progress and never waits in its own thread."""
    # an id to download has no folder yet: its job is named by the id until the fetch is done
    key = ("download", model) if needs_download(model) else _key(model)
    if key in LOADED:
        return None
    job = LOADING.get(key)
    if job is not None and job.done.is_set() and not job.error:  # loaded once, unloaded since
        LOADING.forget(key)

    def work(job: Job):
        load(model, lambda what, share=0.0: job.report(*progress(what, share)))
        job.report(*PHASES["ready"])

    return LOADING.start(key, work, PHASES["config"][1], label=model)


def model_key(model: str) -> tuple:
    """What names ``model``'s files: its folder and its config's time (``ModelError`` for an
    unknown model); another folder under the same name is another key."""
    return _key(model)
