"""The logit lens (attnviz.analysis.lens, through attnviz.logit_lens) on tiny GPT-2, LLaMA and GPT-NeoX
folders with every bias and norm perturbed, and on Watch it learn's kind of model: final-scale's steps
from point to point are direct logit attribution's parts at every position; the last point of either
form is the model's own distribution; the points' order; positions; every refusal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.subjects import TinySubject, registry_subject
from attnviz.models.tiny import AttentionOnly
from tests.support import hfmodels
from tests.support.reference import assert_within

TEXT, ANSWER, WRONG = "the cat sat on the mat because it", "was", "tired"
TINY_TEXT = "BOS 5 9 12 7 5 9 12"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("lens")
    return {kind: hfmodels.perturbed(root, kind)[0] for kind in ("gpt2", "llama", "neox")}


@pytest.fixture(scope="module")
def tiny():
    return AttentionOnly(vocab=32, length=19, layers=2, heads=2, d_model=32, seed=3).eval()


def _model(kind, folders, tiny):
    return (tiny, TINY_TEXT, "12", "14") if kind == "tiny" else (str(folders[kind]), TEXT, ANSWER, WRONG)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox", "tiny"])
@pytest.mark.parametrize("with_wrong", [False, True])
def test_final_scale_steps_are_the_logit_attribution_of_what_each_layer_added_at_every_position(
        folders, tiny, kind, with_wrong):
    model, text, answer, wrong = _model(kind, folders, tiny)
    wrong = wrong if with_wrong else None
    r = attnviz.logit_lens(model, text, answer=answer, wrong=wrong)
    assert r.mode == "final-scale"
    middles = any(p.endswith("middle") for p in r.points)
    assert middles == (kind in ("gpt2", "llama"))  # NeoX: attention and MLP side by side; tiny: no MLP
    words = text.split()  # one token a word, for both tokenizers
    assert len(words) == len(r.tokens)
    for pos in range(len(r.tokens)):  # a causal model: the prefix's run is this position's
        a = attnviz.logit_attribution(model, " ".join(words[:pos + 1]), answer=answer, wrong=wrong)
        steps = [a.embeddings + a.biases]
        for layer in range(len(a.mlps)):
            attention = a.heads[layer].sum() + a.attention_biases[layer]
            steps += [attention, a.mlps[layer]] if middles else [attention + a.mlps[layer]]
        assert_within(np.diff(r.answer_logit[:, pos]), steps[1:])
        assert_within(r.answer_logit[0, pos], steps[0])
        assert_within(r.answer_logit[-1, pos], a.logit_difference)
    assert np.ptp(np.diff(r.answer_logit, axis=0)) > 1e-3


def _own_logits(model, text, kind):
    if kind == "tiny":
        with torch.no_grad():
            return model(torch.tensor([TinySubject(model, "t").ids(text)]))[0][0].double()  # (L, V)
    subject = registry_subject(model)
    with torch.no_grad():
        return subject.hf.model(torch.tensor([subject.ids(text)])).logits[0].double()  # (L, V)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox", "tiny"])
@pytest.mark.parametrize("mode", ["final-scale", "per-layer"])
def test_the_last_point_is_the_models_own_distribution(folders, tiny, kind, mode):
    model, text, answer, _wrong = _model(kind, folders, tiny)
    r = attnviz.logit_lens(model, text, mode=mode, answer=answer, k=4)
    own = _own_logits(model, text, kind)  # (L, V)
    a = int(answer) if kind == "tiny" else registry_subject(model).token(answer, "answer")
    assert_within(r.answer_logit[-1], own[:, a] - own.mean(-1))
    assert_within(r.answer_prob[-1], torch.softmax(own, -1)[:, a])
    np.testing.assert_array_equal(r.top_ids[-1], own.topk(4, -1).indices.numpy())
    assert np.abs(r.kl[-1]).max() < 1e-5 and (r.kl[:-1] > -1e-6).all() and r.kl[:-1].max() > 1e-4
    assert_within(r.entropy[-1], -(torch.softmax(own, -1) * torch.log_softmax(own, -1)).sum(-1))
    assert r.answer_rank.min() >= 0 and (r.answer_rank[-1] == (own > own[:, a:a + 1]).sum(-1).numpy()).all()


def test_the_points_follow_transformer_lens_order_and_mid_false_leaves_the_middles_out(folders):
    r = attnviz.logit_lens(str(folders["gpt2"]), TEXT)
    assert r.points == ["embeddings", "layer 0 middle", "layer 0 end", "layer 1 middle", "layer 1 end"]
    assert r.top_ids.shape == (5, len(r.tokens), 5) and r.kl.shape == r.entropy.shape == (5, len(r.tokens))
    assert r.answer_logit is None and r.top_tokens[-1][0][0] == registry_subject(str(folders["gpt2"])).spelled(
        [int(r.top_ids[-1, 0, 0])])[0]
    short = attnviz.logit_lens(str(folders["gpt2"]), TEXT, mid=False)
    assert short.points == ["embeddings", "layer 0 end", "layer 1 end"]
    np.testing.assert_array_equal(short.kl, r.kl[[0, 2, 4]])
    assert attnviz.logit_lens(str(folders["neox"]), TEXT).points == ["embeddings", "layer 0 end", "layer 1 end"]


def test_the_two_forms_differ_before_the_last_point_and_agree_at_it(folders):
    a = attnviz.logit_lens(str(folders["llama"]), TEXT, answer=ANSWER)
    b = attnviz.logit_lens(str(folders["llama"]), TEXT, answer=ANSWER, mode="per-layer")
    assert_within(a.answer_logit[-1], b.answer_logit[-1])
    assert np.abs(a.answer_logit[:-1] - b.answer_logit[:-1]).max() > 1e-3


def test_positions_pick_columns_of_the_whole_reading(folders):
    whole = attnviz.logit_lens(str(folders["gpt2"]), TEXT, answer=ANSWER, wrong=WRONG)
    some = attnviz.logit_lens(str(folders["gpt2"]), TEXT, answer=ANSWER, wrong=WRONG, positions=[0, -1])
    last = len(whole.tokens) - 1
    assert some.positions == [0, last]
    for name in ("top_ids", "top_probs", "entropy", "kl", "answer_logit", "answer_prob", "answer_rank"):
        assert_within(getattr(some, name), getattr(whole, name)[:, [0, last]])
    assert attnviz.logit_lens(str(folders["gpt2"]), TEXT, positions=2).positions == [2]


def test_the_record_is_json_with_its_definitions(folders):
    r = attnviz.logit_lens(str(folders["gpt2"]), TEXT, answer=ANSWER, k=2)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["mode"] == "final-scale" and "final stream's norm scale" in d["definition"]
    assert "KL(p ‖ q)" in d["numbers"] and d["answer"] == ANSWER and len(d["top_ids"][0][0]) == 2


@pytest.mark.parametrize("call, says", [
    (dict(answer="the cat"), "is not one token for .*: its tokenizer spells it as 2 tokens"),
    (dict(positions=9), "Position 9 is out of range: the text has 8 tokens"),
    (dict(positions=[0, -9]), "Position -9 is out of range"),
    (dict(positions=[]), "positions is empty"),
    (dict(mode="final"), "mode must be one of final-scale, per-layer"),
    (dict(k=0), "k must be a whole number from 1 to"),
    (dict(wrong="was"), "A wrong token needs an answer"),
    (dict(answer="was", wrong="was"), "the same token"),
])
def test_bad_input_is_refused_in_one_sentence(folders, call, says):
    with pytest.raises(ValueError, match=says) as e:
        attnviz.logit_lens(str(folders["gpt2"]), TEXT, **call)
    assert "\n" not in str(e.value)


def test_a_model_without_an_unembedding_is_named_for_what_it_is(tmp_path):
    folder, _m, _tok = hfmodels.save(tmp_path, "bert")
    with pytest.raises(ValueError, match="is an encoder: it has no unembedding .*The logit lens needs a causal"):
        attnviz.logit_lens(str(folder), TEXT)
    with pytest.raises(ValueError, match="is an encoder: it has no unembedding"):
        attnviz.train_lens(str(folder), steps=1)


def test_a_lens_asks_for_per_layer_and_fits_its_model(folders, tiny):
    lens = attnviz.train_lens(tiny, steps=1)
    with pytest.raises(ValueError, match='use mode="per-layer"'):
        attnviz.logit_lens(tiny, TINY_TEXT, lens=lens, mode="final-scale")
    narrow = AttentionOnly(vocab=32, length=19, layers=3, heads=2, d_model=16, seed=3).eval()
    with pytest.raises(ValueError, match="The lens was tuned for a model of 2 layers and width 32; the tiny model has "
                                         "3 layers and width 16."):
        attnviz.logit_lens(narrow, TINY_TEXT, lens=lens)


def test_a_text_past_the_lens_bound_is_refused(folders, tmp_path):
    import shutil

    from attnviz import limits

    folder = hfmodels.reading(Path(shutil.copytree(folders["llama"], tmp_path / "llama")), 4 * limits.MAX_LENS_TOKENS)
    with pytest.raises(ValueError, match=f"has {limits.MAX_LENS_TOKENS + 1} tokens; the logit lens takes at most "
                                         f"{limits.MAX_LENS_TOKENS}"):
        attnviz.logit_lens(str(folder), [5] * (limits.MAX_LENS_TOKENS + 1))


def test_where_the_answer_arrives_is_the_first_point_it_is_top_at_the_last_position():
    """Hand-made ranks (points × positions, 0: the top token): the sentence names the first point where the answer
    is on top at the last position read, and says whether it stays there."""
    from types import SimpleNamespace

    from attnviz.analysis.lens import arrival, arrival_words

    points = ["embeddings", "layer 0 end", "layer 1 end", "layer 2 end"]

    def result(last_column, answer="ĠParis"):
        ranks = np.array([[5, r] for r in last_column])  # the first position's ranks do not count
        return SimpleNamespace(answer_rank=ranks, answer=answer, points=points)

    assert arrival(result([7, 3, 0, 0])) == (2, True)
    assert arrival_words(result([7, 3, 0, 0])) == "“ĠParis” first becomes the top token at layer 1 end and stays on " \
                                                   "top to the end."
    assert arrival(result([7, 0, 2, 0])) == (1, False)
    assert arrival_words(result([7, 0, 2, 0])) == "“ĠParis” first becomes the top token at layer 0 end."
    assert arrival(result([7, 3, 2, 1])) == (None, False)
    assert "is never the top token" in arrival_words(result([7, 3, 2, 1]))
    assert arrival_words(SimpleNamespace(answer_rank=None, answer=None, points=points)) is None
