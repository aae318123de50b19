"""Models named by their Hugging Face id from the local hub cache (attnviz.models.registry), laid out
as the hub lays it out: hub/models--org--name/snapshots/<commit>/ and refs/main. Nothing is downloaded,
and a server can turn it off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnviz.analysis.longcontext import long_attention
from attnviz.models import hub as H
from attnviz.models import registry
from attnviz.models.base import ModelError
from tests.support import fakehub, longmodels
from tests.support.fakehub import FakeHub

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    repo = fakehub.cache(tmp_path / "home", "tiny-org/tiny-llama", longmodels.save(tmp_path / "built", "llama", 512),
                         COMMIT)
    (repo / "snapshots" / "fedcba").mkdir()  # an older snapshot refs/main does not name
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(H.HF_CACHE_ENV, raising=False)
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


def test_a_path_is_read_as_a_path_and_what_is_no_folder_is_refused_with_why(hub, tmp_path, monkeypatch):
    snap = hub / "snapshots" / COMMIT
    assert registry.locate(str(snap)) == (snap, None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny-org" / "tiny-llama").mkdir(parents=True)  # a folder spelled like the cached id
    assert registry.locate("tiny-org/tiny-llama") == (Path("tiny-org/tiny-llama"), None)
    with pytest.raises(ModelError, match="config.json is a file, but neither a model folder nor a GGUF file"):
        registry.locate(str(snap / "config.json"))
    with pytest.raises(ModelError, match=r"Model folder gpt-5 does not exist \(the models named here: random, "):
        registry.load("gpt-5")
    monkeypatch.setenv(registry.MODEL_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ModelError, match="ATTNVIZ_MODEL_DIR=.*nowhere, which is not a folder"):
        registry.load(registry.LOCAL)


def test_a_server_turns_cache_names_off(hub, monkeypatch):
    monkeypatch.setenv(H.HF_CACHE_ENV, "0")
    assert H.snapshot("tiny-org/tiny-llama") is None
    for find in (registry.locate, registry.load):  # read as a path, which does not exist
        with pytest.raises(ModelError, match="Model folder tiny-org/tiny-llama does not exist"):
            find("tiny-org/tiny-llama")


# --- downloads: only where the operator allows them, only listed ids, only within the size bound -----------

@pytest.fixture()
def fake_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    for name in (H.ALLOW_ENV, H.IDS_ENV, H.HF_CACHE_ENV):
        monkeypatch.delenv(name, raising=False)
    return FakeHub(longmodels.save(tmp_path / "built", "llama", 512), monkeypatch, COMMIT)


def test_nothing_is_downloaded_unless_the_operator_allows_it(fake_hub, monkeypatch):
    monkeypatch.setenv(H.IDS_ENV, "tiny-org/tiny-llama")  # a list alone allows nothing
    assert "tiny-org/tiny-llama" not in registry.available_models()
    with pytest.raises(ModelError, match="downloads nothing"):
        registry.load("tiny-org/tiny-llama")
    with pytest.raises(ModelError, match="ATTNVIZ_ALLOW_DOWNLOAD is off"):
        H.download("tiny-org/tiny-llama")
    assert not fake_hub.calls and not fake_hub.listed


def test_only_the_operators_ids_are_downloaded(fake_hub, monkeypatch):
    monkeypatch.setenv(H.ALLOW_ENV, "1")
    monkeypatch.setenv(H.IDS_ENV, "tiny-org/tiny-llama, not an id")
    assert H.download_ids() == ("tiny-org/tiny-llama",)
    with pytest.raises(ModelError, match="not on this server's list"):
        H.download("tiny-org/other")
    with pytest.raises(ModelError, match="downloads nothing"):
        registry.load("tiny-org/other")
    assert not fake_hub.calls


def test_a_model_over_the_size_bound_is_refused_before_a_byte_is_fetched(fake_hub, monkeypatch):
    monkeypatch.setenv(H.ALLOW_ENV, "1")
    monkeypatch.setenv(H.IDS_ENV, "tiny-org/tiny-llama")
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "0.001")  # 1 KB: the tiny model's weights are more
    with pytest.raises(ModelError, match="over this server's bound .*ATTNVIZ_MAX_MODEL_MB.*nothing was downloaded"):
        registry.load("tiny-org/tiny-llama")
    assert fake_hub.listed == ["tiny-org/tiny-llama"] and not fake_hub.calls


def test_a_listed_id_is_offered_fetched_in_its_load_job_and_then_runs(fake_hub, monkeypatch):
    monkeypatch.setenv(H.ALLOW_ENV, "1")
    monkeypatch.setenv(H.IDS_ENV, "tiny-org/tiny-llama")
    monkeypatch.setenv(H.HF_CACHE_ENV, "0")  # a server that names only what its operator lists
    assert "tiny-org/tiny-llama" in registry.available_models()
    with pytest.raises(ModelError, match="not downloaded yet"):
        registry.locate("tiny-org/tiny-llama")
    job = registry.load_in_background("tiny-org/tiny-llama")
    assert job.done.wait(120) and not job.error, job.error
    # only the top-level config, tokenizer and safetensors files: no pickle, nothing from a sub-folder
    (name, files), = fake_hub.calls
    assert name == "tiny-org/tiny-llama" and "pytorch_model.bin" not in files and not any("/" in f for f in files)
    assert "config.json" in files and any(f.endswith(".safetensors") for f in files)
    assert registry.load_in_background("tiny-org/tiny-llama") is None  # loaded: no job
    assert registry.model_kind("tiny-org/tiny-llama") == "causal"
    result = long_attention("tiny-org/tiny-llama", [4, 5, 6, 7] * 10, blocks=4)
    assert result.model == "tiny-org/tiny-llama" and np.allclose(result.received.sum(-1), 40, rtol=1e-5)
    assert len(fake_hub.calls) == 1  # found in the cache from then on
