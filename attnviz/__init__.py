"""attnviz: multi-head attention on tokenizer-free embeddings, with every step kept.

Pure PyTorch/NumPy/Plotly; no web framework here. Main entry points::

    from attnviz import AttentionConfig, compute
    result = compute(AttentionConfig(text="I love AI", num_heads=4, mask="causal"))
    result.weights  # (N, H, L, S)
"""

from .attention import scaled_dot_product_attention
from .devices import available_devices, resolve_device
from .embeddings import embed
from .multihead import MultiHeadAttention
from .pipeline import AttentionConfig, AttentionResult, compute
from .tokens import tokenize

__all__ = [
    "AttentionConfig",
    "AttentionResult",
    "MultiHeadAttention",
    "available_devices",
    "compute",
    "embed",
    "resolve_device",
    "scaled_dot_product_attention",
    "tokenize",
]
__version__ = "0.1.0"
