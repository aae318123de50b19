import pytest
import torch

from attnviz.core.masks import (
    build_mask,
    causal_mask,
    from_torch_mha_mask,
    local_window_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_torch_mha_mask,
)


def test_causal():
    m = causal_mask(3)
    assert m.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 4).tolist() == [[True, False, False, False], [True, True, False, False]]


def test_window_band():
    m = local_window_mask(5, 1)
    for i in range(5):
        for j in range(5):
            assert m[i, j].item() == (abs(i - j) <= 1)
    with pytest.raises(ValueError, match="window"):
        local_window_mask(3, -1)


def test_padding_shape_and_values():
    m = padding_mask([5, 3], 5)
    assert m.shape == (2, 1, 1, 5)
    assert m[1, 0, 0].tolist() == [True, True, True, False, False]
    with pytest.raises(ValueError):
        padding_mask([6], 5)


def test_compose_with_and():
    m = causal_mask(4) & local_window_mask(4, 1) & padding_mask([4, 2], 4)
    assert m.shape == (2, 1, 4, 4)
    assert m[1, 0, 3].tolist() == [False, False, False, False]  # row 3 of seq 1: fully masked
    assert m[0, 0, 3].tolist() == [False, False, True, True]


def test_build_mask_kinds():
    assert build_mask("none", 3) is None
    assert build_mask("padding", 3).all()
    assert torch.equal(build_mask("causal+window", 4, window=1), causal_mask(4) & local_window_mask(4, 1))
    with pytest.raises(ValueError, match="Unknown mask"):
        build_mask("diagonal", 3)


def test_torch_convention_roundtrip():
    m = causal_mask(3)
    assert torch.equal(to_torch_mha_mask(m), ~m)
    assert torch.equal(from_torch_mha_mask(to_torch_mha_mask(m)), m)
    f = to_additive(m)
    assert torch.equal(to_torch_mha_mask(f), f)
    assert f[0, 1].item() == float("-inf") and f[1, 0].item() == 0.0
    assert to_key_padding_mask([2], 3).tolist() == [[False, False, True]]
