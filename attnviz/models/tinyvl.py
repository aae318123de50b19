"""A tiny vision-language model: a linear patch embedding and a few attention layers over a question's words and
a picture's patches, answering in one word at the question's last position.

    x = [E[q] + T ; (2P − 1) W_p + Q ; E[?] + T]   (the question but its "?", the patches, the "?"; N, W + I, E)
    per layer: x = x + MHA_causal(x) ; x = x + MLP(x)
    logits = x[:, -1] W_Uᵀ

P: each patch's pixels in [0, 1], flattened (I patches of PATCH × PATCH × 3); Q and T: the patches' and the
words' positions. The question comes first, so that in a causal model each patch can read what is asked about
(the circle, the red one) before the "?" looks for it; the "?" comes last and answers. No LayerNorm, as Watch it
learn's attention-only model (``attnviz.models.tiny``); the MLP (one hidden layer of 2E, ReLU) reads what a head
brought. Every weight is drawn from one CPU ``torch.Generator`` seeded by ``seed``. The attention is attnviz's own
``MultiHeadAttention``, so every layer's weights come with the output: the "?" row over the patches' columns is
where the model looks when it answers (``image_columns``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from attnviz.core.masks import causal_mask
from attnviz.core.multihead import MultiHeadAttention

# Starting scales, found by training (``attnviz.learn.look``): the words' embeddings and positions small beside
# the patches' positions and content, which a head must tell apart to look at the right one.
WORD_SCALE, CONTENT_SCALE = 0.3, 3.0


def patches_of(pixels: torch.Tensor, patch: int) -> torch.Tensor:
    """(N, 3, H, W) -> (N, I, patch² · 3): each patch's pixels, row-major over the grid."""
    N, C, H, W = pixels.shape
    x = pixels.unfold(2, patch, patch).unfold(3, patch, patch)  # (N, C, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(N, (H // patch) * (W // patch), C * patch * patch)


class TinyVL(nn.Module):
    def __init__(self, vocab: int, patches: int, patch: int, words: int, layers: int, heads: int, d_model: int,
                 seed: int = 0) -> None:
        super().__init__()
        MultiHeadAttention.check_heads(d_model, heads)
        gen = torch.Generator().manual_seed(int(seed))
        self.vocab, self.patches, self.patch, self.words, self.heads = vocab, patches, patch, words, heads
        pixels = patch * patch * 3
        self.patch_embed = nn.Parameter(torch.randn(pixels, d_model, generator=gen) * CONTENT_SCALE / pixels ** 0.5)
        self.patch_pos = nn.Parameter(torch.randn(patches, d_model, generator=gen))  # (I, E)
        self.embed = nn.Parameter(torch.randn(vocab, d_model, generator=gen) * WORD_SCALE)  # (V, E)
        self.pos = nn.Parameter(torch.randn(words, d_model, generator=gen) * WORD_SCALE)  # (W, E)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, heads, bias=False, generator=gen)
                                    for _ in range(layers))
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.ReLU(),
                                                nn.Linear(2 * d_model, d_model)) for _ in range(layers))
        with torch.no_grad():  # from the same generator: the same seed, the same model
            for p in self.mlps.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * (0.02 if p.ndim == 1 else p.shape[-1] ** -0.5))
        self.unembed = nn.Parameter(torch.randn(vocab, d_model, generator=gen) * 0.02)  # (V, E)
        self.register_buffer("mask", causal_mask(patches + words), persistent=False)  # (W + I, W + I)

    @property
    def image_columns(self) -> slice:
        """The patches' positions in the sequence: after the question's words but its last."""
        return slice(self.words - 1, self.words - 1 + self.patches)

    def inputs(self, pixels: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """pixels (N, 3, H, W), ids (N, W) -> (N, W + I, E). The words by a one-hot product (its backward a matmul,
        the same sums on every run, as ``tiny.AttentionOnly``'s)."""
        content = 2 * patches_of(pixels, self.patch) - 1  # (N, I, p²·3) in [-1, 1]
        img = content @ self.patch_embed + self.patch_pos  # (N, I, E)
        txt = F.one_hot(ids, self.vocab).to(img.dtype) @ self.embed + self.pos[: ids.shape[1]]  # (N, W, E)
        return torch.cat([txt[:, :-1], img, txt[:, -1:]], 1)

    def forward(self, pixels: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """-> the answer's logits (N, V) at the last word, and every layer's weights [(N, H, W + I, W + I)]."""
        x = self.inputs(pixels, ids)  # (N, W + I, E)
        n = x.shape[1]
        weights = []
        for attn, mlp in zip(self.layers, self.mlps, strict=True):
            out, w = attn(x, attn_mask=self.mask[:n, :n])
            x = x + out
            x = x + mlp(x)
            weights.append(w)
        return x[:, -1] @ self.unembed.T, weights  # (N, V)
