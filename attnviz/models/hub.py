"""Models named by their Hugging Face id ("org/name"): found in the local hub cache, and fetched into
it only where the server's operator allows it.

- **The cache** (``HF_HUB_CACHE``, else ``HF_HOME``/hub, else ~/.cache/huggingface/hub, as
  ``from_pretrained`` finds it): an id is ``models--org--name/snapshots/<the commit refs/main names>/``.
  Always in the API, the CLI and a notebook; a server turns it off with ``ATTNVIZ_HF_CACHE=0`` (so that a
  link can only name what the operator listed).
- **Downloads**: none, unless the operator sets ``ATTNVIZ_ALLOW_DOWNLOAD=1``; then only the ids listed in
  ``ATTNVIZ_DOWNLOAD_IDS`` (commas or spaces between them), only their top-level config, tokenizer and
  ``.safetensors`` files (never pickled weights), and only within ``ATTNVIZ_MAX_MODEL_MB``, checked from the
  hub's file sizes before a byte is fetched. The files land in the cache above, where the id is then found
  like any cached model. A listed id is offered by the model picker; naming it in a link is what the
  operator allowed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from attnviz import limits
from attnviz.models.base import ModelError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HF_CACHE_ENV = "ATTNVIZ_HF_CACHE"
ALLOW_ENV = "ATTNVIZ_ALLOW_DOWNLOAD"
IDS_ENV = "ATTNVIZ_DOWNLOAD_IDS"
# What a folder needs to run (attnviz.models.hf), at its top level: config, tokenizer or image processor, and
# weights as safetensors. Pickled weights (.bin, .pt) can run code when read: they are never fetched.
NEEDED = re.compile(r"^[^/]+\.(json|safetensors|txt|model|tiktoken)$")
WEIGHTS = ".safetensors"


def _on(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in ("0", "false", "no", "off", "")


def hub_dir() -> Path:
    """The Hugging Face hub cache, as ``from_pretrained`` finds it: ``HF_HUB_CACHE``, else ``HF_HOME``/hub,
    else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE", "").strip():
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME", "").strip()
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def cache_names_allowed() -> bool:
    """Whether a model may be named by its Hugging Face id from the local cache (ATTNVIZ_HF_CACHE, on unless 0)."""
    return _on(HF_CACHE_ENV, "1")


def downloads_allowed() -> bool:
    """Whether the operator allows downloads at all (ATTNVIZ_ALLOW_DOWNLOAD=1; off unless set)."""
    return _on(ALLOW_ENV, "0")


def download_ids() -> tuple[str, ...]:
    """The ids the operator lists for download (``ATTNVIZ_DOWNLOAD_IDS``), when downloads are allowed; a
    name that is not an "org/name" id is left out."""
    if not downloads_allowed():
        return ()
    raw = re.split(r"[,\s]+", os.environ.get(IDS_ENV, ""))
    return tuple(dict.fromkeys(i for i in raw if HUB_ID.match(i)))


def snapshot(model_id: str) -> Path | None:
    """The folder of ``model_id`` in the local hub cache, when it is there with a config.json and the cache
    may be named (ATTNVIZ_HF_CACHE, or the id is on the operator's download list); None otherwise. Nothing is
    downloaded."""
    if not HUB_ID.match(model_id) or not (cache_names_allowed() or model_id in download_ids()):
        return None
    repo = hub_dir() / ("models--" + model_id.replace("/", "--"))
    try:
        commit = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    folder = repo / "snapshots" / commit
    return folder if commit and "/" not in commit and (folder / "config.json").is_file() else None


def needs_download(model_id: str) -> bool:
    """An id on the operator's list that is not in the cache yet: its load fetches it first."""
    return model_id in download_ids() and not Path(model_id).exists() and snapshot(model_id) is None


def download_plan(model_id: str) -> tuple[list[str], int]:
    """(the files to fetch, their bytes in all), from the hub's listing: ``ModelError`` where the hub cannot
    be reached, the model has no safetensors weights, or they exceed ``ATTNVIZ_MAX_MODEL_MB``."""
    from huggingface_hub import HfApi  # transformers' own dependency; only a download needs it

    try:
        info = HfApi().model_info(model_id, files_metadata=True, timeout=30)
    except Exception as e:  # noqa: BLE001 - any failure of the hub is one message: nothing was fetched
        raise ModelError(f"Could not list {model_id} on the Hugging Face hub ({type(e).__name__}): nothing was "
                         "downloaded.") from None
    files = {s.rfilename: int(s.size or 0) for s in info.siblings or () if NEEDED.match(s.rfilename)}
    if "config.json" not in files:
        raise ModelError(f"{model_id} has no config.json on the Hugging Face hub: nothing was downloaded.")
    weights = sum(size for name, size in files.items() if name.endswith(WEIGHTS))
    if not weights:
        raise ModelError(f"{model_id} has no .safetensors weights on the Hugging Face hub; attnviz downloads no "
                         "pickled weights (.bin, .pt): nothing was downloaded.")
    most = limits.max_model_bytes()
    if weights > most:
        raise ModelError(f"{model_id} has {weights / 2**20:,.0f} MB of weights, over this server's bound of "
                         f"{most / 2**20:,.0f} MB (ATTNVIZ_MAX_MODEL_MB): nothing was downloaded.")
    return sorted(files), sum(files.values())


def download(model_id: str, phase: Callable[[str], None] = lambda what: None) -> Path:
    """Fetch ``model_id`` into the local hub cache (``download_plan``'s files only) and return its folder there;
    ``ModelError`` unless the operator allows it (``ATTNVIZ_ALLOW_DOWNLOAD=1`` and the id in
    ``ATTNVIZ_DOWNLOAD_IDS``), or where ``download_plan`` refuses it."""
    if not downloads_allowed():
        raise ModelError(f"{model_id} is not in the local Hugging Face cache ({hub_dir()}), and this server "
                         f"downloads nothing ({ALLOW_ENV} is off).")
    if model_id not in download_ids():
        raise ModelError(f"{model_id} is not on this server's list of models to download ({IDS_ENV}).")
    files, _size = download_plan(model_id)
    phase("download")
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(model_id, cache_dir=hub_dir(), allow_patterns=files)
    except Exception as e:  # noqa: BLE001 - a failed transfer is one message
        raise ModelError(f"Downloading {model_id} failed ({type(e).__name__}: {e}).") from None
    folder = snapshot(model_id)
    if folder is None:
        raise ModelError(f"{model_id} was downloaded, but its snapshot is not in {hub_dir()}.")
    return folder
