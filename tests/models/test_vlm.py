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


@pytest.mark.parametrize("where", ["chat_template.jinja", "chat_template.json"])
def test_a_pictures_only_processor_keeps_the_folders_chat_template(tmp_path, where):
    """SmolVLM's processor is built without its video processor (torchvision is not a dependency): it keeps the
    folder's image_seq_len and its chat template, from either file a folder keeps it in."""
    import json

    from attnviz.models.vlm import chat_prompt

    folder = vlmodels.save(tmp_path, "smolvlm")[0]
    template = "{% for m in messages %}User:{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>" \
               "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %} Assistant:"
    text = template if where.endswith(".jinja") else json.dumps({"chat_template": template})
    (folder / where).write_text(text)
    vlm = load_vlm(str(folder))
    assert vlm.processor.image_seq_len == 16 and vlm.processor.chat_template == template
    assert chat_prompt(vlm, "the cat") == "User:<image>the cat Assistant:"
