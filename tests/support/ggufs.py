"""Tiny GGUF files written here with gguf's own writer, the way llama.cpp's convert_hf_to_gguf.py writes them: a
random transformers model's tensors under GGUF's names (gguf's tensor map), LLaMA's q and k permuted for
llama.cpp's rotary layout (``LlamaModel.permute``), 2-D weights quantized where asked, and a byte-level BPE
tokenizer as GGUF's "gpt2" tokenizer (tokens, token types, merges).

    path, hf = write_gguf(tmp_path / "tiny.gguf", "llama", quant="Q8_0")

``hf`` is the random model the file was written from: with ``quant="F32"`` the file holds its exact weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

CORPUS = ["The Eiffel Tower is located in the city of Paris.", "When Mary and John went to the store, John gave a "
          "drink to Mary.", "the cat sat on the mat and the dog sat on the log", "0 1 2 3 4 5 6 7 8 9"] * 4
VOCAB = 320


def bpe_tokenizer():
    """A byte-level BPE tokenizer trained on ``CORPUS``: <|endoftext|> first, every byte, then merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def _config(arch: str, vocab: int):
    import transformers as T

    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=128, bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    if arch == "llama":
        return T.LlamaConfig(num_key_value_heads=2, rms_norm_eps=1e-5, **common)
    if arch == "qwen2":
        return T.Qwen2Config(num_key_value_heads=2, rms_norm_eps=1e-6, **common)
    if arch == "gpt2":
        # transformers reads GGUF's context length as n_ctx, not n_positions: its GPT-2 keeps the default 1,024
        return T.GPT2Config(vocab_size=vocab, n_embd=64, n_layer=2, n_head=4, n_positions=1024, bos_token_id=0,
                            eos_token_id=0, tie_word_embeddings=True)
    raise ValueError(arch)


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's layout of a LLaMA q or k projection (convert_hf_to_gguf.py, LlamaModel.permute)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path: Path, arch: str = "llama", quant: str = "F32", seed: int = 0, architecture: str | None = None):
    """Write a tiny random ``arch`` model ("llama", "qwen2" or "gpt2") as GGUF at ``path``; its 2-D weights in
    ``quant`` ("F32", "F16" or "Q8_0"). ``architecture``: the name the header gives (another, to test a refusal).
    Returns (path, the transformers model it was written from)."""
    import gguf
    import transformers as T

    tok = bpe_tokenizer()
    spec = json.loads(tok.to_str())["model"]
    tokens = [t for t, _i in sorted(spec["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["merges"]]
    torch.manual_seed(seed)
    cfg = _config(arch, len(tokens))
    model = T.AutoModelForCausalLM.from_config(cfg).eval()
    w = gguf.GGUFWriter(str(path), architecture or arch)
    n_layers = cfg.num_hidden_layers
    w.add_name(f"tiny-{arch}")
    w.add_context_length(1024 if arch == "gpt2" else 128)
    w.add_embedding_length(64)
    w.add_block_count(n_layers)
    w.add_head_count(4)
    if arch == "gpt2":
        w.add_layer_norm_eps(cfg.layer_norm_epsilon)
    else:
        w.add_feed_forward_length(128)
        w.add_head_count_kv(2)
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"] if hasattr(cfg, "rope_parameters") else 10000.0)
        w.add_rope_dimension_count(64 // 4)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * (len(tokens) - 1))
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], n_layers)
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    for hf_name, tensor in model.state_dict().items():
        if arch == "gpt2" and hf_name == "lm_head.weight":
            continue  # tied to the token embedding: GGUF keeps one
        data = tensor.detach().float().numpy().copy()
        if arch == "gpt2" and data.ndim == 2 and hf_name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            data = data.T.copy()  # GPT-2's Conv1D keeps (in, out); GGUF keeps (out, in)
        if arch == "llama" and hf_name.endswith("q_proj.weight"):  # only LLaMA's are permuted (Qwen2's are not)
            data = _permute(data, 4)
        if arch == "llama" and hf_name.endswith("k_proj.weight"):
            data = _permute(data, 2)
        name = names.get_name(hf_name.removeprefix("transformer."), try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        if data.ndim == 2 and quant != "F32":
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, model
