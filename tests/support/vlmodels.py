"""Tiny random vision-language folders built from transformers' own config classes, each with a
word-level tokenizer (``hfmodels.tokenizer``) that knows the image tokens and the architecture's
own image processor (PIL backend): no download.

- "llava": LLaVA-1.5 with CLIP's processor (resize the shortest edge to 32, centre-crop 32 × 32;
  8-pixel patches: a 4 × 4 grid);
- "llava_pad": the same model with ``LlavaImageProcessor`` padding to a square first;
- "llava_next": LLaVA-NeXT, 16-pixel tiles of 8-pixel patches (2 × 2), the best of 16 × 32, 32 × 16 and 32 × 32
  for the tiles, a newline token after each row of them;
- "qwen2_vl", "qwen2_5_vl": 14-pixel patches merged 2 × 2 (28-pixel tokens), M-RoPE in 3 sections;
- "paligemma": a SigLIP tower over the picture stretched to 32 × 32 (8-pixel patches: 16 tokens), Gemma's
  language model attending both ways over the picture and the prompt;
- "gemma3": a SigLIP tower over the picture stretched to 32 × 32, its 4 × 4 patches pooled 2 × 2 into 4 tokens
  between the begin- and end-of-image tokens, Gemma 3's language model (sliding-window layers, the picture's
  tokens attending both ways among themselves);
- "idefics3", "smolvlm": a SigLIP-like tower over 32-pixel tiles of 4-pixel patches (8 × 8), pixel-shuffled 2 × 2
  into 16 tokens a tile; the picture resized to a longest edge of 64 and cut into up to 2 × 2 tiles, then the
  whole picture as one more tile. SmolVLM's processor also makes videos, which needs torchvision: its parts are
  saved apart, with processor_config.json's ``image_seq_len``, as a folder of its own can be.
"""

from __future__ import annotations

import torch

from tests.support.hfmodels import tokenizer

KINDS = ("llava", "llava_pad", "llava_next", "qwen2_vl", "qwen2_5_vl", "paligemma", "gemma3", "idefics3", "smolvlm")
QWEN_TOKENS = ["<|image_pad|>", "<|vision_start|>", "<|vision_end|>", "<|video_pad|>"]


def _llama(V: int, **wider):
    from transformers import LlamaConfig

    return LlamaConfig(**{"vocab_size": V, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
                          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
                          "bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 1, **wider})


def save_llava(tmp_path, pad: bool = False, side: int = 4, text: dict | None = None, vision: dict | None = None):
    """``side`` × ``side`` patches of 8 pixels; ``text`` and ``vision``: the language model's and the vision
    tower's config values that differ from the tiny ones (bench/bench_vl.py's wider model)."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaImageProcessor,
        LlavaProcessor,
    )

    torch.manual_seed(0)
    tok = tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    px = side * 8
    tower = {"image_size": px, "patch_size": 8, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "projection_dim": 32, **(vision or {})}
    cfg = LlavaConfig(vision_config=CLIPVisionConfig(**tower), text_config=_llama(len(tok), **(text or {})),
                      image_token_id=tok.convert_tokens_to_ids("<image>"), vision_feature_layer=-1)
    model = LlavaForConditionalGeneration(cfg).eval()
    ip = (LlavaImageProcessor(do_pad=True, size={"shortest_edge": px}, crop_size={"height": px, "width": px})
          if pad else CLIPImageProcessor(size={"shortest_edge": px}, crop_size={"height": px, "width": px}))
    proc = LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                          image_token="<image>", num_additional_image_tokens=1)
    folder = tmp_path / ("llava_pad" if pad else "llava")
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder, model, proc


def save_qwen(tmp_path, kind: str = "qwen2_vl"):
    from transformers import Qwen2VLImageProcessor

    if kind == "qwen2_vl":
        from transformers import Qwen2VLConfig as Config
        from transformers import Qwen2VLForConditionalGeneration as Model
        vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2, "patch_size": 14,
                  "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3}
    else:
        from transformers import Qwen2_5_VLConfig as Config
        from transformers import Qwen2_5_VLForConditionalGeneration as Model
        vision = {"depth": 2, "hidden_size": 32, "out_hidden_size": 32, "intermediate_size": 64, "num_heads": 4,
                  "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
                  "window_size": 56, "fullatt_block_indexes": [1]}
    torch.manual_seed(0)
    tok = tokenizer()
    tok.add_special_tokens({"additional_special_tokens": QWEN_TOKENS})
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_TOKENS}
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
            "rope_parameters": {"rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0},
            "bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 1}
    cfg = Config(vision_config=vision, text_config=text, image_token_id=ids["<|image_pad|>"],
                 video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                 vision_end_token_id=ids["<|vision_end|>"])
    model = Model(cfg).eval()
    ip = Qwen2VLImageProcessor(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16, patch_size=14, merge_size=2,
                               temporal_patch_size=2)
    folder = tmp_path / kind
    model.save_pretrained(folder)
    # The processor's own save needs its video processor, which needs torchvision (not installed): its parts apart.
    tok.save_pretrained(folder)
    ip.save_pretrained(folder)
    return folder, model, None


def save_paligemma(tmp_path):
    from transformers import (
        GemmaConfig,
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipImageProcessor,
        SiglipVisionConfig,
    )

    torch.manual_seed(0)
    tok = tokenizer()
    tok.add_special_tokens({"bos_token": "<bos>", "eos_token": "<eos>", "additional_special_tokens": ["<image>"]})
    text = GemmaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=1)
    tower = SiglipVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4)
    cfg = PaliGemmaConfig(vision_config=tower, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                          projection_dim=32, hidden_size=32)
    model = PaliGemmaForConditionalGeneration(cfg).eval()
    ip = SiglipImageProcessor(size={"height": 32, "width": 32}, image_seq_length=16)
    proc = PaliGemmaProcessor(image_processor=ip, tokenizer=tok)
    folder = tmp_path / "paligemma"
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder, model, proc


def save_gemma3(tmp_path):
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
        Gemma3TextConfig,
        PreTrainedTokenizerFast,
        SiglipVisionConfig,
    )

    torch.manual_seed(0)
    marks = {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>", "eoi_token": "<end_of_image>"}
    words = tokenizer()
    words.add_special_tokens({"bos_token": "<bos>", "eos_token": "<eos>",
                              "additional_special_tokens": [*marks.values()]})
    tok = PreTrainedTokenizerFast(tokenizer_object=words._tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                  bos_token="<bos>", eos_token="<eos>", extra_special_tokens=marks)
    text = Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                            sliding_window=8, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                            pad_token_id=1)
    tower = SiglipVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4)
    ids = {name: tok.convert_tokens_to_ids(t) for name, t in marks.items()}
    cfg = Gemma3Config(text_config=text, vision_config=tower, mm_tokens_per_image=4, boi_token_index=ids["boi_token"],
                       eoi_token_index=ids["eoi_token"], image_token_index=ids["image_token"])
    model = Gemma3ForConditionalGeneration(cfg).eval()
    proc = Gemma3Processor(image_processor=Gemma3ImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok,
                           image_seq_length=4)
    folder = tmp_path / "gemma3"
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder, model, proc


def save_llava_next(tmp_path):
    from transformers import (
        CLIPVisionConfig,
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessor,
        LlavaNextProcessor,
    )

    torch.manual_seed(0)
    tok = tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    pinpoints = [[16, 32], [32, 16], [32, 32]]
    tower = CLIPVisionConfig(image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, projection_dim=32)
    cfg = LlavaNextConfig(vision_config=tower, text_config=_llama(len(tok), max_position_embeddings=512),
                          image_token_id=tok.convert_tokens_to_ids("<image>"), vision_feature_layer=-1,
                          image_grid_pinpoints=pinpoints)
    model = LlavaNextForConditionalGeneration(cfg).eval()
    ip = LlavaNextImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16},
                                 image_grid_pinpoints=pinpoints)
    proc = LlavaNextProcessor(image_processor=ip, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                              image_token="<image>", num_additional_image_tokens=1)
    folder = tmp_path / "llava_next"
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder, model, proc


IDEFICS_MARKS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
                 *[f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]]


def save_idefics3(tmp_path, kind: str = "idefics3"):
    import json

    import transformers as T

    torch.manual_seed(0)
    tok = tokenizer()
    tok.add_special_tokens({"additional_special_tokens": IDEFICS_MARKS})
    name = "Idefics3" if kind == "idefics3" else "SmolVLM"
    tower = getattr(T, f"{name}VisionConfig")(image_size=32, patch_size=4, hidden_size=32, intermediate_size=64,
                                              num_hidden_layers=2, num_attention_heads=4)
    cfg = getattr(T, f"{name}Config")(vision_config=tower, text_config=_llama(len(tok), max_position_embeddings=512),
                                      scale_factor=2, image_token_id=tok.convert_tokens_to_ids("<image>"))
    model = getattr(T, f"{name}ForConditionalGeneration")(cfg).eval()
    ip = getattr(T, f"{name}ImageProcessorPil")(size={"longest_edge": 64}, max_image_size={"longest_edge": 32})
    folder = tmp_path / kind
    model.save_pretrained(folder)
    if kind == "idefics3":
        proc = T.Idefics3Processor(image_processor=ip, tokenizer=tok, image_seq_len=16)
        proc.save_pretrained(folder)
        return folder, model, proc
    tok.save_pretrained(folder)
    ip.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "SmolVLMProcessor",
                                                              "image_seq_len": 16}))
    return folder, model, None


def save(tmp_path, kind: str):
    if kind in ("idefics3", "smolvlm"):
        return save_idefics3(tmp_path, kind)
    if kind == "llava_next":
        return save_llava_next(tmp_path)
    if kind == "gemma3":
        return save_gemma3(tmp_path)
    if kind == "paligemma":
        return save_paligemma(tmp_path)
    if kind.startswith("llava"):
        return save_llava(tmp_path, pad=kind == "llava_pad")
    return save_qwen(tmp_path, kind)
