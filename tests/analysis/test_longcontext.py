"""Long-context attention of a model's own q and k (attnviz.analysis.longcontext): every number
against the model's own ``output_attentions`` on GPT-2, LLaMA (grouped-query, rotary) and GPT-NeoX
folders, the same numbers whatever the tile, memory that grows with N (measured in a subprocess),
and bad input refused with one clear message."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz import limits
from attnviz.analysis import longcontext as LC
from tests.support import longmodels

NAMES = ("overview", "overview_mean", "received", "sink", "distance", "entropy")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("long")
    return {name: longmodels.save(tmp / name, name, 4096) for name in ("gpt2", "llama", "neox")}


def _ids(n: int, seed: int = 0) -> list[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(4, 12, size=n)]


def _errors(result, ref) -> dict[str, float]:
    return {n: float(np.abs(getattr(result, n) - ref[n]).max() / max(1.0, np.abs(ref[n]).max())) for n in NAMES}


@pytest.mark.parametrize("name", ["gpt2", "llama", "neox"])
def test_every_number_equals_output_attentions(folders, name):
    ids = _ids(333)
    result = LC.long_attention(str(folders[name]), ids, blocks=16)
    weights = longmodels.eager_weights(folders[name], ids)  # (layers, H, N, N)
    ref = longmodels.dense_numbers(weights, 16)
    assert result.overview.shape == (2, 4, 16, 16) and result.received.shape == (2, 4, 333)
    errors = _errors(result, ref)
    assert max(errors.values()) <= 1e-5, errors
    assert result.causal and result.kv_heads == (2 if name == "llama" else 4)
    close = result.window(1, 3, 200, 150, 64)
    assert close.shape == (64, 64) and np.abs(close - weights[1, 3, 200:264, 150:214]).max() <= 1e-5


def test_exact_at_2048_tokens_with_grouped_query_heads(folders):
    ids = _ids(2048, seed=1)
    result = LC.long_attention(str(folders["llama"]), ids, blocks=256)
    ref = longmodels.dense_numbers(longmodels.eager_weights(folders["llama"], ids), 256)
    errors = _errors(result, ref)
    assert max(errors.values()) <= 1e-5, errors
    assert result.overview.shape == (2, 4, 256, 256) and result.block == 8
    per_key_block = np.add.reduceat(result.received, np.arange(0, 2048, 8), -1)
    assert np.allclose(result.overview_mean.sum(-2) * 8 * 8, per_key_block, rtol=1e-4, atol=1e-4)


def test_the_tile_does_not_change_the_numbers(folders):
    ids = _ids(300, seed=2)
    one = LC.long_attention(str(folders["neox"]), ids, blocks=32, tile=32)
    two = LC.long_attention(str(folders["neox"]), ids, blocks=32, tile=128)
    for n in NAMES:
        assert np.allclose(getattr(one, n), getattr(two, n), atol=1e-6, rtol=1e-5), n


def test_a_text_is_read_with_the_models_own_tokens(folders):
    told = []
    result = LC.long_attention(str(folders["gpt2"]), "the cat sat on the mat " * 20, blocks=8, progress=told.append)
    assert told == [0.5, 1.0]  # after each of the 2 layers
    assert result.tokens[:3] == ["the", "cat", "sat"] and len(result.tokens) == 120
    assert np.allclose(result.received.sum(-1), 120, rtol=1e-5)  # every query's weights sum to 1


def test_the_random_layer_matches_its_own_weights():
    from attnviz import AttentionConfig, compute

    text = "the cat sat on the mat because it was tired " * 12
    result = LC.long_attention("random", text, blocks=10)
    run = compute(AttentionConfig(text=text, mask="causal"))
    ref = longmodels.dense_numbers(run.weights.double().numpy(), 10)  # (1, H, N, N) one layer
    assert max(_errors(result, ref).values()) <= 1e-5


def test_bad_input_gets_one_clear_message(folders, tmp_path):
    llama = str(folders["llama"])
    with pytest.raises(ValueError, match="empty"):
        LC.long_attention(llama, "   ")
    with pytest.raises(ValueError, match="empty"):
        LC.long_attention(llama, [])
    with pytest.raises(ValueError, match="blocks must be"):
        LC.long_attention(llama, _ids(10), blocks=0)
    with pytest.raises(ValueError, match="Token ids must be in"):
        LC.long_attention(llama, [10_000])
    with pytest.raises(ValueError, match=r"4,097 tokens.*32,768 tokens \(MAX_MODEL_LONG_TOKENS\).*4,096 positions"):
        LC.long_attention(llama, _ids(4097))
    with pytest.raises(ValueError, match="not token ids"):
        LC.long_attention("random", [1, 2, 3])
    with pytest.raises(ValueError, match="MAX_LONG_TEXT_BYTES"):
        LC.long_attention(llama, "a " * limits.MAX_LONG_TEXT_BYTES)
    result = LC.long_attention(llama, _ids(20), blocks=4)
    with pytest.raises(ValueError, match="size must be a whole number from 1 to 128"):
        result.window(0, 0, 0, 0, 129)
    with pytest.raises(ValueError, match="head must be"):
        result.window(0, 4, 0, 0, 8)


def test_an_attention_that_is_not_q_dot_k_says_what_it_does(tmp_path):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    from tests.support.hfmodels import tokenizer

    torch.manual_seed(0)
    fast = tokenizer()
    model = Gemma2ForCausalLM(Gemma2Config(vocab_size=fast.vocab_size, hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                           head_dim=8, max_position_embeddings=64, attn_logit_softcapping=50.0,
                                           layer_types=["full_attention"]))
    model.save_pretrained(tmp_path / "gemma2")
    fast.save_pretrained(tmp_path / "gemma2")
    with pytest.raises(ValueError, match=r"not softmax\(q·k · scale\).*soft-capping"):
        LC.long_attention(str(tmp_path / "gemma2"), _ids(12))


MEASURE = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    import numpy as np
    from attnviz.analysis import longcontext as LC
    from tests.support import longmodels
    folder = longmodels.llama_shaped(Path(sys.argv[1]), positions=8192, width=64, heads=8, kv=2)
    ids = [int(x) for x in np.random.default_rng(0).integers(4, 60, size=8192)]
    LC.long_attention(str(folder), ids[:64], blocks=16)  # loaded and warm
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = LC.long_attention(str(folder), ids, blocks=256)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"grew": after - before, "heads": result.heads, "n": len(result.tokens)}))
""")


def test_memory_grows_with_n_not_n_squared(tmp_path):
    """At 8,192 tokens one layer's weights would be 8 heads × 8,192² × 4 B = 2 GiB; the whole run,
    both layers and the forward pass, must grow the process's peak by far less."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    one_layer = got["heads"] * got["n"] ** 2 * 4
    assert got["n"] == 8192 and got["grew"] < one_layer / 8, got  # under 256 MB


def test_an_encoder_is_read_without_a_mask_and_matches_its_weights(tmp_path):
    from transformers import AutoModel

    from tests.support.hfmodels import save

    folder, _m, _t = save(tmp_path, "roberta")
    ids = [0, *_ids(60, seed=3), 2]
    result = LC.long_attention(str(folder), ids, blocks=7, tile=16)  # tiles on both sides of the diagonal
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True)
    weights = torch.stack([a[0] for a in out.attentions]).double().numpy()
    ref = longmodels.dense_numbers(weights, 7, causal=False)
    assert not result.causal
    errors = _errors(result, ref)
    assert max(errors.values()) <= 1e-5, errors


def test_close_ups_without_the_kept_q_and_k_rerun_once_per_layer(folders, monkeypatch):
    """Where q and k of every layer are not kept, a close-up runs the model up to its layer once: further
    close-ups of that layer (a click moving the corner) reuse it, another layer runs again; the weights are the
    model's own either way."""
    ids = _ids(200, seed=4)
    monkeypatch.setattr(limits, "cache_bytes", lambda share: 0)  # nothing fits: every close-up reruns
    result = LC.long_attention(str(folders["llama"]), ids, blocks=8)
    assert result._kept is None and any("one layer's are kept" in n for n in result.notes)
    runs = []
    real = LC._one_layer
    monkeypatch.setattr(LC, "_one_layer", lambda *a: runs.append(a[2]) or real(*a))
    weights = longmodels.eager_weights(folders["llama"], ids)  # (layers, H, N, N)
    for layer, head, q0, k0 in ((1, 0, 100, 20), (1, 3, 150, 60), (0, 2, 10, 0), (0, 1, 40, 30)):
        close = result.window(layer, head, q0, k0, 32)
        assert np.abs(close - weights[layer, head, q0:q0 + 32, k0:k0 + 32]).max() <= 1e-5
    assert runs == [1, 0]
