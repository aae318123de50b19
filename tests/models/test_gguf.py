"""GGUF files through the one model door: tiny files written here with gguf's own writer (LLaMA, Qwen2 and GPT-2;
float32 and the quantized Q8_0), checked against transformers' own GGUF load and, where the file holds the exact
weights, against the model it was written from; and every refusal, from the header, before any tensor is read."""

from __future__ import annotations

import json

import pytest
import torch

from attnviz import cli, limits
from attnviz.models import Cap, registry
from attnviz.models import open as open_model
from attnviz.models.base import ModelError
from attnviz.models.gguf import folder_for, is_dequantized, read_header
from attnviz.models.hf import HFModel
from attnviz.run.config import AttentionConfig
from attnviz.run.run import compute
from tests.support.ggufs import write_gguf

CASES = [("llama", "F32"), ("qwen2", "F32"), ("gpt2", "F32"), ("llama", "Q8_0"), ("gpt2", "Q8_0")]


@pytest.fixture(autouse=True)
def model_cache(tmp_path, monkeypatch):
    """Each test de-quantizes into a cache of its own, and starts with no model loaded."""
    monkeypatch.setenv("ATTNVIZ_MODEL_CACHE", str(tmp_path / "cache"))
    registry.LOADED.clear()
    yield tmp_path / "cache"
    registry.LOADED.clear()


def transformers_own(path):
    import transformers as T

    model = T.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager")
    return model.eval(), T.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.mark.parametrize(("arch", "quant"), CASES, ids=lambda v: str(v))
def test_a_gguf_file_opens_through_the_door_as_transformers_reads_it(tmp_path, arch, quant):
    path, original = write_gguf(tmp_path / f"tiny-{arch}.gguf", arch, quant)
    handle = open_model(str(path))
    assert handle.problem is None and handle.can(Cap.UNEMBEDDING, Cap.CAUSAL, Cap.PATCHABLE, Cap.LOADS)
    loaded = handle.load()
    assert isinstance(loaded, HFModel) and loaded.kind == "causal" and loaded.layers == 2 and loaded.heads == 4
    reference, tokenizer = transformers_own(path)
    ids = torch.tensor([tokenizer("When Mary and John went to the store")["input_ids"]])  # (1, L)
    assert loaded.tokenizer("When Mary and John went to the store")["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        ours, theirs = loaded.model(ids).logits, reference(ids).logits  # (1, L, V)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)  # float32 kept as transformers de-quantized it
    if quant == "F32":  # the file holds the written model's weights exactly
        with torch.no_grad():
            torch.testing.assert_close(ours, original(ids).logits, rtol=1e-5, atol=1e-5)
    else:  # Q8_0's rounding moves the logits, a little
        with torch.no_grad():
            gap = (ours - original(ids).logits).abs().max().item()
        assert 0 < gap < 0.05


def test_a_runs_weights_are_the_models_own_attention(tmp_path):
    """The explorer's run of a GGUF file: each layer's weights equal the written model's ``output_attentions``."""
    path, original = write_gguf(tmp_path / "tiny.gguf", "llama", "F32")
    text = "the cat sat on the mat"
    result = compute(AttentionConfig(text=text, model=str(path), layer=1))
    tokens = open_model(str(path)).load().tokenizer(text)["input_ids"]
    original.config._attn_implementation = "eager"
    with torch.no_grad():
        want = original(torch.tensor([tokens]), output_attentions=True).attentions[1]  # (1, H, L, L)
    torch.testing.assert_close(result.weights, want, rtol=1e-5, atol=1e-6)
    assert result.weights.shape == (1, 4, len(tokens), len(tokens))


def test_the_header_reads_as_ggufs_own_reader_reads_it(tmp_path):
    import gguf

    for arch, quant in CASES[:3] + CASES[4:]:
        path, _m = write_gguf(tmp_path / f"{arch}-{quant}.gguf", arch, quant)
        facts, reader = read_header(path), gguf.GGUFReader(str(path))
        assert facts.architecture == arch and facts.tensors == len(reader.tensors)
        assert facts.numbers == sum(int(t.n_elements) for t in reader.tensors)
        assert (facts.layers, facts.heads, facts.width) == (2, 4, 64)
        assert facts.kv_heads == (4 if arch == "gpt2" else 2) and facts.vocab == len(reader.fields[
            "tokenizer.ggml.tokens"].data)


def test_the_dequantized_folder_is_kept_and_read_back_without_dequantizing(tmp_path, monkeypatch, model_cache):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "Q8_0")
    first = open_model(str(path)).load()
    assert is_dequantized(path) and folder_for(path).parent == model_cache
    assert sorted(p.name for p in folder_for(path).iterdir()) >= ["config.json", "model.safetensors"]
    registry.LOADED.clear()  # a restarted server: the folder is read as it is, never de-quantized again
    from transformers import modeling_gguf_pytorch_utils as loader

    monkeypatch.setattr(loader, "load_gguf_checkpoint", lambda *a, **k: pytest.fail("de-quantized again"))
    again = open_model(str(path)).load()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(again.model(ids).logits, first.model(ids).logits, rtol=0, atol=0)


def test_a_replaced_file_is_another_model(tmp_path):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "F32", seed=0)
    before = open_model(str(path)).key
    write_gguf(path, "llama", "F32", seed=1)
    import os

    os.utime(path, ns=(1, 1))  # a time of its own, whatever the file system's clock resolution
    assert open_model(str(path)).key != before


def refusal(path) -> str:
    problem = open_model(str(path)).problem
    assert problem is not None and "\n" not in problem
    return problem


def test_a_file_that_is_not_gguf_is_refused_saying_so(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model at all")
    assert "is not a GGUF file" in refusal(bad)
    other = tmp_path / "notes.txt"
    other.write_text("hello", encoding="utf-8")
    assert "neither a model folder nor a GGUF file" in refusal(other)


def test_a_file_cut_short_is_refused_from_its_header(tmp_path):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "F32")
    data = path.read_bytes()
    for keep in (len(data) - 100, 2000, 30, 10):  # in the tensors, the tensor table, the keys, the counts
        cut = tmp_path / f"cut{keep}.gguf"
        cut.write_bytes(data[:keep])
        assert "is cut short" in refusal(cut), keep


@pytest.mark.parametrize(("architecture", "words"), [
    ("bert", "a “bert” model, which transformers cannot de-quantize from GGUF"),
    ("mamba", "a “mamba” model, a state-space model: there are no attention weights"),
])
def test_an_architecture_that_cannot_be_read_is_refused_by_name(tmp_path, architecture, words):
    path, _m = write_gguf(tmp_path / "other.gguf", "llama", "F32", architecture=architecture)
    assert words in refusal(path)


def test_the_weight_bound_is_checked_from_the_header_before_any_tensor(tmp_path, monkeypatch):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "F32")
    from transformers import modeling_gguf_pytorch_utils as loader

    monkeypatch.setattr(loader, "load_gguf_checkpoint", lambda *a, **k: pytest.fail("a tensor was read"))
    float32_mb = read_header(path).float32_bytes / 2**20
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", str(float32_mb / 2))
    assert "ATTNVIZ_MAX_MODEL_MB" in refusal(path) and "once de-quantized" in refusal(path)
    with pytest.raises(ModelError, match="ATTNVIZ_MAX_MODEL_MB"):
        open_model(str(path)).load()
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "1024")
    monkeypatch.setenv("ATTNVIZ_MAX_LOADED_MB", str(float32_mb / 2))
    assert "ATTNVIZ_MAX_LOADED_MB" in refusal(path)


def test_a_vocabulary_or_context_past_the_limits_is_refused(tmp_path, monkeypatch):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "F32")
    monkeypatch.setattr(limits, "MAX_GGUF_VOCAB", 100)
    assert "has a vocabulary of 320 tokens, over attnviz's 100" in refusal(path)
    monkeypatch.setattr(limits, "MAX_GGUF_VOCAB", 1000)
    monkeypatch.setattr(limits, "MAX_GGUF_CONTEXT", 64)
    assert "claims a context of 128 tokens, over attnviz's 64" in refusal(path)


def test_a_folder_the_operator_lists_offers_its_gguf_files_by_name(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    write_gguf(folder / "tiny-llama.gguf", "llama", "F32")
    monkeypatch.setenv(registry.MODEL_DIRS_ENV, str(folder))
    assert "tiny-llama" in registry.available_models()
    assert open_model("tiny-llama").can(Cap.UNEMBEDDING) and registry.model_facts("tiny-llama").heads == 4


def test_the_cli_renders_a_gguf_file_and_refuses_a_broken_one_in_one_line(tmp_path, capsys):
    path, _m = write_gguf(tmp_path / "tiny.gguf", "llama", "F32")
    out = tmp_path / "lens.json"
    assert cli.main(["render", "--page", "logit-lens", "--model", str(path), "--text", "the cat sat on the",
                     "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:5000])
    capsys.readouterr()
    assert cli.main(["render", "--model", str(cut), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is cut short" in err and len(err.splitlines()) == 1
