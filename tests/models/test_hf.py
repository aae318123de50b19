"""Any Hugging Face model from a local folder: tiny random models built from their configs,
each with a small word-level tokenizer trained here, saved to a temporary folder and run
through attnviz. No download."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="pip install transformers (in requirements.txt)")

from attnviz import AttentionConfig, compute  # noqa: E402
from attnviz.models import registry as R  # noqa: E402
from attnviz.models.base import ModelError  # noqa: E402
from tests.support.hfmodels import TEXTS  # noqa: E402
from tests.support.hfmodels import save as _save  # noqa: E402


def _reference(folder, fast, texts):
    """transformers' own output_attentions, from the saved folder, eager attention."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = fast(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    return torch.stack(out.attentions), enc  # (layers, N, H, L, S)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_decoders_weights_equal_its_own_output_attentions(tmp_path, name):
    folder, model, fast = _save(tmp_path, name)
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=str(folder), layer=1))
    ref, enc = _reference(folder, fast, TEXTS)
    assert r.layer_weights.shape == ref.shape and r.layers == 2 and r.heads == 4
    real = enc["attention_mask"].bool()  # compare the real tokens' rows (padding rows are undefined)
    for n in range(len(TEXTS)):
        k = int(real[n].sum())
        assert (r.layer_weights[:, n, :, :k, :k] - ref[:, n, :, :k, :k]).abs().max() <= 1e-6
    assert torch.equal(r.weights, r.layer_weights[1])  # the followed layer
    assert r.tokens[0][:3] == ["the", "cat", "sat"] and r.tokens[1][-1] == "[PAD]"


def test_grouped_query_attention_is_said(tmp_path):
    folder, _model, _fast = _save(tmp_path, "llama")
    r = compute(AttentionConfig(text=TEXTS[0], model=str(folder)))
    assert any("query heads 0–1 share key/value head 0" in n for n in r.notes)


def test_the_hand_built_bert_and_transformers_agree(tmp_path):
    from attnviz.models.hf import HFModel

    folder, model, fast = _save(tmp_path, "bert")
    hand = compute(AttentionConfig(text=TEXTS[0], model=str(folder)))  # attnviz's own BERT (every step kept)
    assert hand.complete and hand.model_name != "random"
    hf = HFModel.from_folder("bert", folder)
    ids = torch.tensor([fast(TEXTS[0])["input_ids"]])
    weights, _logits = hf.attentions(ids, [ids.shape[1]])
    assert (hand.layer_weights - weights).abs().max() <= 1e-5


def test_a_causal_lm_predicts_the_next_token(tmp_path):
    from attnviz.models.hf import HFModel

    folder, model, fast = _save(tmp_path, "gpt2")
    hf = HFModel.from_folder("gpt2", folder)
    ids = fast(TEXTS[0])["input_ids"]
    top = hf.next_tokens(ids, k=5)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([ids])).logits[0, -1], -1)
    assert [t for t, _p in top][0] == fast.convert_ids_to_tokens(int(p.argmax()))
    assert top[0][1] == pytest.approx(float(p.max()), abs=1e-6)
    # The run's own pass gives the same, for each line of a padded batch at its last real token.
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=str(folder)))
    for n, text in enumerate(TEXTS):
        with torch.no_grad():
            p = torch.softmax(model(torch.tensor([fast(text)["input_ids"]])).logits[0, -1], -1)
        assert r.next_tokens[n][0] == (fast.convert_ids_to_tokens(int(p.argmax())), pytest.approx(float(p.max()),
                                                                                                   abs=1e-5))
        assert len(r.next_tokens[n]) == 10


def test_folders_listed_by_the_operator_are_offered_by_name_never_by_path(tmp_path, monkeypatch):
    folder, _model, _fast = _save(tmp_path, "gpt2")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    assert "gpt2" in R.available_models()
    from attnviz.views.state import parse

    state, warnings = parse({"model": "gpt2", "head": "3"})
    assert warnings == [] and state.model == "gpt2"
    _s, warnings = parse({"model": str(folder)})
    assert warnings and "not a model here" in warnings[0].text
    r = compute(state.config.with_(text=TEXTS[0]))
    assert r.heads == 4 and R.layer_count("gpt2") == 2


@pytest.mark.parametrize("change, words", [({"model_type": "swin"}, "shifted windows"),
                                           ({"model_type": "vit"}, "no preprocessor_config.json")])
def test_unsupported_kinds_are_refused_before_loading(tmp_path, change, words):
    import json

    folder, _model, _fast = _save(tmp_path, "gpt2")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **change}))
    (folder / "model.safetensors").write_bytes(b"not weights")  # never read
    with pytest.raises(ModelError, match=words):
        compute(AttentionConfig(text="the cat", model=str(folder)))


def test_a_model_over_the_size_bound_is_refused_before_loading(tmp_path, monkeypatch):
    folder, _model, _fast = _save(tmp_path, "gpt2")
    monkeypatch.setenv("ATTNVIZ_MAX_MODEL_MB", "0")
    with pytest.raises(ModelError, match="over this server's bound"):
        compute(AttentionConfig(text="the cat", model=str(folder)))


def test_the_app_runs_a_listed_folder_in_every_view(tmp_path, monkeypatch):
    from tests.support.apphelp import app, figures

    _save(tmp_path, "llama")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    for view in ("grid", "head", "model", "analysis", "output"):
        at = app(f"model=llama&layer=1&head=3&view={view}&text=the+cat+sat", timeout=120)
        assert not at.exception and not at.error, view
        assert at.session_state["head"] == 3  # the model's own 4 heads bound the link, not the random model's
        if view == "output":
            assert any("weights only" in i.value for i in at.info)
        else:
            assert figures(at)
    step = app("model=llama&text=the+cat", page="app_pages/step_by_step.py", timeout=120)
    assert any("gives its attention weights only" in e.value for e in step.error)


def test_the_explorer_shows_a_causal_lms_next_tokens(tmp_path, monkeypatch):
    from tests.support.apphelp import app

    folder, model, fast = _save(tmp_path, "gpt2")
    monkeypatch.setenv(R.MODEL_DIRS_ENV, str(tmp_path))
    at = app("model=gpt2&text=the+cat+sat", timeout=120)
    assert not at.exception and any(h.value == "Next token" for h in at.subheader)
    table = next(d.value for d in at.dataframe if "next token" in d.value.columns)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([fast("the cat sat")["input_ids"]])).logits[0, -1], -1)
    assert table["next token"].iloc[0] == fast.convert_ids_to_tokens(int(p.argmax())) and len(table) == 10
    plain = app("text=the+cat+sat", timeout=120)  # the random layer predicts nothing, and says where to look
    assert not any(h.value == "Next token" for h in plain.subheader)
    assert any("choose **gpt2** as the sidebar's model" in c.value for c in plain.caption)
    asked = app("model=gpt2&text=the+cat+sat&generate=3&chat=1", timeout=120)  # its tokenizer has no template
    assert not asked.exception and dict(asked.query_params).get("chat") == "1"
    assert any("gpt2 has no chat template" in e.value for e in asked.error)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_an_encoder_decoders_three_stacks_equal_its_own_attentions(tmp_path, name):
    """Encoder, decoder and cross attention of a padded batch, every layer, against
    transformers' own output_attentions on the same ids (the decoder after its start token)."""
    from transformers import AutoModelForSeq2SeqLM

    folder, _model, fast = _save(tmp_path, name)
    source = ["the mat was tired", "it sat"]
    ref_model = AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = fast(source, return_tensors="pt", padding=True)
    start = ref_model.config.decoder_start_token_id
    rows = [[start] + fast(t)["input_ids"] for t in TEXTS]
    Ld = max(map(len, rows))
    dec = torch.tensor([r + [fast.pad_token_id] * (Ld - len(r)) for r in rows])
    dec_mask = torch.tensor([[1] * len(r) + [0] * (Ld - len(r)) for r in rows])
    with torch.no_grad():
        out = ref_model(**enc, decoder_input_ids=dec, decoder_attention_mask=dec_mask, output_attentions=True)
    want = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    real_enc, real_dec = enc["attention_mask"].sum(1).tolist(), dec_mask.sum(1).tolist()
    for stack, ref in want.items():
        ref = torch.stack(ref)  # (layers, N, H, L, S)
        r = compute(AttentionConfig(text="\n".join(TEXTS), source="\n".join(source), model=str(folder), stack=stack))
        assert r.layer_weights.shape == ref.shape, stack
        assert r.mask_name == ("causal" if stack == "decoder" else "padding")
        for n in range(2):
            q = real_enc[n] if stack == "encoder" else real_dec[n]
            k = real_dec[n] if stack == "decoder" else real_enc[n]
            assert (r.layer_weights[:, n, :, :q, :k] - ref[:, n, :, :q, :k]).abs().max() <= 1e-6, stack
        queries = source if stack == "encoder" else TEXTS
        assert r.lengths == (real_enc if stack == "encoder" else real_dec)
        assert r.tokens[1][int(stack != "encoder")] == queries[1].split()[0]
        if stack == "cross":
            assert r.source_tokens[0][:2] == ["the", "mat"] and r.weights.shape[-1] == enc["input_ids"].shape[1]
    t5_layers = {"encoder": 2, "decoder": 3} if name == "t5" else {"encoder": 2, "decoder": 2}
    with pytest.raises(ValueError, match="does not exist"):
        compute(AttentionConfig(text=TEXTS[0], model=str(folder), stack="encoder", layer=t5_layers["encoder"]))


def test_a_decoder_only_model_refuses_a_source_and_names_its_own_mask(tmp_path):
    folder, _model, _fast = _save(tmp_path, "gpt2")
    r = compute(AttentionConfig(text=TEXTS[0], model=str(folder), mask="window"))
    assert r.mask_name == "causal" and any("own mask (causal)" in n for n in r.notes)
    assert float(r.weights[0, :, 0, 1:].abs().max()) == 0.0  # the first token sees only itself
    with pytest.raises(ValueError, match="encoder–decoder"):
        compute(AttentionConfig(text=TEXTS[0], source="the mat", model=str(folder)))


def test_a_vision_transformers_weights_equal_its_own_on_the_same_pixels(tmp_path):
    """ViT on the image page's seam: its processor's pixels, [CLS] then 4 × 4 patches."""
    import numpy as np

    from attnviz import inputs as I
    from attnviz.models.registry import load
    from attnviz.models.vision import image_tokens
    from attnviz.run.run import run

    folder, model, processor = _save(tmp_path, "vit")
    image = I.sample_image("shapes")  # (64, 64, 3) in [0, 1]
    vit = load(str(folder))
    inp = image_tokens(vit, image)
    r = run(inp, vit, layer=1)
    pixels = processor(images=(image * 255).round().astype(np.uint8), return_tensors="pt")["pixel_values"]
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        ref = torch.stack(model(pixel_values=pixels, output_attentions=True).attentions)  # (layers, 1, H, 17, 17)
    assert r.layer_weights.shape == ref.shape == (2, 1, 4, 17, 17)
    assert (r.layer_weights - ref).abs().max() <= 1e-6
    assert inp.labels[:3] == ["[CLS]", "r0c0", "r0c1"] and inp.meta["grid"] == (4, 4) and inp.meta["first"] == 1
    assert r.kind == "image" and torch.equal(r.weights, r.layer_weights[1])
    with pytest.raises(ValueError, match="reads images"):
        compute(AttentionConfig(text="the cat", model=str(folder)))


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_generation_keeps_the_attention_that_chose_each_token(tmp_path, name):
    """Each step's rows equal one forward pass over the final sequence, and each token is
    the argmax there."""
    from attnviz.models.generate import greedy
    from attnviz.models.hf import HFModel

    folder, _model, fast = _save(tmp_path, name)
    hf = HFModel.from_folder(name, folder)
    ids = fast(TEXTS[0])["input_ids"]
    g = greedy(hf, ids, 5)
    seq = fast.convert_tokens_to_ids(g.tokens)
    assert 1 <= g.count <= 5 and g.context == len(ids) and seq[: len(ids)] == ids
    assert g.count == 5 or seq[-1] == hf.model.config.eos_token_id  # it stops only at the end of text
    weights, logits = hf.attentions(torch.tensor([seq]), [len(seq)])  # (layers, 1, H, T+1, T+1)
    for t in range(g.count):
        q = len(ids) - 1 + t  # the position whose logits chose token t
        assert int(logits[0, q].argmax()) == seq[q + 1]
        assert (g.rows[t, :, :, : q + 1] - weights[:, 0, :, q, : q + 1]).abs().max() <= 1e-5
        assert float(g.rows[t, :, :, q + 1:].abs().sum()) == 0.0
        assert g.probs[t] == pytest.approx(float(torch.softmax(logits[0, q], -1).max()), abs=1e-5)
    with pytest.raises(ValueError, match="between 1 and 32"):
        greedy(hf, ids, 33)
    with pytest.raises(ValueError, match="reads at most 64"):
        greedy(hf, list(range(4, 10)) * 10, 8)


def test_a_question_is_asked_in_the_models_own_chat_template(tmp_path):
    """``chat_ids`` writes the user's turn and opens the assistant's with the tokenizer's own template (its
    special tokens written by the template, none added twice); a tokenizer without one is refused in a
    sentence that says what to do instead."""
    from attnviz.models.generate import chat_ids
    from attnviz.models.hf import HFModel

    folder, _model, fast = _save(tmp_path, "llama")
    hf = HFModel.from_folder("llama", folder)
    with pytest.raises(ValueError, match="has no chat template.*As a question"):
        chat_ids(hf, "the cat sat")
    hf.tokenizer.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                                  "{% if add_generation_prompt %}<s>assistant:{% endif %}")
    ids = chat_ids(hf, "the cat sat")
    want = hf.tokenizer("<s>user: the cat sat</s><s>assistant:", add_special_tokens=False)["input_ids"]
    assert ids == want and ids != hf.tokenizer("the cat sat")["input_ids"]
