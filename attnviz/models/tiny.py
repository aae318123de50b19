"""A tiny attention-only causal language model, trained on the page ("Watch it learn").

    x = E[ids] + P[0..L) ; per layer: x = x + MHA_causal(x) ; logits = x W_Uᵀ

No MLP and no LayerNorm, as in Olsson et al. (2022)'s attention-only models: what it
learns, it learns in its heads. Every weight is drawn from one CPU ``torch.Generator``
seeded by ``seed``, so the same settings give the same model. The attention is attnviz's
own ``MultiHeadAttention``, so every layer's weights come with the output, and a head can
be knocked out (``head_mask``). Its vocabulary: BOS, MARK and QUERY (the tasks' markers),
then the ordinary tokens from ``FIRST_TOKEN`` on.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from attnviz.core.masks import causal_mask
from attnviz.core.multihead import MultiHeadAttention

BOS, MARK, QUERY = 0, 1, 2
FIRST_TOKEN = 3  # ordinary tokens are FIRST_TOKEN … vocab − 1
TOKEN_NAMES = {BOS: "BOS", MARK: "MARK", QUERY: "QUERY"}


def token_name(t: int) -> str:
    """How the tiny model's token ``t`` is spelled: a marker's name, or its number."""
    return TOKEN_NAMES.get(int(t), str(int(t)))


def read_token(word: str) -> int | None:
    """The token a typed word spells: a marker's name (any case) or a number; ``None`` where it is
    neither (the caller says what is wrong, and checks the number against its vocabulary)."""
    names = {v: k for k, v in TOKEN_NAMES.items()}
    if word.upper() in names:
        return names[word.upper()]
    try:
        return int(word)
    except ValueError:
        return None


class AttentionOnly(nn.Module):
    def __init__(self, vocab: int, length: int, layers: int, heads: int, d_model: int, seed: int = 0) -> None:
        super().__init__()
        MultiHeadAttention.check_heads(d_model, heads)
        gen = torch.Generator().manual_seed(int(seed))
        self.vocab, self.length, self.heads, self.d_model = vocab, length, heads, d_model
        # Embeddings as nn.Embedding's N(0, 1); the unembedding starts small, so the loss starts
        # near ln V (no token preferred) and a drop means something was learned. No biases:
        # with them, layer 1 matched prefixes without a clear previous-token head in layer 0.
        self.embed = nn.Parameter(torch.randn(vocab, d_model, generator=gen))  # (V, E)
        self.pos = nn.Parameter(torch.randn(length, d_model, generator=gen))  # (L, E)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, heads, bias=False, generator=gen)
                                    for _ in range(layers))
        self.unembed = nn.Parameter(torch.randn(vocab, d_model, generator=gen) * 0.02)  # (V, E)
        self.register_buffer("mask", causal_mask(length), persistent=False)  # (L, L)

    def inputs(self, ids: torch.Tensor) -> torch.Tensor:
        """Token plus position embeddings: ids (N, L) -> (N, L, E). A one-hot product rather
        than indexing: its backward is a matmul, whose sums come out the same on every run
        (indexing's backward accumulates in thread order)."""
        return F.one_hot(ids, self.vocab).to(self.embed.dtype) @ self.embed + self.pos[: ids.shape[1]]

    def forward(self, ids: torch.Tensor, head_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """ids (N, L) -> logits (N, L, V) and every layer's weights [(N, H, L, L)].
        ``head_mask`` (layers, H): 0 knocks a head out."""
        L = ids.shape[1]
        x = self.inputs(ids)  # (N, L, E)
        weights = []
        for i, layer in enumerate(self.layers):
            out, w = layer(x, attn_mask=self.mask[:L, :L], head_mask=None if head_mask is None else head_mask[i])
            x = x + out  # (N, L, E)
            weights.append(w)
        return x @ self.unembed.T, weights  # (N, L, V)
