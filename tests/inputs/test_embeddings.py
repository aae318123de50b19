import subprocess
import sys

import torch

from attnviz import embed
from attnviz.inputs.embeddings import char_ngrams, sinusoidal_positions


def cos(a, b):
    return torch.nn.functional.cosine_similarity(a, b, dim=0).item()


def test_shape_and_dtype():
    x = embed(["I", "love", "AI"], 48)
    assert x.shape == (3, 48) and x.dtype == torch.float32


def test_shared_ngrams_land_near_each_other():
    v = embed(["attend", "attention", "banana", "zebra"], 256, positional=False)
    assert cos(v[0], v[1]) > 0.3
    assert abs(cos(v[0], v[2])) < 0.2 and abs(cos(v[0], v[3])) < 0.2


def test_same_token_same_vector_without_positions_and_different_with():
    v = embed(["the", "cat", "the"], 32, positional=False)
    assert torch.equal(v[0], v[2])
    p = embed(["the", "cat", "the"], 32)
    assert not torch.equal(p[0], p[2])
    assert torch.allclose(p - v, sinusoidal_positions(3, 32), atol=1e-6)


def test_stable_across_processes():
    """Python's hash() is salted per process; ours must not be."""
    code = "from attnviz import embed; print(embed(['héllo', '爱'], 16).sum().item())"
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONHASHSEED": str(seed), "PATH": ""}, check=True).stdout
        for seed in (1, 2)
    }
    assert len(outs) == 1
    assert outs.pop().strip() == str(embed(["héllo", "爱"], 16).sum().item())


def test_ngrams():
    assert char_ngrams("AI")[:2] == ["<ai", "ai>"]
    assert "<AI>" in char_ngrams("AI")


def test_positional_formula():
    pe = sinusoidal_positions(5, 6)
    assert torch.allclose(pe[3, 2], torch.tensor(torch.sin(torch.tensor(3 / 10000 ** (2 / 6))).item()))
    assert torch.allclose(pe[3, 3], torch.tensor(torch.cos(torch.tensor(3 / 10000 ** (2 / 6))).item()))


def test_a_padded_batch_is_each_lines_embedding_bit_for_bit_then_zeros():
    import pytest

    from attnviz.inputs.embeddings import embed_padded

    seqs = [["the", "cat", "sat"], ["我", "爱", "人", "工", "智", "能"], ["a"]]
    for positional in (True, False):
        x = embed_padded(seqs, 8, 64, positional)  # (N, L, E)
        assert x.shape == (3, 8, 64) and x.dtype == torch.float32
        pe = sinusoidal_positions(8, 64) if positional else torch.zeros(8, 64)
        for n, toks in enumerate(seqs):
            row = torch.zeros(8, 64)
            row[: len(toks)] = embed(toks, 64, positional=False)
            assert torch.equal(x[n], row + pe)  # the same float32 numbers, not just close
    with pytest.raises(ValueError, match="no tokens"):
        embed_padded([["a"], []], 2, 8, True)
