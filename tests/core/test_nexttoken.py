"""attnviz.core.nexttoken.top_tokens: the most likely next tokens, checked against a softmax written out by hand."""

import math

import torch

from attnviz.core.nexttoken import top_tokens


def test_the_top_tokens_are_the_largest_probabilities_in_order_with_their_spelling():
    logits = torch.tensor([0.5, 3.0, -1.0, 2.0, 3.0])
    z = sum(math.exp(v) for v in logits.tolist())
    got = top_tokens(logits, lambda ids: [f"t{i}" for i in ids], k=3)
    assert [t for t, _p in got] == ["t1", "t4", "t3"]  # a tie broken as torch.topk breaks it: the lower index first
    for (_t, p), v in zip(got, (3.0, 3.0, 2.0), strict=True):
        assert abs(p - math.exp(v) / z) < 1e-12


def test_k_past_the_vocabulary_gives_every_token():
    got = top_tokens(torch.zeros(3), lambda ids: [str(i) for i in ids], k=10)
    assert len(got) == 3 and abs(sum(p for _t, p in got) - 1) < 1e-12
