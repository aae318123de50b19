"""Folders for checking circuits against TransformerLens: the tiny GPT-2, LLaMA (grouped-query) and
GPT-NeoX models of ``hfmodels`` with every norm's weight and bias and every bias perturbed, and
their matrices scaled up (the tiny random models' heads barely move their answer otherwise), with
TransformerLens's bridge over each in compatibility mode (its ``from_pretrained`` processing)."""

from __future__ import annotations

import json

import torch

from tests.support import hfmodels

SCALE = {"gpt2": 20.0, "llama": 10.0, "neox": 10.0}  # heads whose paths move the metric by 1e-3 and more


def perturbed(root, kind: str):
    """(folder, model, tokenizer): ``kind``'s folder with norms and biases perturbed, matrices scaled."""
    folder, model, tok = hfmodels.save(root, kind)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "norm" in name or "bias" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
            elif p.ndim == 2 and "wte" not in name and "embed" not in name:
                p.mul_(SCALE[kind])
    model.save_pretrained(folder)
    return folder, model, tok


def without_shared_kv_heads(root, folder):
    """A copy of a grouped-query LLaMA folder with each KV head's k and v weights repeated for each
    query head that reads it: the same model, in which every query head has a key and value of its own."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    cfg = model.config
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    D = cfg.hidden_size // cfg.num_attention_heads
    out = root / "llama-mha"
    state = model.state_dict()
    for name in list(state):
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            w = state[name]  # (KV·D, E)
            state[name] = w.view(-1, D, w.shape[-1]).repeat_interleave(group, 0).reshape(-1, w.shape[-1])
    cfg.num_key_value_heads = cfg.num_attention_heads
    mha = LlamaForCausalLM(cfg)
    mha.load_state_dict(state)
    mha.save_pretrained(out)
    for f in folder.iterdir():
        if f.name.startswith("tokenizer") or f.name == "special_tokens_map.json":
            (out / f.name).write_bytes(f.read_bytes())
    assert json.loads((out / "config.json").read_text())["num_key_value_heads"] == cfg.num_attention_heads
    return out


def bridge(folder):
    from transformer_lens.model_bridge import TransformerBridge

    b = TransformerBridge.boot_transformers(str(folder))
    b.enable_compatibility_mode()
    return b


def bpe_gpt2(folder):
    """A tiny GPT-2 folder with a byte-level BPE tokenizer trained on the indirect-object sentence, so that
    it spells "ĠMary", "ĠJohn" and "ĠTom" as one token each (``attnviz.example_pair``'s IOI pair)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tm
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(tm.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["When Mary and John went to the store, John gave a drink to Mary and Tom"] * 20
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=32, n_embd=16, n_layer=2, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
