"""The shipped long texts (attnviz.inputs.longtexts): each listed one is there, is text, and all of
them together stay within 200 KB; the package ships them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from attnviz.inputs.longtexts import LONG_TEXTS, long_text, long_texts

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_text_is_a_few_thousand_words_of_text_within_200_kb_in_all():
    sizes = {name: len(long_text(name).encode("utf-8")) for name in LONG_TEXTS}
    assert sum(sizes.values()) <= 200 * 1024, sizes
    for name in LONG_TEXTS:
        assert len(long_text(name).split()) >= 1000, name
    assert set(long_texts()) == set(LONG_TEXTS) and all(long_texts().values())
    files = {p.stem for p in (ROOT / "attnviz" / "inputs" / "texts").glob("*.txt")}
    assert files == set(LONG_TEXTS)


def test_the_package_ships_them():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "inputs/texts/*.txt" in data["tool"]["setuptools"]["package-data"]["attnviz"]


def test_an_unknown_name_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="alice"):
        long_text("moby")
