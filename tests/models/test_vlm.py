"""A vision-language model loaded by attnviz.models.vlm is held where every loaded model is: in the registry's
one byte bound (ATTNVIZ_MAX_LOADED_MB), sized by its weight files, evicted least recently used, and refused
whole where it alone is larger."""

from __future__ import annotations

import pytest

from attnviz.models import registry
from attnviz.models.hf import weight_bytes
from attnviz.models.vlm import load_vlm
from tests.support import vlmodels


def test_a_loaded_vision_language_model_counts_in_the_loaded_models_bound(tmp_path, monkeypatch):
    registry.LOADED.clear()
    llava = vlmodels.save(tmp_path, "llava")[0]
    qwen = vlmodels.save(tmp_path, "qwen2_vl")[0]
    a = load_vlm(str(llava))
    assert load_vlm(str(llava)) is a  # kept: a second ask loads nothing
    assert registry.loaded_bytes() == weight_bytes(llava)
    # Room for one of them only: loading the second unloads the first
    monkeypatch.setenv("ATTNVIZ_MAX_LOADED_MB", str(max(weight_bytes(llava), weight_bytes(qwen)) * 1.5 / 2**20))
    b = load_vlm(str(qwen))
    assert registry.loaded_bytes() == weight_bytes(qwen) and load_vlm(str(qwen)) is b
    assert load_vlm(str(llava)) is not a  # loaded again
    monkeypatch.setenv("ATTNVIZ_MAX_LOADED_MB", "0.001")
    registry.LOADED.clear()
    with pytest.raises(ValueError, match="over this server's bound for loaded models .*ATTNVIZ_MAX_LOADED_MB"):
        load_vlm(str(llava))
    assert registry.loaded_bytes() == 0
