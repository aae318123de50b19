"""The documented calls work as written: every fenced block of docs/ marked ```python example runs, each
document's blocks in order in one namespace, on tiny stand-ins for the placeholders they name (a GPT-2 GGUF file
written here for "path/to/gpt2" and the real model's name, a LLaMA folder for "path/to/llama-folder") and with
the free names a reader is assumed to hold (``text``, ``clean``, ``q``…). A call that fails as documented fails
here."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support import ggufs, longmodels

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python example\n(.*?)^```", re.S | re.M)
IOI = "When Mary and John went to the store, John gave a drink to"
FACT = "The Eiffel Tower is located in the city of"
SEQUENCE = "BOS 10 28 11 18 27 9 20 25 8 12 4 13 15 27 9 20 25 8"  # the trained model's tokens, 19 of them
LONG = "the cat sat on the mat because it was tired " * 20  # the LLaMA folder's words, 200 tokens

# What a document's reader holds before its first block, by document (besides the shared names).
TEXTS = {"circuits.md": SEQUENCE, "long-context.md": LONG}
# Placeholders the documents name, and what stands in for them here besides the model files: words the tiny
# tokenizer holds for those it lacks, a head and a close-up that the tiny LLaMA has, and fewer training steps than
# a reader would run.
WORDS = {"ĠParis": "ĠMary", "ĠRome": "ĠJohn", "layer=3, head=5, q0=30_000": "layer=1, head=3, q0=120",
         "train_lens(\"path/to/gpt2\", steps=200": "train_lens(\"path/to/gpt2\", steps=4", "steps=1200": "steps=100"}
LENGTHS = {"cli-and-api.md": 5}  # the tokens of q, k and v: the mask the example builds is 5 × 5


def examples() -> dict[str, list[str]]:
    found = {p.name: BLOCK.findall(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "docs").glob("*.md"))}
    return {name: blocks for name, blocks in found.items() if blocks}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs-models")
    gguf, _hf = ggufs.write_gguf(root / "tiny-gpt2.gguf", "gpt2")
    llama = longmodels.save(root, "llama", 4096)
    return {"path/to/gpt2": str(gguf), "smollm2-135m": str(gguf), "path/to/llama-folder": str(llama)}


def _namespace(doc: str) -> dict:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, LENGTHS.get(doc, 64), 8, generator=g) for _ in range(3))
    n = 12
    return {"text": TEXTS.get(doc, FACT), "clean": IOI, "corrupted": IOI.replace(", John gave", ", Mary gave"),
            "q": q, "k": k, "v": v, "queries": np.random.default_rng(0).normal(size=(n, 4)),
            "keys": np.random.default_rng(1).normal(size=(n, 4)), "tokens": [f"t{i}" for i in range(n)],
            "__name__": f"docs/{doc}"}


def test_the_docs_mark_their_examples():
    found = examples()
    assert len(found) >= 9 and sum(len(b) for b in found.values()) >= 12, sorted(found)
    assert "vision-language.md" in found and "look_attention" in found["vision-language.md"][0]


@pytest.mark.parametrize("doc", sorted(examples()))
def test_a_documented_example_runs_as_written(doc, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what an example writes (a trained lens, a book to read) lands here
    (tmp_path / "book.txt").write_text(LONG, encoding="utf-8")
    namespace = _namespace(doc)
    for i, code in enumerate(examples()[doc]):
        for placeholder, stand_in in {**files, **WORDS}.items():
            code = code.replace(placeholder, stand_in)
        exec(compile(code, f"docs/{doc}, example {i + 1}", "exec"), namespace)  # noqa: S102 - the docs' own code
