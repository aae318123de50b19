"""Models named by their Hugging Face id from the local hub cache (attnviz.models.registry), laid out
as the hub lays it out: hub/models--org--name/snapshots/<commit>/ and refs/main. Nothing is downloaded,
and a server can turn it off."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from attnviz.analysis.longcontext import long_attention
from attnviz.models import registry
from attnviz.models.base import ModelError
from tests.support import longmodels

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    folder = longmodels.save(tmp_path / "built", "llama", 512)
    repo = tmp_path / "home" / "hub" / "models--tiny-org--tiny-llama"
    shutil.copytree(folder, repo / "snapshots" / COMMIT)
    (repo / "snapshots" / "fedcba").mkdir()  # an older snapshot refs/main does not name
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT + "\n")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(registry.HF_CACHE_ENV, raising=False)
    return repo


def test_an_id_in_the_cache_is_its_snapshot_folder(hub):
    folder, pinned = registry.locate("tiny-org/tiny-llama")
    assert folder == hub / "snapshots" / COMMIT and pinned is None
    assert registry.model_kind("tiny-org/tiny-llama") == "causal"
    assert registry.model_facts("tiny-org/tiny-llama").heads == 4
    result = long_attention("tiny-org/tiny-llama", [4, 5, 6, 7, 8, 9] * 10, blocks=6)
    assert result.model == "tiny-org/tiny-llama" and result.overview.shape == (2, 4, 6, 6)
    assert np.allclose(result.received.sum(-1), 60, rtol=1e-5)


def test_hf_hub_cache_wins_over_hf_home(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    with pytest.raises(ModelError, match="not in the local Hugging Face cache|no model tiny-org/tiny-llama is in"):
        registry.locate("tiny-org/tiny-llama")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub.parent))
    assert registry.locate("tiny-org/tiny-llama")[0] == hub / "snapshots" / COMMIT


def test_an_id_not_in_the_cache_is_refused_and_nothing_is_downloaded(hub):
    with pytest.raises(ModelError, match="downloads nothing"):
        registry.locate("tiny-org/other-model")
    (hub / "refs" / "main").write_text("feedbeef")  # refs/main naming a snapshot that is not there
    with pytest.raises(ModelError, match="downloads nothing"):
        registry.locate("tiny-org/tiny-llama")


def test_a_server_turns_cache_names_off(hub, monkeypatch):
    monkeypatch.setenv(registry.HF_CACHE_ENV, "0")
    assert registry.cached_snapshot("tiny-org/tiny-llama") is None
    folder, _ = registry.locate("tiny-org/tiny-llama")
    assert not folder.exists()  # read as a path, which does not exist: the load says so
    with pytest.raises(ModelError, match="does not exist"):
        registry.load("tiny-org/tiny-llama")
