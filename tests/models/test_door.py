"""The one door for every model: ``attnviz.models.open`` gives each name its kind, its capabilities and its
refusals, and the pages choose their models by capability alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnviz.models import Cap, Kind, door, register, registry
from attnviz.models import open as open_model
from attnviz.views.catalogue import PAGES, models_for, page, why_not
from tests.support import longmodels
from tests.support.hfmodels import save

ROOT = Path(__file__).resolve().parents[2]


def test_every_model_offered_opens_with_its_kind_and_no_problem():
    for name in registry.available_models():
        handle = open_model(name)
        assert handle.problem is None, name
        assert handle.caps, name
        assert handle.key, name


def test_the_capabilities_of_the_models_that_ship():
    assert open_model("random").can(Cap.RUNS, Cap.EVERY_STEP) and not open_model("random").can(Cap.UNEMBEDDING)
    tiny = open_model(registry.TRAINED)
    assert tiny.can(Cap.PATCHABLE, Cap.UNEMBEDDING, Cap.TRAINED_HERE) and not tiny.can(Cap.RUNS)
    looking = open_model(registry.LOOKING)
    assert looking.can(Cap.SEES_PICTURES, Cap.TRAINED_HERE) and not looking.can(Cap.LOADS)


def test_a_page_offers_exactly_the_models_whose_capabilities_hold_its_needs():
    for entry in PAGES:
        offered = models_for(entry)
        runs = [m for m in registry.available_models() if open_model(m).can(*entry.needs)]
        preferred = [m for m in runs if open_model(m).can(*entry.prefers)]
        for name in registry.available_models():
            assert (name in offered) == (name in (preferred or runs)), (entry.name, name)
            if name not in offered:
                assert why_not(entry, name)  # a sentence, from the model's kind


def test_a_page_that_prefers_a_language_model_offers_the_random_layer_only_where_none_is(tmp_path, monkeypatch):
    """Long context reads a cache and a next token: with a causal LM offered it opens on it (the random layer,
    which has no next token, says why not); with none, the random layer is its fallback."""
    entry = page("long-context")
    assert entry.prefers == {Cap.UNEMBEDDING}
    assert models_for(entry) == ["random"]  # this suite offers no causal LM of its own
    longmodels.save(tmp_path, "llama", 512)
    save(tmp_path, "bert")
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(tmp_path))
    assert models_for(entry) == ["llama"]
    assert why_not(entry, "random").startswith("is the random layer: it has no unembedding")
    assert why_not(entry, "bert") == "is not a causal language model: it keeps no KV cache to evict"


def test_the_refusals_are_the_kinds_own_words():
    assert why_not(page("logit-lens"), "random").startswith("is the random layer: it has no unembedding")
    assert why_not(page("patching"), "random") == "has no next token to patch toward"
    assert why_not(page("explorer"), registry.TRAINED) == "is drawn on Watch it learn, patched on Patching"
    assert why_not(page("vision-language"), "random") == "is not a vision-language model: it sees no picture"


def test_a_name_that_opens_nothing_says_why_not_that_it_is_an_encoder(tmp_path):
    assert "does not exist" in open_model(str(tmp_path / "nothing-here")).problem
    note = tmp_path / "note.txt"
    note.write_text("hi", encoding="utf-8")
    assert "neither a model folder nor a GGUF file" in open_model(str(note)).problem
    from attnviz.analysis.subjects import registry_subject

    with pytest.raises(ValueError, match="does not exist"):
        registry_subject(str(tmp_path / "nothing-here"), "lens")


class Echo(Kind):
    """A throwaway kind: every name that starts with "echo:" is a model that only patches."""

    name = "echo"
    what = "an echo"
    words = {Cap.RUNS: "is an echo: it only patches"}

    def claims(self, model: str) -> bool:
        return model.startswith("echo:")

    def caps(self, model: str) -> frozenset[Cap]:
        return frozenset({Cap.PATCHABLE, Cap.UNEMBEDDING})


def test_a_kind_registered_the_way_the_real_ones_are_serves_the_pages_by_its_capabilities(monkeypatch):
    kind = Echo()
    register(kind)
    monkeypatch.setattr(door, "available", lambda: [*registry.available_models(), "echo:one"])
    monkeypatch.setattr("attnviz.views.catalogue.available", door.available)
    try:
        handle = open_model("echo:one")
        assert handle.kind is kind and handle.what == "an echo"
        assert "echo:one" in models_for(page("patching")) and "echo:one" not in models_for(page("explorer"))
        assert why_not(page("explorer"), "echo:one") == "is an echo: it only patches"
    finally:
        door.unregister(kind)
    assert open_model("echo:one").kind is not kind


# A model kind's name compared as a string: a branch per kind, where a capability should be asked.
KIND_COMPARISON = re.compile(r"model_kind\(|kind\(\w*\)\s*(==|!=|in)\s*[\"({]|==\s*\"(tiny|looking|vlm|seq2seq)\"")


def test_no_kind_of_model_is_compared_as_a_string_outside_the_models_package():
    found = []
    for folder in ("attnviz", "ui", "app_pages"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "attnviz" / "models"):
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if KIND_COMPARISON.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, found
