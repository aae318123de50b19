"""Attention as the field hands it over, read as the field writes it, by every public function:
``torch.stack(outputs.attentions)`` (layers, N, H, L, S), a transformers model output (its
``.attentions``, an encoder–decoder's three stacks), a TransformerLens ``ActivationCache``."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import attnviz
from attnviz import notebook as nb
from tests.support.hfmodels import tokenizer

LAYERS = 3
TEXTS = ["the cat sat on the mat", "it was tired because the mat"]  # two sequences of 6 tokens


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A 3-layer GPT-2 folder, its model and tokenizer, and its outputs on a batch of two."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    fast = tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=fast.vocab_size, n_positions=64, n_embd=32, n_layer=LAYERS,
                                       n_head=4, bos_token_id=2, eos_token_id=3)).eval()
    folder = tmp_path_factory.mktemp("conventions") / "gpt2-3"
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    model = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()  # eager: it keeps the weights
    ids = torch.tensor([fast(t)["input_ids"] for t in TEXTS])  # (2, 6)
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    tokens = fast.convert_ids_to_tokens(ids[0].tolist())
    first = torch.stack([a[0] for a in out.attentions]).numpy()  # (layers, H, L, S): sequence 0
    return {"folder": folder, "out": out, "tokens": tokens, "first": first, "ids": ids}


@pytest.fixture(scope="module")
def tl_cache(gpt2):
    """TransformerLens's cache of the same model (TransformerBridge over the folder, offline)."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(gpt2["folder"]))
    _logits, cache = bridge.run_with_cache(gpt2["ids"])
    return bridge, cache


def forms(gpt2, tl_cache):
    """Every container of the same weights: sequence 0 of a batch of two, every layer."""
    stacked = torch.stack(gpt2["out"].attentions)  # (layers, N=2, H, L, S)
    return {"torch.stack(outputs.attentions)": stacked, "its numpy": stacked.numpy(),
            "the per-layer tuple": gpt2["out"].attentions, "the model output": gpt2["out"],
            "cache.stack_activation('pattern')": tl_cache[1].stack_activation("pattern"),
            "the ActivationCache": tl_cache[1]}


FORMS = ["torch.stack(outputs.attentions)", "its numpy", "the per-layer tuple", "the model output",
         "cache.stack_activation('pattern')", "the ActivationCache"]


@pytest.mark.parametrize("form", FORMS)
def test_normalise_reads_every_layer_and_the_first_sequence(gpt2, tl_cache, form):
    a = nb.normalise(forms(gpt2, tl_cache)[form], gpt2["tokens"])
    assert a.layers == LAYERS and a.batch == 2
    np.testing.assert_allclose(a.weights, gpt2["first"], atol=1e-6)


@pytest.mark.parametrize("form", FORMS)
def test_head_scores_flow_and_the_head_table_score_every_layer(gpt2, tl_cache, form):
    value, toks, first = forms(gpt2, tl_cache)[form], gpt2["tokens"], gpt2["first"]
    scores = attnviz.head_scores(value, toks)
    want = attnviz.head_scores(first, toks)
    assert scores["previous_token"].shape == (LAYERS, 4)
    assert all(np.allclose(scores[k], want[k], atol=1e-6) for k in want)
    flow = attnviz.attention_flow(value, every_layer=True)
    assert flow.shape == (LAYERS, 6, 6) and np.allclose(flow, attnviz.attention_flow(first, every_layer=True),
                                                        atol=1e-6)
    rows = nb.head_table(value, toks)
    assert len(rows) == LAYERS * 4 and max(r["layer"] for r in rows) == LAYERS - 1
    detected = attnviz.detect_head(value, toks, "previous_token_head")
    assert detected.shape == (LAYERS, 4)
    assert torch.allclose(detected, attnviz.detect_head(first, toks, "previous_token_head"), atol=1e-6)


@pytest.mark.parametrize("form", FORMS)
def test_the_views_draw_every_layer_of_the_first_sequence(gpt2, tl_cache, form):
    value, toks, first = forms(gpt2, tl_cache)[form], gpt2["tokens"], gpt2["first"]
    with pytest.warns(UserWarning, match="a batch of 2 sequences; BertViz's views take batch 1: showing the first"):
        r = nb.head_view(value, toks, html_action="return")
    assert len(r.figures[0].data) == LAYERS  # one trace per layer, a menu over them
    assert [b["label"] for b in r.figures[0].layout.updatemenus[0].buttons] == [f"layer {i}" for i in range(LAYERS)]
    with pytest.warns(UserWarning, match="showing the first"):
        m = nb.model_view(value, toks, html_action="return")
    assert f"({LAYERS} × 4)" in m.figures[0].layout.title.text
    grid = nb.show(value, toks, view="head", layer=LAYERS - 1, head=1)
    np.testing.assert_allclose(np.asarray(grid.data[0].z, dtype=np.float64), first[LAYERS - 1, 1], atol=1e-6)
    assert f"{LAYERS} layer(s)" in nb.show(value, toks, view="rollout").layout.title.text


@pytest.mark.parametrize("form", FORMS)
def test_an_attention_file_keeps_every_layer(gpt2, tl_cache, form, tmp_path):
    path = tmp_path / "a.safetensors"
    nb.save_attention(path, forms(gpt2, tl_cache)[form], gpt2["tokens"])
    back = nb.load_attention(path)
    assert back.layers == LAYERS
    np.testing.assert_allclose(back.weights, gpt2["first"], atol=1e-6)


def test_circuitsvis_takes_one_layer_and_says_how_to_pick_it_from_the_rest(gpt2, tl_cache):
    stacked = torch.stack(gpt2["out"].attentions)  # (layers, N, H, L, S)
    toks = gpt2["tokens"]
    with pytest.raises(ValueError, match=re.escape("(layers, N, H, L, S), every layer: pass attention[layer, 0]")):
        nb.attention_heads(stacked, toks)
    with pytest.raises(ValueError, match=re.escape("(N, H, L, S), one layer of a batch: pass attention[0]")):
        nb.attention_heads(stacked[1], toks)
    for whole in (gpt2["out"], tl_cache[1]):
        with pytest.raises(ValueError, match=re.escape("cache['pattern', layer][0]")):
            nb.attention_patterns(toks, whole)
    fig = nb.attention_heads(stacked[2, 0], toks).figures[0]
    assert fig.layout.title.text == "attention heads"


def test_the_cache_with_its_batch_removed_and_its_to_str_tokens(gpt2, tl_cache):
    bridge, _cache = tl_cache
    _logits, single = bridge.run_with_cache(gpt2["ids"][:1], remove_batch_dim=True)
    toks = bridge.to_str_tokens(gpt2["ids"][0])
    a = nb.normalise(single, toks)
    assert a.layers == LAYERS and a.batch == 1 and a.tokens == list(toks)
    np.testing.assert_allclose(a.weights, gpt2["first"], atol=1e-5)


def test_a_cache_missing_a_layer_is_refused_with_the_layers_it_has(gpt2, tl_cache):
    bridge, _cache = tl_cache
    _logits, part = bridge.run_with_cache(gpt2["ids"], names_filter=lambda name: name == "blocks.1.attn.hook_pattern")
    with pytest.raises(ValueError, match=re.escape("layers 1 only: pass one layer's, cache['pattern', 1]")):
        nb.normalise(part)
    _logits, none = bridge.run_with_cache(gpt2["ids"], names_filter=lambda name: name.endswith("hook_z"))
    with pytest.raises(ValueError, match="holds no attention patterns"):
        attnviz.head_scores(none)


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    from transformers import T5ForConditionalGeneration

    from tests.support.hfmodels import save

    folder, _model, fast = save(tmp_path_factory.mktemp("t5"), "t5")
    model = T5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    enc = torch.tensor([fast("the cat sat on the mat")["input_ids"]])  # (1, 6)
    dec = torch.tensor([[1] + fast("it was tired")["input_ids"]])  # (1, 4)
    with torch.no_grad():
        out = model(input_ids=enc, decoder_input_ids=dec, output_attentions=True)
    decoded = ["<start>", *fast.convert_ids_to_tokens(dec[0, 1:].tolist())]
    return out, fast.convert_ids_to_tokens(enc[0].tolist()), decoded


def test_an_encoder_decoders_output_gives_the_stack_bertviz_names(t5):
    out, enc, dec = t5
    r = nb.head_view(encoder_attention=out, decoder_attention=out, cross_attention=out, encoder_tokens=enc,
                     decoder_tokens=dec, html_action="return")
    assert [len(f.data) for f in r.figures] == [2, 3, 3]  # the tiny T5: 2 encoder layers, 3 decoder layers
    cross = nb.normalise(out, dec, source_tokens=enc, stack="cross")
    assert (cross.layers, cross.L, cross.S) == (3, 4, 6)
    np.testing.assert_allclose(cross.weights[2], out.cross_attentions[2][0].numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="say which with stack="):
        nb.normalise(out, enc)
    with pytest.raises(ValueError, match="stack must be one of encoder, decoder, cross"):
        nb.normalise(out, enc, stack="middle")
    assert attnviz.head_scores(nb.normalise(out, dec, stack="decoder"))["self"].shape == (3, 4)


def test_a_model_run_without_output_attentions_says_how_to_get_them(gpt2):
    from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

    with pytest.raises(ValueError, match="output_attentions=True"):
        nb.normalise(CausalLMOutputWithCrossAttentions(logits=torch.zeros(1, 2, 3)))


def test_the_docs_name_the_behaviour_change():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "notebook.md").read_text(encoding="utf-8")
    assert "Behaviour changes" in text and "(layers, N, H, L, S)" in text
