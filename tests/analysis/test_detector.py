"""``attnviz.detect_head`` against TransformerLens's own ``head_detector.detect_head``, run on the
same model (TransformerLens's bridge over a tiny GPT-2 folder), and on hand-made patterns."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.detector import HEAD_NAMES

SEQ = "the cat sat on the mat the cat sat on the mat"  # repeated: duplicate and induction defined


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    from transformer_lens.model_bridge import TransformerBridge

    from tests.support.hfmodels import save

    folder, _model, _fast = save(tmp_path_factory.mktemp("detector"), "gpt2")
    return TransformerBridge.boot_transformers(str(folder))


@pytest.mark.parametrize("name", HEAD_NAMES)
@pytest.mark.parametrize("error_measure", ["mul", "abs"])
@pytest.mark.parametrize("exclude_bos", [False, True])
@pytest.mark.parametrize("exclude_current_token", [False, True])
def test_the_same_numbers_as_transformer_lens(bridge, name, error_measure, exclude_bos, exclude_current_token):
    from transformer_lens.head_detector import detect_head as reference

    options = {"exclude_bos": exclude_bos, "exclude_current_token": exclude_current_token,
               "error_measure": error_measure}
    want = reference(bridge, SEQ, name, **options)  # runs its own cache (its "mul" edits that cache in place)
    _logits, cache = bridge.run_with_cache(bridge.to_tokens(SEQ))
    got = attnviz.detect_head(cache, bridge.to_str_tokens(SEQ), name, **options)
    assert got.shape == want.shape == (2, 4) and got.dtype == torch.float32
    assert torch.equal(got, want.to(torch.float32)), (got, want)


def test_a_custom_pattern_and_a_subset_of_heads(bridge):
    from transformer_lens.head_detector import detect_head as reference

    L = len(bridge.to_str_tokens(SEQ))
    pattern = torch.tril(torch.ones(L, L))
    pattern[:, 1:] = 0  # everything on the first token
    heads = [(0, 1), (1, 3)]
    want = reference(bridge, SEQ, pattern, heads=heads)
    _logits, cache = bridge.run_with_cache(bridge.to_tokens(SEQ))
    got = attnviz.detect_head(cache, bridge.to_str_tokens(SEQ), pattern.numpy(), heads={0: [1], 1: [3]})
    assert torch.equal(got, want.to(torch.float32))
    assert (got == -1).sum() == 6  # the heads left out


def _shifted(L: int, k: int) -> np.ndarray:
    w = np.zeros((L, L))
    for i in range(L):
        w[i, max(i - k, 0)] = 1.0
    return w


def test_hand_made_heads_score_one_on_their_own_pattern():
    toks = ["BOS", "a", "b", "c", "a", "b", "c"]
    prev = _shifted(7, 1)[None, None]
    assert attnviz.detect_head(prev, toks, "previous_token_head").item() == pytest.approx(6 / 7)  # row 0: BOS itself
    assert attnviz.detect_head(prev, toks, "previous_token_head", error_measure="abs").item() == pytest.approx(
        1 - round(1 / 7, 3))  # |A − D| sums to 1, in row 0 (BOS on itself, where D's row is empty): 1/7 a row
    induction = np.zeros((7, 7))
    induction[:4, 0] = 1
    for i in range(4, 7):
        induction[i, i - 2] = 1  # "a b c a": the query a attends to b, the token after its earlier copy
    s = attnviz.detect_head(induction[None, None], toks, "induction_head")
    assert s.item() == pytest.approx(3 / 7)
    assert attnviz.detect_head(induction[None, None], toks, "induction_head", exclude_bos=True).item() == 1.0


def test_its_warnings_and_errors_are_transformer_lenss(caplog):
    w = np.tril(np.ones((4, 4)))
    w = (w / w.sum(-1, keepdims=True))[None, None]
    toks = ["a", "b", "a", "b"]
    with caplog.at_level(logging.WARNING):
        attnviz.detect_head(w, toks, np.tril(np.full((4, 4), 0.5)))
    assert "Using detection pattern with values other than 0 or 1 with error_measure 'mul'" in caplog.text
    with pytest.raises(ValueError, match=re.escape("detection_pattern must be a Tensor or one of head names")):
        attnviz.detect_head(w, toks, "copying_head")
    with pytest.raises(ValueError, match="Invalid error_measure=max"):
        attnviz.detect_head(w, toks, "induction_head", error_measure="max")
    with pytest.raises(ValueError, match=re.escape("sequence_length=4; got detection pattern of shape (4, 4)")):
        attnviz.detect_head(w, toks, np.ones((4, 4)))  # not lower triangular
    with pytest.raises(ValueError, match="weight above the diagonal"):
        attnviz.detect_head(np.full((1, 1, 4, 4), 0.25), toks, "previous_token_head", error_measure="abs")
    with pytest.raises(ValueError, match="pass the tokens"):
        attnviz.detect_head(w, None, "induction_head")
    with pytest.raises(ValueError, match="non-empty"):
        attnviz.detect_head(np.ones((1, 1, 1, 1)), ["a"], "previous_token_head")


def test_the_callers_attention_is_left_as_it_was():
    w = torch.softmax(torch.randn(2, 3, 5, 5).tril().masked_fill(torch.ones(5, 5).triu(1).bool(), -1e9), -1)
    before = w.clone()
    attnviz.detect_head(w, list("abcab"), "duplicate_token_head", exclude_bos=True, exclude_current_token=True)
    assert torch.equal(w, before)
