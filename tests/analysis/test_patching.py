"""Activation patching and direct logit attribution (attnviz.analysis.patching, through the
notebook's public functions): against one hooked forward pass per head and per position
(tests/support/reference.py) on tiny GPT-2, LLaMA (grouped-query) and GPT-NeoX folders and on
Watch it learn's model; the attribution's parts against the logit difference; every refusal."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis.patching import patch
from attnviz.analysis.subjects import TinySubject, registry_subject
from attnviz.models.tiny import AttentionOnly
from tests.support import hfmodels, reference

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"  # the same 6 words, two swapped
ANSWER, WRONG = "it", "was"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal")
    return {kind: hfmodels.save(root, kind)[0] for kind in ("gpt2", "llama", "neox")}


def _ids(subject, text):
    return torch.tensor([subject.ids(text)])


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox"])
@pytest.mark.parametrize("wrong", [WRONG, None])
def test_every_head_patched_matches_one_hooked_forward_pass_per_head(folders, kind, wrong):
    p = attnviz.patch_heads(str(folders[kind]), CLEAN, CORRUPTED, answer=ANSWER, wrong=wrong)
    subject = registry_subject(str(folders[kind]))
    a, w = subject.token(ANSWER, "answer"), None if wrong is None else subject.token(wrong, "wrong")
    want = reference.hf_patched_heads(subject.hf.model, subject.stack.o, _ids(subject, CLEAN),
                                      _ids(subject, CORRUPTED), a, w)
    assert p.heads.shape == (2, 4)
    np.testing.assert_allclose(p.heads, want, atol=1e-5)
    assert np.ptp(want) > 1e-4  # the heads differ: a wrong head would show
    assert p.metric_name == ("logit difference" if wrong else "log p(answer)")


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox"])
def test_the_residual_stream_patched_matches_one_hooked_forward_pass_per_position(folders, kind):
    p = attnviz.patch_residual(str(folders[kind]), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    subject = registry_subject(str(folders[kind]))
    a, w = subject.token(ANSWER, "answer"), subject.token(WRONG, "wrong")
    want = reference.hf_patched_residual(subject.hf.model, subject.stack.blocks, _ids(subject, CLEAN),
                                         _ids(subject, CORRUPTED), a, w)
    L = len(p.clean_tokens)
    assert p.residual.shape == (2, L) and p.heads is None
    np.testing.assert_allclose(p.residual, want, atol=1e-5)
    # Into layer 0 the stream is the embeddings: where the tokens agree the patch changes nothing.
    # Into any layer it is the same before the first position that differs.
    same = [i for i in range(L) if i not in p.differ]
    np.testing.assert_allclose(p.residual[0, same], p.corrupted, atol=1e-5)
    np.testing.assert_allclose(p.residual[:, :p.differ[0]], p.corrupted, atol=1e-5)
    assert np.abs(p.residual[0, p.differ] - p.corrupted).max() > 1e-4


def test_the_clean_and_corrupted_metrics_are_the_models_own(folders):
    subject = registry_subject(str(folders["gpt2"]))
    p = attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    a, w = subject.token(ANSWER, "answer"), subject.token(WRONG, "wrong")
    for text, got in ((CLEAN, p.clean), (CORRUPTED, p.corrupted)):
        with torch.no_grad():
            logits = subject.hf.model(_ids(subject, text)).logits[0, -1]
        assert got == pytest.approx(float(logits[a] - logits[w]), abs=1e-5)
    assert p.clean_tokens == ["the", "cat", "sat", "on", "the", "mat"] and p.differ == [1, 5]
    normalised = p.normalised(p.heads)
    np.testing.assert_allclose(normalised, (p.heads - p.corrupted) / (p.clean - p.corrupted))


@pytest.fixture(scope="module")
def tiny():
    model = AttentionOnly(vocab=32, length=19, layers=2, heads=2, d_model=32, seed=3).eval()
    return model


def test_the_tiny_models_reference_is_its_forward(tiny):
    ids = torch.tensor([[0, 5, 9, 12, 5, 9]])
    with torch.no_grad():
        np.testing.assert_allclose(reference.tiny_forward(tiny, ids), tiny(ids)[0], atol=1e-5)


@pytest.mark.parametrize("wrong", ["12", None])
def test_the_tiny_models_heads_match_its_formula_written_out(tiny, wrong):
    clean, corrupted = "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9"
    p = attnviz.patch_heads(tiny, clean, corrupted, answer="12", wrong=None if wrong is None else "14")
    ids = [torch.tensor([TinySubject(tiny, "t").ids(t)]) for t in (clean, corrupted)]
    want = reference.tiny_patched_heads(tiny, *ids, 12, None if wrong is None else 14)
    np.testing.assert_allclose(p.heads, want, atol=1e-5)
    assert np.ptp(want) > 1e-4


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox"])
def test_the_attributions_parts_sum_to_the_logit_difference(folders, kind):
    a = attnviz.logit_attribution(str(folders[kind]), CLEAN, answer=ANSWER, wrong=WRONG)
    assert a.heads.shape == (2, 4) and a.mlps.shape == (2,)
    assert a.total == pytest.approx(a.logit_difference, abs=1e-4)
    assert np.abs(a.heads).max() > 1e-4 and np.abs(a.mlps).max() > 1e-4  # every part counted, none zero
    assert a.norm == ("rms" if kind == "llama" else "layer")


def test_the_tiny_models_attribution_is_its_heads_writing_onto_the_answer(tiny):
    a = attnviz.logit_attribution(tiny, "BOS 5 9 12 7 5 9", answer="12", wrong="14")
    assert a.norm == "none" and not a.mlps.any() and a.biases == 0
    assert a.total == pytest.approx(a.logit_difference, abs=1e-5)
    # By hand: head h's output at the last position, through W_O's columns of h, onto W_U[12] − W_U[14].
    subject = TinySubject(tiny, "t")
    trace = subject.stack.run(torch.tensor([subject.ids("BOS 5 9 12 7 5 9")]))
    d = (tiny.unembed[12] - tiny.unembed[14]).detach()
    for layer in range(2):
        w_o = tiny.layers[layer].out_proj.weight.detach()
        for h in range(2):
            part = w_o[:, h * 16:(h + 1) * 16] @ trace.z[layer][0, -1, h * 16:(h + 1) * 16]
            assert a.heads[layer, h] == pytest.approx(float(part @ d), abs=1e-5)


def test_patching_refuses_prompts_of_different_lengths_naming_both_counts_and_where(folders):
    with pytest.raises(ValueError, match=r"clean prompt has 6 tokens and the corrupted one 5.*position 1 \(“cat” "
                                         r"against “mat”\)"):
        attnviz.patch_heads(str(folders["gpt2"]), CLEAN, "the mat sat on the", answer=ANSWER)
    with pytest.raises(ValueError, match=r"6 tokens and the corrupted one 7.*position 6 \(where the clean one ends"):
        attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CLEAN + " it", answer=ANSWER)


@pytest.mark.parametrize("answer, words", [("cat sat", "is not one token.*2 tokens \\(cat sat\\)"),
                                           ("zebra", "“zebra” is not in .*vocabulary.*unknown token \\[UNK\\]"),
                                           ("", "is not one token")])
def test_an_answer_that_is_not_one_token_is_refused(folders, answer, words):
    with pytest.raises(ValueError, match=words):
        attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CORRUPTED, answer=answer)


def test_an_answer_and_a_wrong_token_that_are_one_are_refused(folders):
    with pytest.raises(ValueError, match="the same token"):
        attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CORRUPTED, answer="it", wrong="it")


@pytest.mark.parametrize("kind", ["gpt2", "llama", "neox"])
def test_without_a_wrong_token_the_attributions_parts_sum_to_the_answers_centred_logit(folders, kind):
    a = attnviz.logit_attribution(str(folders[kind]), CLEAN, answer=ANSWER)
    subject = registry_subject(str(folders[kind]))
    with torch.no_grad():
        logits = subject.hf.model(_ids(subject, CLEAN)).logits[0, -1].double()
    logit = float(logits[subject.token(ANSWER, "answer")])
    assert a.wrong is None and a.raw_logit == pytest.approx(logit, abs=1e-5)
    assert a.logit_difference == pytest.approx(logit - float(logits.mean()), abs=1e-5)  # TransformerLens's centring
    assert a.total == pytest.approx(a.logit_difference, abs=1e-4)
    assert "mean" in a.to_dict()["definition"] and "wrong" not in a.to_dict()["definition"]


def test_an_answer_may_be_a_token_id(folders, tiny):
    folder = str(folders["gpt2"])
    subject = registry_subject(folder)
    a, w = subject.token(ANSWER, "answer"), subject.token(WRONG, "wrong")
    by_id = attnviz.patch_heads(folder, CLEAN, CORRUPTED, answer=a, wrong=w)
    by_word = attnviz.patch_heads(folder, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG)
    np.testing.assert_array_equal(by_id.heads, by_word.heads)
    assert (by_id.answer, by_id.wrong) == (ANSWER, WRONG)  # spelled as the tokenizer spells them
    assert attnviz.logit_attribution(folder, CLEAN, answer=a, wrong=w).total == pytest.approx(
        attnviz.logit_attribution(folder, CLEAN, answer=ANSWER, wrong=WRONG).total, abs=1e-6)
    assert attnviz.patch_heads(tiny, "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9", answer=12, wrong=14).answer == "12"
    with pytest.raises(ValueError, match="answer 10000 is not a token id of .*ids are 0–"):
        attnviz.patch_heads(folder, CLEAN, CORRUPTED, answer=10_000)


def test_an_encoder_has_no_next_token_to_patch_toward(tmp_path):
    folder = hfmodels.save(tmp_path, "bert")[0]
    with pytest.raises(ValueError, match="is an encoder: it has no next token to patch toward"):
        attnviz.patch_heads(str(folder), CLEAN, CORRUPTED, answer="it")
    with pytest.raises(ValueError, match="is the random layer"):
        attnviz.patch_heads("random", CLEAN, CORRUPTED, answer="it")


def test_the_tiny_model_names_its_tokens_and_refuses_others(tiny):
    with pytest.raises(ValueError, match="“99” is not one of the tiny model's tokens: 3–31, or BOS"):
        attnviz.patch_heads(tiny, "BOS 5 99", "BOS 5 9", answer="12")
    with pytest.raises(ValueError, match="reads at most 19"):
        attnviz.patch_heads(tiny, "BOS " + "5 " * 19, "BOS " + "6 " * 19, answer="12")
    with pytest.raises(ValueError, match="empty"):
        attnviz.patch_heads(tiny, "", "", answer="12")


def test_a_prompt_longer_than_patchings_bound_is_refused_naming_it(tmp_path):
    from attnviz import limits

    folder = hfmodels.reading(hfmodels.save(tmp_path, "llama")[0], 4 * limits.MAX_PATCH_TOKENS)
    n = limits.MAX_PATCH_TOKENS - 1  # words, and one more: the bound itself
    at_bound = attnviz.patch_heads(str(folder), "the " * n + "cat", "the " * n + "mat", answer="it")
    assert len(at_bound.clean_tokens) == limits.MAX_PATCH_TOKENS
    with pytest.raises(ValueError, match=f"tokens; patching takes at most {limits.MAX_PATCH_TOKENS} "):
        attnviz.patch_heads(str(folder), "the " * n + "the cat", "the " * n + "the mat", answer="it")


def test_prompts_may_be_token_ids(folders, tiny):
    p = patch(TinySubject(tiny, "t"), [0, 5, 9, 12, 7, 5, 9], [0, 5, 9, 14, 7, 5, 9], answer="12", wrong="14")
    q = attnviz.patch_heads(tiny, "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9", answer="12", wrong="14")
    np.testing.assert_array_equal(p.heads, q.heads)
    with pytest.raises(ValueError, match="Token ids must be in 0–"):
        attnviz.patch_heads(str(folders["gpt2"]), [1, 2, 10_000], [1, 2, 3], answer="it")


def test_two_prompts_that_give_the_same_metric_have_nothing_to_normalise(folders):
    p = attnviz.patch_heads(str(folders["gpt2"]), CLEAN, CLEAN, answer=ANSWER, wrong=WRONG)
    with pytest.raises(ValueError, match="give the same logit difference"):
        p.normalised(p.heads)
    assert p.to_dict()["heads_normalised"] is None


def test_sweeps_on_one_shared_model_in_two_threads_do_not_mix(folders):
    """The registry's model is shared by every session: one sweep's hooks act in its own thread only."""
    folder = str(folders["llama"])
    prompts = [CORRUPTED, "the cat sat on the cat"]
    alone = [attnviz.patch_heads(folder, CLEAN, c, answer=ANSWER, wrong=WRONG).heads for c in prompts]
    together, gate = [None, None], threading.Barrier(2)

    def sweep(i):
        gate.wait()
        for _ in range(3):
            together[i] = attnviz.patch_heads(folder, CLEAN, prompts[i], answer=ANSWER, wrong=WRONG).heads

    threads = [threading.Thread(target=sweep, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for got, want in zip(together, alone, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(alone[0] - alone[1]).max() > 1e-4  # two different sweeps: a mix-up would show


def test_each_layers_batch_runs_where_step_says_with_the_same_numbers(folders):
    """``step(work)`` runs each layer's batch (the app's compute workers): once per layer and part,
    on the worker's thread (the hooks are that thread's own), and the numbers do not change."""
    from concurrent.futures import ThreadPoolExecutor

    subject = registry_subject(str(folders["gpt2"]))
    here = patch(subject, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, heads=True, residual=True)
    threads = []
    with ThreadPoolExecutor(1, thread_name_prefix="worker") as pool:
        def step(work):
            return pool.submit(lambda: threads.append(threading.current_thread().name) or work()).result()

        there = patch(subject, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, heads=True, residual=True, step=step)
    assert len(threads) == 2 * subject.stack.layers and all(t.startswith("worker") for t in threads)
    np.testing.assert_allclose(there.heads, here.heads, atol=1e-6)
    np.testing.assert_allclose(there.residual, here.residual, atol=1e-6)
    assert np.ptp(here.heads) > 1e-4


def test_a_long_prompts_layers_run_in_batches_of_bounded_tokens_with_the_same_numbers(folders, monkeypatch):
    from attnviz import limits

    subject = registry_subject(str(folders["gpt2"]))
    whole = patch(subject, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, heads=True, residual=True)
    L = len(whole.clean_tokens)
    monkeypatch.setattr(limits, "PATCH_BATCH_TOKENS", 2 * L)  # two patched runs a batch
    sizes, fractions = [], []

    def step(work):
        sizes.append(len(work.args[1]))
        return work()

    split = patch(subject, CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, heads=True, residual=True, step=step,
                  progress=fractions.append)
    H, layers = subject.stack.heads, subject.stack.layers
    assert sizes == layers * [2] * (H // 2) + layers * [2] * (L // 2)  # 4 heads, 6 positions: two at a time
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    np.testing.assert_allclose(split.heads, whole.heads, atol=1e-6)
    np.testing.assert_allclose(split.residual, whole.residual, atol=1e-6)
