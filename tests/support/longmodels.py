"""Long-context references: tiny transformers folders that read thousands of positions, and every
number of ``attnviz.analysis.longcontext`` computed from a dense (layers, H, N, N) weight array."""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.support import hfmodels


def save(tmp_path, name: str, positions: int = 4096):
    """``hfmodels.save``'s folder of ``name`` ("gpt2", "llama", "neox", "qwen3"), reading ``positions`` tokens."""
    if name != "gpt2":
        folder, _m, tok = hfmodels.save(tmp_path, name)
        return hfmodels.reading(folder, positions)
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    fast = hfmodels.tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=fast.vocab_size, n_positions=positions, n_embd=32, n_layer=2,
                                       n_head=4, bos_token_id=2, eos_token_id=3))
    folder = tmp_path / "gpt2"
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def llama_shaped(tmp_path, *, positions: int, layers: int = 2, width: int = 64, heads: int = 8, kv: int = 2,
                 vocab: int = 64, name: str = "llama-long"):
    """A LLaMA-shaped folder (rotary, ``heads`` query heads over ``kv`` key/value heads) with a word-level
    tokenizer; read it with token ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    fast = hfmodels.tokenizer()
    model = LlamaForCausalLM(LlamaConfig(vocab_size=max(vocab, fast.vocab_size), hidden_size=width,
                                         intermediate_size=2 * width, num_hidden_layers=layers,
                                         num_attention_heads=heads, num_key_value_heads=kv,
                                         max_position_embeddings=positions, bos_token_id=2, eos_token_id=3,
                                         pad_token_id=1))
    folder = tmp_path / name
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def eager_weights(folder, ids: list[int]) -> np.ndarray:
    """(layers, H, N, N) float64: the model's own ``output_attentions``, from a fresh eager load."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


def dense_numbers(a: np.ndarray, blocks: int, causal: bool = True) -> dict[str, np.ndarray]:
    """Every long-context number from dense weights a (layers, H, N, N), by their definitions."""
    layers, H, N, _ = a.shape
    b = -(-N // min(blocks, N))
    nb = -(-N // b)
    pad = np.zeros((layers, H, nb * b, nb * b))
    pad[..., :N, :N] = a
    cells = pad.reshape(layers, H, nb, b, nb, b)
    sizes = np.diff(np.minimum(np.arange(0, N + b, b), N))
    i = np.arange(N)
    seen = (i + 1 if causal else np.full(N, N)).astype(np.float64)
    ok = seen >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(a > 0, a * np.log(a), 0.0).sum(-1)  # (layers, H, N)
    return {
        "overview": cells.max(axis=(3, 5)),
        "overview_mean": cells.sum(axis=(3, 5)) / np.outer(sizes, sizes),
        "received": a.sum(2),
        "sink": a[..., :4].sum(-1).mean(-1),
        "distance": (a * np.abs(i[:, None] - i[None, :])).sum(-1).mean(-1),
        "entropy": (ent[..., ok] / np.log(seen[ok])).mean(-1) if ok.any() else np.full((layers, H), math.nan),
    }
