"""attnviz.inputs.handover: every shape and container of attention normalised to one checked record, and
bad input refused with what is wrong."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from attnviz import limits
from attnviz import notebook as nb
from tests.support.weights import LAYERS, TOKENS, H, L, W, weights


def containers():
    t = torch.from_numpy(W)
    batch = np.stack([W, weights(seed=1)], axis=1)  # (layers, N=2, H, L, S), as torch.stack(outputs.attentions)
    return {
        "numpy 4-d": (W, 1), "torch 4-d": (t, 1), "list 4-d": (W.tolist(), 1),
        "torch float64": (t.double(), 1),
        "numpy 5-d": (batch, 2), "torch 5-d": (torch.from_numpy(batch), 2), "list 5-d": (batch.tolist(), 2),
        "tuple of torch (1, H, L, S)": (tuple(t[i].unsqueeze(0) for i in range(LAYERS)), 1),
        "list of numpy (N, H, L, S)": ([batch[i] for i in range(LAYERS)], 2),
        "tuple of torch (H, L, S)": (tuple(t[i] for i in range(LAYERS)), 1),
        "list of numpy (L, S) per head, per layer": ([[W[i, h] for h in range(H)] for i in range(LAYERS)], 1),
    }


def bad_inputs():
    t = torch.from_numpy(W)
    ragged = (t[0].unsqueeze(0), torch.softmax(torch.randn(1, H, 5, 5), -1))
    nan, inf, neg = W.copy(), W.copy(), W.copy()
    nan[1, 2, 3, 0] = np.nan
    inf[0, 1, 0, 0] = np.inf
    neg[0, 0, 1, 2] = -0.25
    return {
        "tokens length": ((W, TOKENS[:3]), r"3 tokens do not match the attention's L \(queries\) = 4"),
        "source tokens length": ((weights(q=2, k=3), ["a", "b"], ["x"]),
                                 r"1 source_tokens do not match .*S \(keys\) = 3"),
        "keys without tokens": ((weights(q=2, k=3), ["a", "b"]), "pass source_tokens"),
        "tokens a string": ((W, "the cat sat down"), "list of strings"),
        "ragged layers": ((ragged,), r"ragged: layer 0 has shape \(1, 3, 4, 4\) but layer 1 has \(1, 3, 5, 5\)"),
        "ragged lists": (([[0.5, 0.5], [1.0]],), "ragged"),
        "NaN": ((nan,), r"contains NaN .*layer 1, head 2, query 3, key 0"),
        "inf": ((inf,), r"contains inf .*layer 0, head 1, query 0, key 0"),
        "negative": ((neg,), r"negative weights .*signed=True"),
        "one dimension": ((W[0, 0, 0],), r"1 dimensions .*expected 2 to 5"),
        "six dimensions": ((W[None, None],), r"6 dimensions"),
        "per-layer 5-d": ((tuple(t[None, None]),), r"each layer must be \(N, H, L, S\)"),
        "not numbers": (([["a", "b"], ["c", "d"]],), "must hold numbers"),
        "a bool mask": ((torch.ones(4, 4, dtype=torch.bool),), "real numbers"),
        "empty": ((np.zeros((0, 4)),), "empty"),
    }


@pytest.mark.parametrize("kind", list(containers()))
def test_every_shape_and_container_normalises_to_the_same_weights(kind):
    value, batch = containers()[kind]
    a = nb.normalise(value, TOKENS)
    assert a.weights.dtype == np.float32 and a.weights.shape == (LAYERS, H, L, L)
    np.testing.assert_array_equal(a.weights, W)
    assert a.batch == batch and a.tokens == TOKENS and a.source_tokens == TOKENS and a.normalised


def test_two_and_three_dimensions_are_one_layer_and_one_head():
    np.testing.assert_array_equal(nb.normalise(W[0, 1]).weights, W[:1, 1:2])  # (L, S)
    np.testing.assert_array_equal(nb.normalise(torch.from_numpy(W[1])).weights, W[1:])  # (H, L, S)
    assert nb.normalise(W[0, 0]).tokens == ["0", "1", "2", "3"]


def test_the_record_is_a_copy_and_cross_attention_keeps_its_key_tokens():
    mine = W.copy()
    a = nb.normalise(mine, TOKENS)
    mine[:] = 0
    np.testing.assert_array_equal(a.weights, W)
    c = nb.normalise(weights(q=2, k=3), ["a", "b"], source_tokens=["x", "y", "z"])
    assert (c.L, c.S, c.tokens, c.source_tokens, c.is_self) == (2, 3, ["a", "b"], ["x", "y", "z"], False)


@pytest.mark.parametrize("case", list(bad_inputs()))
def test_each_bad_input_says_what_is_wrong(case):
    args, message = bad_inputs()[case]
    with pytest.raises(ValueError, match=message):
        nb.normalise(*args[:2], **({"source_tokens": args[2]} if len(args) > 2 else {}))


def test_signed_values_are_allowed_when_asked_for_and_never_warn():
    neg = W - 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = nb.normalise(neg, TOKENS, signed=True)
    assert a.signed and not a.normalised
    np.testing.assert_allclose(a.weights, neg)


def test_sizes_over_the_bounds_are_refused_from_the_shape(monkeypatch):
    monkeypatch.setattr(limits, "MAX_TOKENS", 3)
    with pytest.raises(ValueError, match=r"4 tokens along L \(queries\), over the bound of 3 tokens"):
        nb.normalise(W)
    with pytest.raises(ValueError, match=r"4 tokens along S \(keys\)"):
        nb.normalise(weights(q=2, k=4))
    monkeypatch.setattr(limits, "MAX_TOKENS", 2048)
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_MB", "1")
    huge = torch.zeros(1).expand(64, 16, 64, 64)  # 16 MB as float32, but never allocated: a view of one number
    with pytest.raises(ValueError, match=r"\(64, 16, 64, 64\) needs 16.0 MB as float32, over the memory budget of 1.0"):
        nb.normalise(huge)
    with pytest.raises(ValueError, match="over the memory budget"):
        nb.normalise(tuple(huge[i].unsqueeze(0) for i in range(64)))


def test_rows_that_do_not_sum_to_one_warn_and_fully_masked_rows_do_not():
    with pytest.warns(UserWarning, match=r"rows do not sum to 1 \(layer 0, head 0, query 0 sums to 0.5\).*dropout"):
        a = nb.normalise(W * 0.5, TOKENS)
    assert not a.normalised
    masked = W.copy()
    masked[:, :, 2] = 0.0  # a query that may see no key: all-zero weights, a defined case
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nb.normalise(masked, TOKENS).normalised
