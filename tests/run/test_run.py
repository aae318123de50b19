import pytest
import torch

from attnviz import AttentionConfig, available_devices, compute, resolve_device
from attnviz.inputs.record import PAD
from attnviz.limits import head_choices


def test_default_config_runs():
    r = compute(AttentionConfig())
    N, H, L, S = r.weights.shape
    assert (N, H) == (1, 4) and L == S == len(r.tokens[0])
    assert r.output.shape == (1, L, 64)
    assert r.device == "cpu" and set(r.timings_ms) == {"tokenize", "embed", "attention"}
    assert r.shapes()["Q"] == (1, 4, L, 16)


def test_a_results_settings_are_its_configs_fields_as_plain_values():
    from dataclasses import asdict

    cfg = AttentionConfig(text="I love AI", num_heads=2, mask="causal", seed=3, dropout=0.1)
    settings = compute(cfg).settings
    assert settings == asdict(cfg)  # the shallow dict the run makes is asdict's
    # ...which holds only while every field is a plain, immutable value (a list would be shared)
    assert {type(v) for v in settings.values()} <= {str, int, float, bool}


def test_same_config_same_bits_and_seed_matters():
    cfg = AttentionConfig(text="I love AI\n我爱人工智能", mask="padding", dropout=0.2, seed=7)
    a, b = compute(cfg), compute(cfg)
    assert torch.equal(a.weights, b.weights) and torch.equal(a.output, b.output)
    c = compute(cfg.with_(seed=8))
    assert not torch.equal(a.weights, c.weights)


def test_a_shared_random_layer_gives_the_bits_and_the_dropout_of_a_fresh_draw():
    from attnviz.core.multihead import MultiHeadAttention
    from attnviz.models.random import LAYERS

    cfg = AttentionConfig(text="I love AI\nthe cat sat", mask="causal", num_heads=2, dropout=0.3, seed=11)
    LAYERS.clear()
    drawn = compute(cfg)  # draws the layer
    shared = compute(cfg)  # reuses it: the generator must go on from where drawing left it
    assert LAYERS.hits >= 1 and shared.model is drawn.model
    assert torch.equal(drawn.weights, shared.weights) and torch.equal(drawn.output, shared.output)
    # By hand, as the layer always ran: one generator draws the weights, then the dropout.
    g = torch.Generator().manual_seed(11)
    by_hand = MultiHeadAttention(64, 2, generator=g)
    assert torch.equal(by_hand.in_proj_weight, drawn.model.in_proj_weight)
    with torch.no_grad():
        steps = by_hand.steps(drawn.embeddings, None, None, drawn.mask, dropout_p=0.3, generator=g)
    assert torch.equal(steps.weights, drawn.weights) and torch.equal(steps.weights, shared.weights)
    off = compute(cfg.with_(projections=False))  # another key: its own layer, the identity
    assert off.model is not drawn.model and torch.equal(off.model.out_proj.weight, torch.eye(64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_a_run_on_another_device_leaves_the_shared_layer_on_the_cpu():
    from attnviz.models.random import LAYERS

    cfg = AttentionConfig(text="I love AI", num_heads=2, seed=12)
    LAYERS.clear()
    cpu = compute(cfg)
    compute(cfg.with_(device="cuda"))
    assert cpu.model.in_proj_weight.device.type == "cpu"
    assert torch.equal(compute(cfg).weights, cpu.weights)


def test_padded_batch_labels_and_mask():
    r = compute(AttentionConfig(text="I love AI\n我爱人工智能", mask="causal"))
    assert r.tokens[0] == ["I", "love", "AI", PAD, PAD, PAD]
    assert r.lengths == [3, 6]
    w = r.weights[0]  # (H, L, S)
    assert (w[:, :, 3:] == 0).all()  # pads never attended when a mask is on
    assert (w.triu(1) == 0).all()


def test_pad_to_and_mask_none_warns_about_pads():
    r = compute(AttentionConfig(text="a b", pad_to=5, mask="none"))
    assert r.tokens[0] == ["a", "b", PAD, PAD, PAD]
    assert any("padding" in n for n in r.notes)
    assert (r.weights[0, :, :, 2:] > 0).all()  # literally no mask


def test_cross_attention_shapes():
    r = compute(AttentionConfig(text="I love AI", source="我爱人工智能", num_heads=2))
    assert r.weights.shape == (1, 2, 3, 6) and r.is_cross
    assert r.source_tokens[0] == ["我", "爱", "人", "工", "智", "能"]


def test_window_covering_everything_is_noted():
    r = compute(AttentionConfig(text="a b c", mask="window", window=10))
    assert r.notes and (r.weights > 0).all()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"text": "  \n "}, "empty"),
        ({"num_heads": 3}, "3 heads do not divide d_model=64"),
        ({"mask": "diag"}, "mask must be one of"),
        ({"window": -1}, "window"),
        ({"dropout": 1.5}, "dropout must be between"),
        ({"device": "cuda:7"}, "not available on this machine; available: cpu"),
        ({"text": "w " * 2100}, "limit is 2048"),
        ({"tokenize_mode": "bpe"}, "tokenize must be one of"),
        ({"pad_to": 9999}, "pad_to"),
    ],
)
def test_bad_settings_raise_clear_errors(change, message):
    with pytest.raises(ValueError, match=message):
        compute(AttentionConfig().with_(**change))


def test_devices():
    names = [d.name for d in available_devices()]
    assert names[0] == "cpu"
    assert resolve_device("CPU") == torch.device("cpu")
    with pytest.raises(ValueError, match="available: cpu"):
        resolve_device("tpu")
    assert head_choices(12) == [1, 2, 3, 4, 6, 12]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_matches_cpu():
    cfg = AttentionConfig(text="I love AI\nThe cat sat on the mat", mask="causal", num_heads=8, d_model=64)
    cpu, gpu = compute(cfg), compute(cfg.with_(device="cuda"))
    assert (cpu.weights - gpu.weights).abs().max() <= 1e-5
    assert (cpu.output - gpu.output).abs().max() <= 1e-5
