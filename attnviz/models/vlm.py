"""Vision-language models (a vision tower whose patches enter a causal language model as tokens):
which architectures attnviz reads, their folders loaded offline, and the pictures they are shown.

- ``ARCHITECTURES``: config.json's ``model_type`` -> the family's name: LLaVA-1.5, LLaVA-NeXT, Qwen2-VL /
  Qwen2.5-VL, PaliGemma, Idefics3, SmolVLM and Gemma 3 (see docs/vision-language.md).
- ``load_vlm(model)``: a folder or a local Hugging Face cache id (``registry.locate``), checked
  before any weight is read (config.json, the processor's files, safetensors weights within
  ``limits.max_model_bytes()``), then loaded with ``AutoModelForImageTextToText`` (eager attention,
  ``use_safetensors=True``, ``trust_remote_code=False``, ``local_files_only=True``) and its
  ``AutoProcessor`` (the PIL image backend: torchvision is not a dependency).
- ``read_picture(x)``: PNG or JPEG bytes or a path, bounded by ``limits.MAX_VL_IMAGE_BYTES`` and by the
  pixels the header claims (``limits.MAX_VL_IMAGE_PIXELS``) before decoding; a PIL image or an
  (H, W, 3) uint8 array as given, within the pixel bound.
- ``prepare(vlm, pictures, prompt)``: the processor's own inputs for one prompt, whose image
  placeholders (the processor's ``image_token``) must be one per picture; a prompt with none
  gets them in front, one per picture.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz import limits
from attnviz.models import registry
from attnviz.models.base import ModelError
from attnviz.models.hf import kind_of, read_config

ARCHITECTURES = {
    "llava": "LLaVA-1.5",
    "llava_next": "LLaVA-NeXT",
    "qwen2_vl": "Qwen2-VL",
    "qwen2_5_vl": "Qwen2.5-VL",
    "paligemma": "PaliGemma",
    "idefics3": "Idefics3",
    "smolvlm": "SmolVLM",
    "gemma3": "Gemma 3",
}
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
FORMATS = ("PNG", "JPEG")


def _names(types) -> str:
    return ", ".join(ARCHITECTURES[t] for t in types)


@dataclass
class VLM:
    """A loaded vision-language model: its folder, architecture (``model_type``), model and processor."""

    name: str
    folder: Path
    arch: str
    model: object  # a transformers ...ForConditionalGeneration, eval mode, eager attention
    processor: object

    @property
    def image_token_id(self) -> int:
        cfg = self.model.config
        return int(getattr(cfg, "image_token_id", None) if getattr(cfg, "image_token_id", None) is not None
                   else cfg.image_token_index)

    @property
    def language_model(self):
        return text_model(self.model)

    @property
    def placeholder(self) -> str:
        return str(self.processor.image_token)


def text_model(net):
    """The language model inside a loaded vision-language model (Idefics3's and SmolVLM's is its ``text_model``)."""
    inner = net.model
    return inner.language_model if hasattr(inner, "language_model") else inner.text_model


def check_vlm_folder(folder: Path) -> dict:
    """config.json of a vision-language folder attnviz reads, or a ValueError saying why not (no weight read)."""
    try:
        cfg = read_config(folder)
    except ModelError as e:
        raise ValueError(str(e)) from None
    arch = str(cfg.get("model_type", "?"))
    if arch not in ARCHITECTURES:
        if "vision_config" not in cfg:
            what = {"causal": "a causal language model", "encoder": "a text encoder", "seq2seq": "an encoder–decoder",
                    "vision": "a vision transformer"}[kind_of(cfg)]
            raise ValueError(f"{folder.name} is {what} (model_type {arch!r}), not a vision-language model: "
                             f"vl_attention reads {_names(ARCHITECTURES)}.")
        raise ValueError(f"{folder.name} is a vision-language model of architecture {arch!r}, which vl_attention does "
                         f"not know: it reads {_names(ARCHITECTURES)}.")
    if not any((folder / f).is_file() for f in PROCESSOR_FILES) or not any((folder / f).is_file()
                                                                            for f in TOKENIZER_FILES):
        raise ValueError(f"{folder.name} lacks its processor's files (one of {', '.join(PROCESSOR_FILES)} and one of "
                         f"{', '.join(TOKENIZER_FILES)}): vl_attention reads pictures and text with the model's own "
                         "processor.")
    if arch == "paligemma":
        _check_image_seq_length(folder, cfg)
    weights = [p for p in folder.iterdir() if p.suffix == ".safetensors"]
    if not weights:
        raise ValueError(f"{folder.name} has no .safetensors weights: attnviz loads safetensors only (never pickle).")
    size, most = sum(p.stat().st_size for p in weights), limits.max_model_bytes()
    if size > most:
        raise ValueError(f"{folder.name} has {size / 2**20:,.0f} MB of weights, over this server's bound of "
                         f"{most / 2**20:,.0f} MB (ATTNVIZ_MAX_MODEL_MB); it was not loaded.")
    return cfg


def _check_image_seq_length(folder: Path, cfg: dict) -> None:
    """PaliGemma's processor turns a picture into ``image_seq_length`` image tokens; a folder whose processor files
    lack it made transformers' own processor raise "can't multiply sequence by non-int of type 'NoneType'"."""
    for name in ("processor_config.json", "preprocessor_config.json"):
        try:
            own = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(own.get("image_seq_length") or (own.get("image_processor") or {}).get("image_seq_length"), int):
            return
    tower = cfg.get("vision_config") or {}
    n = (tower.get("image_size", 224) // tower.get("patch_size", 14)) ** 2
    raise ValueError(f"{folder.name}'s processor_config.json lacks image_seq_length, the number of image tokens a "
                     f"picture becomes, which PaliGemma's processor needs: (image_size / patch_size)² = {n} for its "
                     "vision tower. Add it to the image processor's settings.")


def load_vlm(model) -> VLM:
    """A loaded ``VLM`` (given one, itself) for a folder or local-cache id (see the module doc)."""
    if isinstance(model, VLM):
        return model
    if not isinstance(model, (str, Path)) or not str(model).strip():
        raise ValueError("model must be a vision-language model's folder or local Hugging Face cache id.")
    try:
        folder, _pinned = registry.locate(str(model))
    except ModelError as e:
        raise ValueError(str(e)) from None
    cfg = check_vlm_folder(folder)
    # Kept beside the other loaded models, in their one byte bound (ATTNVIZ_MAX_LOADED_MB, least recently used
    # unloaded first), by folder and config's time, sized by its weight files.
    key = ("vlm", str(folder.resolve()), (folder / "config.json").stat().st_mtime_ns)
    size = registry.weight_bytes(folder)
    if size > limits.max_loaded_bytes():
        raise ValueError(f"{folder.name} has {size / 2**20:,.0f} MB of weights, over this server's bound for loaded "
                         f"models of {limits.max_loaded_bytes() / 2**20:,.0f} MB (ATTNVIZ_MAX_LOADED_MB).")
    registry.LOADED.max_bytes = limits.max_loaded_bytes()
    return registry.LOADED.get_or_compute(key, lambda: _load(model, folder, cfg), size=size)


def _load(model, folder: Path, cfg: dict) -> VLM:
    import transformers as T

    T.utils.logging.disable_progress_bar()
    T.utils.logging.set_verbosity_error()
    common = {"local_files_only": True, "trust_remote_code": False}
    try:
        net = T.AutoModelForImageTextToText.from_pretrained(str(folder), attn_implementation="eager",
                                                            use_safetensors=True, **common)
        processor = _processor(T, folder, cfg, common)
    except Exception as e:  # noqa: BLE001 - a broken or foreign folder: say which, never a traceback
        raise ValueError(f"{folder.name} cannot be loaded as {ARCHITECTURES[cfg['model_type']]}: "
                         f"{type(e).__name__}: {str(e)[:300]}") from None
    if getattr(processor, "image_processor", None) is None or getattr(processor, "image_token", None) is None:
        raise ValueError(f"{folder.name}'s processor has no image processor or image token: its processor's files "
                         "are incomplete.")
    net.eval()
    return VLM(str(model), folder, str(cfg["model_type"]), net, processor)


# The architectures whose processor also makes videos, which needs torchvision (not a dependency): built here
# from the image processor and the tokenizer where AutoProcessor cannot make it.
VIDEO_TOO = {"qwen2_vl": "Qwen2VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor", "smolvlm": "SmolVLMProcessor"}


def _processor(T, folder: Path, cfg: dict, common: dict):
    """The folder's own processor; for ``VIDEO_TOO``'s architectures, where its video processor cannot be made, the
    same processor class from the image processor, the tokenizer and processor_config.json's own values (pictures
    only)."""
    try:
        return T.AutoProcessor.from_pretrained(str(folder), backend="pil", **common)
    except ImportError:
        if cfg.get("model_type") not in VIDEO_TOO:
            raise

    class PicturesOnly(getattr(T, VIDEO_TOO[cfg["model_type"]])):
        def check_argument_for_proper_class(self, name, arg):
            return None if arg is None else super().check_argument_for_proper_class(name, arg)

        def apply_chat_template(self, conversation, chat_template=None, **kwargs):
            """The template's own (SmolVLM's asks the video processor it lacks for its frame counts)."""
            return T.ProcessorMixin.apply_chat_template(self, conversation, chat_template, **kwargs)

    own = {}
    if (folder / "processor_config.json").is_file():  # SmolVLM's image_seq_len: its tokens a tile
        own = {k: v for k, v in json.loads((folder / "processor_config.json").read_text()).items()
               if k in ("image_seq_len",)}
    if (folder / "chat_template.jinja").is_file():  # the template, where the folder keeps one (either file)
        own["chat_template"] = (folder / "chat_template.jinja").read_text()
    elif (folder / "chat_template.json").is_file():
        own["chat_template"] = json.loads((folder / "chat_template.json").read_text()).get("chat_template")
    images = T.AutoImageProcessor.from_pretrained(str(folder), backend="pil", **common)
    return PicturesOnly(image_processor=images, tokenizer=T.AutoTokenizer.from_pretrained(str(folder), **common),
                        video_processor=None, **own)


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


def _pixels(w: int, h: int, what: str) -> None:
    if w * h > limits.MAX_VL_IMAGE_PIXELS:
        raise ValueError(f"{what} is {w:,} × {h:,} pixels, over the bound of {limits.MAX_VL_IMAGE_PIXELS:,} pixels "
                         "(MAX_VL_IMAGE_PIXELS): shrink it.")


def read_picture(x, index: int = 0):
    """One picture as an RGB PIL image (see the module doc); ValueError saying what is wrong with it."""
    from PIL import Image

    what = f"Picture {index + 1}"
    if isinstance(x, Image.Image):
        _pixels(*x.size, what)
        return x.convert("RGB")
    if isinstance(x, np.ndarray):
        if x.ndim != 3 or x.shape[2] != 3 or x.dtype != np.uint8:
            raise ValueError(f"{what} is an array of shape {x.shape} and {x.dtype}: give (H, W, 3) uint8.")
        _pixels(x.shape[1], x.shape[0], what)
        return Image.fromarray(x, "RGB")
    if isinstance(x, (str, Path)):
        path = Path(x)
        if not path.is_file():
            raise ValueError(f"{what}: {str(x)[:200]} is not a file.")
        if path.stat().st_size > limits.MAX_VL_IMAGE_BYTES:
            raise ValueError(f"{what} has {path.stat().st_size / 2**20:,.1f} MB, over the bound of "
                             f"{limits.MAX_VL_IMAGE_BYTES // 2**20} MB (MAX_VL_IMAGE_BYTES).")
        x = path.read_bytes()
    if not isinstance(x, (bytes, bytearray)):
        raise ValueError(f"{what} is a {type(x).__name__}: give PNG or JPEG bytes, a path, a PIL image or an "
                         "(H, W, 3) uint8 array.")
    data = bytes(x)
    if len(data) > limits.MAX_VL_IMAGE_BYTES:
        raise ValueError(f"{what} has {len(data) / 2**20:,.1f} MB, over the bound of "
                         f"{limits.MAX_VL_IMAGE_BYTES // 2**20} MB (MAX_VL_IMAGE_BYTES).")
    if (claimed := _png_size(data)) is not None:
        _pixels(*claimed, what)
    try:
        img = Image.open(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - PIL raises many kinds for a file it cannot read
        raise ValueError(f"{what} is not a PNG or JPEG image (it could not be read).") from None
    if img.format not in FORMATS:
        raise ValueError(f"{what} is a {img.format} image: vl_attention reads PNG or JPEG.")
    _pixels(*img.size, what)
    try:
        img.load()
    except Exception as e:  # noqa: BLE001 - a truncated or corrupt file
        raise ValueError(f"{what} is a corrupt {img.format} file: {str(e)[:200]}.") from None
    return img.convert("RGB")


def pictures_of(image) -> list:
    """One picture or a list of them, each read by ``read_picture``; at least one, at most MAX_VL_IMAGES."""
    items = list(image) if isinstance(image, (list, tuple)) else [] if image is None else [image]
    if not items:
        raise ValueError("No picture was given: vl_attention reads attention from text to a picture.")
    if len(items) > limits.MAX_VL_IMAGES:
        raise ValueError(f"{len(items)} pictures; vl_attention reads at most {limits.MAX_VL_IMAGES} (MAX_VL_IMAGES).")
    return [read_picture(x, i) for i, x in enumerate(items)]


def prompt_for(vlm: VLM, prompt, count: int) -> str:
    """The prompt with one image placeholder per picture (prepended where it has none)."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string, not {type(prompt).__name__}.")
    if len(prompt) > limits.MAX_VL_PROMPT_CHARS:
        raise ValueError(f"The prompt has {len(prompt):,} characters; the bound is {limits.MAX_VL_PROMPT_CHARS:,} "
                         "(MAX_VL_PROMPT_CHARS).")
    mark = vlm.placeholder
    found = prompt.count(mark)
    if found == 0:
        return mark * count + ("\n" if vlm.arch in ("llava", "llava_next") else "") + prompt
    if found != count:
        raise ValueError(f"The prompt has {found} image placeholder{'s' * (found != 1)} ({mark!r}) for {count} "
                         f"picture{'s' * (count != 1)}: give one per picture, or none (then they go in front).")
    return prompt


def chat_prompt(vlm: VLM, question: str, count: int = 1) -> str:
    """``question`` as the model's own chat template asks it (a user turn: the pictures, then the question; the
    model's turn opened), where its processor has one; the question as it is where it has none (PaliGemma's
    processor frames a prompt itself)."""
    if not getattr(vlm.processor, "chat_template", None) or vlm.placeholder in question:
        return question
    content = [*({"type": "image"} for _ in range(count)), {"type": "text", "text": question}]
    turn = [{"role": "user", "content": content}]
    try:
        return str(vlm.processor.apply_chat_template(turn, add_generation_prompt=True))
    except Exception:  # noqa: BLE001 - a template that cannot frame this turn: the question as it is
        return question


def prepare(vlm: VLM, pictures: list, prompt: str) -> dict:
    """The processor's tensors for the pictures and the prompt (batch of one)."""
    text = prompt_for(vlm, prompt, len(pictures))
    if vlm.arch in ("qwen2_vl", "qwen2_5_vl"):
        text = text.replace(vlm.placeholder, "<|vision_start|>" + vlm.placeholder + "<|vision_end|>") \
            if "<|vision_start|>" not in text else text
    try:
        return dict(vlm.processor(images=pictures, text=text, return_tensors="pt"))
    except ValueError as e:
        raise ValueError(f"{vlm.name}'s processor refused the prompt and pictures: {str(e)[:300]}") from None
