"""Deterministic, vocabulary-free token embeddings.

A token's vector is built from its characters the way fastText builds vectors for
unseen words: the token is wrapped as ``<token>``, cut into character n-grams
(n = 3..5) plus the whole wrapped token, and each piece gets a pseudo-random
normal vector derived from a SHAKE-256 hash of its UTF-8 bytes. The token's vector
is the sum of its pieces' vectors divided by sqrt(count), so every element is
~N(0, 1) and tokens that share many n-grams (``attend``, ``attention``) point in
similar directions.

SHAKE-256 is specified by FIPS 202, so the same token gives bit-identical vectors in
every process, on every machine and in every Python version (Python's ``hash()``
is salted per process and must never be used here).

The vectors of the tokens and n-grams seen, and the position tables, are kept for the next run (a class types
the same words again and again) in the byte-bounded cache's ``lookups`` share (``LOOKUPS``,
``limits.CACHE_SHARES``), the least recently used leaving first: a server keeps them within ``ATTNVIZ_CACHE_MB``,
whatever texts it is sent.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import torch

from attnviz import cache

NGRAM_SIZES = (3, 4, 5)
# Each normal uses two uint32 from the hash stream (Box-Muller).
_U32 = np.dtype("<u4")
# Shared with the other tables looked up on every run (a text's tokens, labels' widths, the sessions' settings).
LOOKUPS = cache.named("lookups")


def char_ngrams(token: str, sizes: tuple[int, ...] = NGRAM_SIZES) -> list[str]:
    """The character n-grams of ``<token>`` plus the wrapped token itself.

    The whole token is always included, so a short token (``I``) still has a piece.
    """
    wrapped = f"<{token.lower()}>"
    grams = [wrapped[i : i + n] for n in sizes for i in range(len(wrapped) - n + 1)]
    exact = f"<{token}>"  # case-sensitive whole token: "The" and "the" share n-grams only
    return grams + [exact] if exact not in grams else grams


def _piece_vector(piece: str, dim: int) -> np.ndarray:
    """A standard-normal vector of length ``dim`` determined by ``piece`` alone (kept, read-only; the piece
    beside it, so that the cache counts the text its key holds: a whole token's piece can be long)."""
    return LOOKUPS.get_or_compute(("piece", piece, dim), lambda: (piece, _new_piece_vector(piece, dim)))[1]


def _new_piece_vector(piece: str, dim: int) -> np.ndarray:
    raw = hashlib.shake_256(piece.encode("utf-8")).digest(8 * dim)
    u = np.frombuffer(raw, dtype=_U32).astype(np.float64)
    u1 = (u[:dim] + 1.0) / 4294967297.0  # in (0, 1], so log() is finite
    u2 = u[dim:] / 4294967296.0
    vec = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
    vec.setflags(write=False)
    return vec


def token_vector(token: str, dim: int) -> np.ndarray:
    """The embedding of one token (float64, length ``dim``), before positions; kept (read-only, with the token,
    as its pieces are), since a class types the same words again and again."""
    return LOOKUPS.get_or_compute(("token", token, dim), lambda: (token, _new_token_vector(token, dim)))[1]


def _new_token_vector(token: str, dim: int) -> np.ndarray:
    pieces = char_ngrams(token)
    total = np.zeros(dim)
    for p in pieces:
        total += _piece_vector(p, dim)
    total /= math.sqrt(len(pieces))
    total.setflags(write=False)
    return total


def _vectors(seqs: list[list[str]], dim: int) -> dict[str, np.ndarray]:
    """Each distinct token's vector, looked up once: a line repeats its words, and each look-up takes the
    shared cache's lock."""
    return {t: token_vector(t, dim) for t in {t for toks in seqs for t in toks}}


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """Sinusoidal positional encoding from "Attention Is All You Need": (L, E), a new
    tensor (``_positions`` keeps the shared one)."""
    return _positions(length, dim).clone()


def _positions(length: int, dim: int) -> torch.Tensor:
    """The shared (read-only) table of ``_new_positions``, kept for the next run of that length and width."""
    return LOOKUPS.get_or_compute(("positions", length, dim), lambda: _new_positions(length, dim))


def _new_positions(length: int, dim: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/E)), PE[pos, 2i+1] = cos(pos / 10000^(2i/E)).
    Works for odd ``dim`` too (the last column is a sine).
    """
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    i = torch.arange(0, dim, 2, dtype=torch.float64)  # (ceil(E/2),)
    angle = pos / torch.pow(10000.0, i / dim)  # (L, ceil(E/2))
    pe = torch.zeros(length, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return pe.to(torch.float32)


def _check(d_model: int, seqs: list[list[str]]) -> None:
    if d_model < 1:
        raise ValueError(f"d_model must be at least 1, got {d_model}.")
    if not seqs or not all(seqs):
        raise ValueError("There are no tokens to embed.")


def embed_padded(seqs: list[list[str]], L: int, d_model: int, positional: bool) -> torch.Tensor:
    """Each sequence embedded (as ``embed``) and padded with zero vectors to ``L``:
    (N, L, E) float32, the same numbers as ``embed`` per line. Filled in NumPy, with one
    torch call: each torch call lets other threads take the GIL, and a server busy
    with a class's connections keeps it a while each time."""
    _check(d_model, seqs)
    out = torch.zeros(len(seqs), L, d_model)  # (N, L, E): torch's own (aligned) memory, filled through NumPy
    x = out.numpy()
    vectors = _vectors(seqs, d_model)
    for n, toks in enumerate(seqs):
        x[n, : len(toks)] = np.stack([vectors[t] for t in toks])  # float64 -> float32, as .float()
    if positional:
        x += _positions(L, d_model).numpy()  # (N, L, E) + (L, E), float32 as torch adds them
    return out


def embed(tokens: list[str], d_model: int, *, positional: bool = True) -> torch.Tensor:
    """Embed ``tokens`` as a float32 tensor of shape (L, E) with E = ``d_model``.

    Deterministic and vocabulary-free (see the module docstring). With
    ``positional=True`` the sinusoidal position encoding is added, so the same
    token at two positions gets two different vectors.
    """
    _check(d_model, [tokens])
    vectors = _vectors([tokens], d_model)
    x = torch.from_numpy(np.stack([vectors[t] for t in tokens])).float()  # (L, E)
    if positional:
        x = x + _positions(len(tokens), d_model)  # (L, E), a new tensor
    return x
