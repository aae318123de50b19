"""Tiny random Hugging Face models built from their configs, each with a small word-level
tokenizer (or image processor) made here and saved to a folder: no download."""

from __future__ import annotations

import torch

TEXTS = ["the cat sat on the mat", "it was tired"]
KINDS = ("gpt2", "llama", "bert", "t5", "bart", "vit")
# Also built by ``save``, not listed in KINDS: "roberta", "neox" (GPT-NeoX: rotary on a quarter of each head,
# attention and MLP side by side on one stream), and "qwen3" (q and k normalised per head after their
# projections, before the rotation: an attention whose scores are not the watched q·k, rotated or not).


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["the cat sat on the mat because it was tired"] * 3,
                            trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[CLS]", "[SEP]"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]")


def save(tmp_path, name: str):
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        BertConfig,
        BertModel,
        GPT2Config,
        GPT2LMHeadModel,
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
        RobertaConfig,
        RobertaModel,
        T5Config,
        T5ForConditionalGeneration,
    )

    torch.manual_seed(0)
    if name == "vit":
        return save_vit(tmp_path)
    fast = tokenizer()
    V = fast.vocab_size
    model = {
        "gpt2": lambda: GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                                   bos_token_id=2, eos_token_id=3)),
        "llama": lambda: LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, max_position_embeddings=64,
                                                      bos_token_id=2, eos_token_id=3, pad_token_id=1)),
        "neox": lambda: GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                         num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.25,
                                                         max_position_embeddings=64, bos_token_id=2,
                                                         eos_token_id=3)),
        "qwen3": lambda: Qwen3ForCausalLM(Qwen3Config(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
                                                      bos_token_id=2, eos_token_id=3, pad_token_id=1)),
        "bert": lambda: BertModel(BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=64, max_position_embeddings=64)),
        "roberta": lambda: RobertaModel(RobertaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                      num_attention_heads=4, intermediate_size=64,
                                                      max_position_embeddings=70, pad_token_id=1)),
        "t5": lambda: T5ForConditionalGeneration(T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                          num_decoder_layers=3, num_heads=4, pad_token_id=1,
                                                          eos_token_id=3, decoder_start_token_id=1)),
        "bart": lambda: BartForConditionalGeneration(BartConfig(
            vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
            pad_token_id=1, bos_token_id=2, eos_token_id=3, decoder_start_token_id=3)),
    }[name]()
    folder = tmp_path / name
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder, model.eval(), fast



def perturbed(tmp_path, name: str, seed: int = 1, scale: float = 0.3):
    """``save``'s causal LM with every norm's weight and bias and every other bias moved by ``scale`` × N(0, 1),
    saved again: (folder, model, tokenizer). Folding the norms (and centring) is then tested too."""
    folder, model, tok = save(tmp_path, name)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "ln" in key or "norm" in key or key.endswith("bias"):
                p.add_(scale * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder)
    return folder, model, tok


def reading(folder, positions: int):
    """``folder`` (a rotary model's: no weight depends on its positions) set to read ``positions`` tokens."""
    import json

    config = folder / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_position_embeddings": positions}))
    return folder


def save_vit(tmp_path):
    """A 32 × 32-pixel ViT with 8-pixel patches (16 patches and [CLS]) and its processor."""
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    model = ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64))
    processor = ViTImageProcessor(size={"height": 32, "width": 32})
    folder = tmp_path / "vit"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder, model.eval(), processor


def model_dirs(tmp_path, names=KINDS):
    """A folder of tiny models, as an operator lists it in ATTNVIZ_MODEL_DIRS."""
    for name in names:
        save(tmp_path, name)
    return tmp_path
