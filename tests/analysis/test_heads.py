"""Head analysis on hand-made weights whose answers are known."""

import math

import pytest
import torch

from attnviz.analysis.heads import diagonal_score, head_stats, mean_distance, rollout, row_entropy


def shifted(n: int, offset: int) -> torch.Tensor:
    """Each row i looks only at key i + offset (clamped into the sequence)."""
    w = torch.zeros(n, n)
    for i in range(n):
        w[i, min(max(i + offset, 0), n - 1)] = 1.0
    return w


def test_entropy_is_zero_for_one_key_and_log_n_for_all():
    assert torch.allclose(row_entropy(torch.eye(4)), torch.zeros(4))
    assert torch.allclose(row_entropy(torch.full((3, 5), 0.2)), torch.full((3,), math.log(5)))
    assert row_entropy(torch.zeros(1, 3)).item() == 0  # a fully masked row: 0·log 0 = 0


def test_mean_distance_counts_positions():
    assert torch.allclose(mean_distance(torch.eye(4)), torch.zeros(4))
    assert torch.allclose(mean_distance(shifted(5, -1))[1:], torch.ones(4))
    uniform = torch.full((3, 3), 1 / 3)
    assert torch.allclose(mean_distance(uniform), torch.tensor([1.0, 2 / 3, 1.0]))


def test_pattern_scores_find_the_pattern_they_name():
    stats = head_stats(torch.stack([shifted(6, -1), shifted(6, 1), torch.eye(6)])[:, None, None].transpose(1, 2)
                       .reshape(3, 1, 1, 6, 6), 0, 6, ["[CLS]", "a", "b", "c", "d", "[SEP]"])
    prev, nxt, own = stats
    assert prev.previous == pytest.approx(1.0) and prev.next == 0 and prev.self == pytest.approx(1 / 6)
    assert nxt.next == pytest.approx(1.0) and nxt.previous == 0
    assert own.self == pytest.approx(1.0) and own.entropy == pytest.approx(0.0) and own.distance == 0
    assert own.first == pytest.approx(1 / 6) and own.sep == pytest.approx(1 / 6)


def test_first_and_sep_scores():
    w = torch.zeros(4, 4)
    w[:, 0] = 0.75
    w[:, 3] = 0.25
    (s,) = head_stats(w.view(1, 1, 1, 4, 4), 0, 4, ["[CLS]", "x", "y", "[SEP]"])
    assert s.first == pytest.approx(0.75) and s.sep == pytest.approx(0.25)


def test_padding_is_left_out():
    w = torch.zeros(1, 1, 1, 5, 5)
    w[..., :3, :3] = torch.eye(3)
    w[..., 3:, :] = 0.2  # pad rows: not counted
    (s,) = head_stats(w, 0, 3, ["a", "b", "c", "[PAD]", "[PAD]"])
    assert s.self == pytest.approx(1.0) and s.entropy == pytest.approx(0.0)


def test_diagonal_score_of_a_single_token():
    assert diagonal_score(torch.ones(1, 1), -1).item() == 0


def test_rollout_of_two_layers_by_hand():
    a1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # layer 1: both tokens read token 0
    a2 = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # layer 2: both read token 1
    # Â1 = rownorm(½A1 + ½I) = [[1, 0], [½, ½]];  Â2 = [[½, ½], [0, 1]];  R = Â2 Â1
    expected = torch.tensor([[0.75, 0.25], [0.5, 0.5]], dtype=torch.float64)
    r = rollout(torch.stack([a1.unsqueeze(0), a2.unsqueeze(0)]))  # (layers=2, H=1, 2, 2)
    assert torch.allclose(r, expected)
    assert torch.allclose(r.sum(-1), torch.ones(2, dtype=torch.float64))
    # heads are averaged first: heads A1 and I give mean [[1, 0], [½, ½]], then
    # Â = ½·mean + ½·I = [[1, 0], [¼, ¾]]
    two = torch.stack([torch.stack([a1, torch.eye(2)])])
    assert torch.allclose(rollout(two), torch.tensor([[1.0, 0.0], [0.25, 0.75]], dtype=torch.float64))


def test_the_strongest_link_of_every_head_at_once_is_each_heads_own_then_the_first_largest():
    import numpy as np

    from attnviz.analysis.describe import strongest, strongest_of_heads

    rng = np.random.default_rng(0)
    for t in range(400):
        H, L, S = (int(x) for x in rng.integers(1, 9, 3))
        w = rng.random((H, L, S)).astype(np.float32)
        if t % 3 == 0:
            w[w < 0.7] = 0  # rows that see one key, or none
        if t % 5 == 0:
            w = np.round(w, 1)  # ties, within a head and between heads
        if t % 7 == 0:
            w[:, :, 1:] = 0  # every row sees one key: then every row counts
        lengths = (int(rng.integers(1, L + 1)), int(rng.integers(1, S + 1)))
        one_by_one = max((strongest(w[h], lengths) + (h,) for h in range(H)), key=lambda x: x[2])
        assert strongest_of_heads(w, lengths) == one_by_one
