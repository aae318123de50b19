"""The peak of live tensor bytes (attnviz.analysis.tensorbytes): a hand-made pattern, and the count on meta copies
against the count of a CPU run."""

import pytest
import torch

from attnviz.analysis import longseq as LS
from attnviz.analysis import tensorbytes as TB


def test_the_live_bytes_of_a_hand_made_pattern_on_the_cpu_and_on_shapes():
    x = torch.ones(1000)  # the input is not counted: the path did not create it
    path = lambda x: ((x + 1) * 2).sum()  # noqa: E731 - x + 1 (4,000 B) is alive while * 2 makes 4,000 B more
    for shapes_only in (False, True):
        assert TB.peak_tensor_bytes(path, x, shapes_only=shapes_only) == 8000


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L, H, D, block_q, block_k", [(1, 1, 4, 64, 64), (100, 3, 5, 7, 64), (513, 2, 8, 32, 16)])
def test_counting_on_shapes_gives_the_cpu_runs_count(causal, L, H, D, block_q, block_k):
    """The sweep counts the naive and tiled paths on meta copies where their operators are large: each operator
    makes the same outputs there, so the peak is the CPU run's, byte for byte, at lengths off the blocks too."""
    from attnviz.core.efficient import tiled_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D, generator=gen) for _ in range(3))
    paths = [lambda q, k, v: LS.naive(q, k, v, causal),
             lambda q, k, v: tiled_attention(q, k, v, block_q=block_q, block_k=block_k, is_causal=causal)]
    with torch.no_grad():
        for path in paths:
            on_cpu = TB.peak_tensor_bytes(path, q, k, v)
            assert on_cpu >= H * L * D * 4  # at least the output
            assert TB.peak_tensor_bytes(path, q, k, v, shapes_only=True) == on_cpu
