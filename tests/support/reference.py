"""Reference implementations the tests compare against."""

import math

import torch
import torch.nn.functional as F


def seed_attention(Q, K, V, mask=None, dropout=None):
    """The seed tutorial's ``attention`` function, verbatim (comments translated)."""
    d_k = Q.size(-1)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)  # blocked where mask == 0
    attn_weights = F.softmax(scores, dim=-1)
    if dropout is not None:
        attn_weights = dropout(attn_weights)
    output = torch.matmul(attn_weights, V)
    return output, attn_weights
