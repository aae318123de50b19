"""The Verify checks judge as torch.testing.assert_close does: |difference| ≤ atol + rtol·|reference|,
with its defaults for the dtype compared."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from attnviz.analysis.verify import TOLERANCE, Check, verify, verify_result
from attnviz.run.config import AttentionConfig
from attnviz.views.modality import input_run
from attnviz.views.state import DEFAULTS


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _drawing() -> bytes:
    img = Image.new("RGB", (96, 96), "white")
    d = ImageDraw.Draw(img)
    d.ellipse((10, 10, 50, 50), fill=(220, 20, 20))
    d.rectangle((55, 50, 90, 88), fill=(20, 40, 220))
    return _png(img)


def _noise(side: int) -> bytes:
    rng = np.random.default_rng(0)
    return _png(Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)))


def _photograph(side: int) -> bytes:
    """Smooth light and shade with grain, as a photograph has."""
    y, x = np.mgrid[0:side, 0:side] / side
    rng = np.random.default_rng(1)
    rgb = np.stack([200 * x + 40, 150 * np.sin(6 * y) + 100, 120 * x * y + 60], -1) + rng.normal(0, 8, (side, side, 3))
    return _png(Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)))


def test_the_tolerance_is_assert_closes_own_for_each_dtype():
    """The same pairs pass or fail here as in torch.testing.assert_close with its defaults."""
    for dtype, (rtol, atol) in TOLERANCE.items():
        ref = torch.tensor([100.0, 0.0, 1.0], dtype=dtype)
        for delta in (0.9, 1.1):
            ours = ref + delta * (atol + rtol * ref.abs())
            worst = float(((ours - ref).abs() / (atol + rtol * ref.abs())).max())
            try:
                torch.testing.assert_close(ours, ref)
                closes = True
            except AssertionError:
                closes = False
            assert Check("x", 0.0, worst, rtol, atol).passed is closes is (delta < 1), (dtype, delta)


@pytest.mark.parametrize("name, data", [("a drawing", _drawing()), ("noise at the size bound", _noise(256)),
                                        ("a photograph at the size bound", _photograph(256)),
                                        ("a small photograph", _photograph(96))])
def test_pictures_of_every_kind_pass_with_and_without_projections(name, data):
    """A 96 × 96 drawing failed the old absolute threshold every time (1.2e-5 off on outputs that are
    not small): a tolerance relative to the values' scale passes every honest run."""
    for projections in (False, True):
        state = DEFAULTS.with_(input_projections=projections)
        _inp, result, _image = input_run("image-patches", state, data)
        v = verify_result(result)
        assert v.passed, (name, projections, [(c.name, c.max_abs_diff, c.worst) for c in v.checks])


def test_a_real_difference_still_fails(monkeypatch):
    """A reference 1e-4 off (relative) on every head output is beyond the tolerance: FAIL, shown."""
    import attnviz.analysis.verify as V

    sdpa = V.F.scaled_dot_product_attention
    monkeypatch.setattr(V.F, "scaled_dot_product_attention", lambda *a, **k: sdpa(*a, **k) * (1 + 1e-4) + 1e-4)
    v = verify(AttentionConfig(text="the cat sat on the mat", num_heads=2, d_model=8))
    by_name = {c.name: c for c in v.checks}
    assert not v.passed and not by_name["head outputs vs F.scaled_dot_product_attention"].passed
    assert by_name["weights vs nn.MultiheadAttention"].passed


def test_verify_and_gradients_read_the_pages_shared_run(monkeypatch):
    """The Verify and Gradients pages read the run the pages show (the shared results): verifying in
    float32 runs attnviz's layer no more (it ran it once), float64 once more in double precision,
    and the gradients once more with autograd, on the very inputs of the shared run."""
    from attnviz.analysis.gradients import token_gradients
    from attnviz.core.multihead import MultiHeadAttention
    from attnviz.run.run import RESULTS, shared_result

    calls, real = [], MultiHeadAttention.steps
    monkeypatch.setattr(MultiHeadAttention, "steps", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    RESULTS.clear()
    config = AttentionConfig(mask="causal")
    shared_result(config)
    assert len(calls) == 1
    assert verify(config).passed and len(calls) == 1
    assert verify(config, float64=True).passed and len(calls) == 2
    token_gradients(config, 0, 2)
    assert len(calls) == 3
    verify(config)  # and a page's rerun: nothing
    assert len(calls) == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_a_run_on_cuda_verifies_against_pytorch_there_from_its_own_steps():
    """A CUDA run's steps come back to the CPU; verifying moves them to the device again and compares
    them with PyTorch's layers run there, in float32 and in float64."""
    config = AttentionConfig(text="I love AI\nThe cat sat on the mat", mask="causal", num_heads=8, device="cuda:0")
    for f64 in (False, True):
        v = verify(config, float64=f64)
        assert v.passed and v.device.startswith("cuda"), [(c.name, c.worst) for c in v.checks]
