"""attnviz: multi-head attention on tokenizer-free embeddings, with every step kept.

Pure PyTorch/NumPy/Plotly; no web framework here. Main entry points::

    from attnviz import AttentionConfig, compute
    result = compute(AttentionConfig(text="I love AI", num_heads=4, mask="causal"))
    result.weights  # (N, H, L, S)

The front door: it re-exports the public API of the packages below it (the notebook API through
``attnviz.lazy``). May import: attnviz.analysis, attnviz.core, attnviz.inputs, attnviz.lazy,
attnviz.notebook, attnviz.run.
"""

import sys

try:
    import torch  # noqa: F401 - every module below needs it
except ModuleNotFoundError as missing:  # `python -m attnviz` with a Python that lacks the project's packages
    if sys.argv[:1] == ["-m"]:  # (while runpy imports this package, argv[0] is still "-m")
        sys.exit(f"attnviz: {missing.name} is not installed for {sys.executable}: run `make run` or `make test` once, "
                 "then use .venv/bin/attnviz (or .venv/bin/python -m attnviz).")
    raise

from attnviz import lazy  # noqa: E402 - after the check above
from attnviz.analysis.detector import detect_head
from attnviz.analysis.kvcache import kv_keep
from attnviz.analysis.longcontext import long_attention
from attnviz.analysis.qkmap import qk_map
from attnviz.analysis.roles import attention_flow, head_scores
from attnviz.core.attention import scaled_dot_product_attention
from attnviz.core.devices import available_devices, resolve_device
from attnviz.core.efficient import low_rank_attention, tiled_attention
from attnviz.core.multihead import MultiHeadAttention
from attnviz.inputs.embeddings import embed
from attnviz.inputs.tokens import tokenize
from attnviz.run.config import AttentionConfig
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute

__all__ = [
    "AttentionConfig",
    "AttentionResult",
    "MultiHeadAttention",
    "attention_flow",
    "available_devices",
    "compute",
    "detect_head",
    "embed",
    "head_scores",
    "kv_keep",
    "long_attention",
    "low_rank_attention",
    "qk_map",
    "resolve_device",
    "scaled_dot_product_attention",
    "tiled_attention",
    "tokenize",
]
__version__ = "0.1.0"

# The notebook API (attention computed elsewhere, drawn offline), loaded on first use so that
# ``import attnviz`` stays light: attnviz.head_view, attnviz.show, attnviz.save_attention, …
_NOTEBOOK = ("head_view", "model_view", "attention_heads", "attention_pattern", "attention_patterns", "show",
             "head_table", "save_attention", "load_attention", "normalise", "to_html", "neuron_view", "patch_heads",
             "patch_residual", "logit_attribution", "long_view", "composition_scores", "path_patch",
             "score_attribution", "circuit", "example_pair", "circuit_view", "edge_attribution",
             "circuit_faithfulness", "faithfulness_curve", "logit_lens", "train_lens", "vl_attention",
             "lens_view", "vl_view")


def __getattr__(name: str):
    if name in _NOTEBOOK:
        return getattr(lazy.imported("attnviz.notebook"), name)
    raise AttributeError(f"module 'attnviz' has no attribute {name!r}")
