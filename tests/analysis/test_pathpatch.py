"""Direct path patching (attnviz.analysis.pathpatch, through attnviz.path_patch): against
TransformerLens 4.3's ``get_act_patch_direct_path_all_sources`` on GPT-2, LLaMA and GPT-NeoX
folders with every norm and bias perturbed, in the three components (a grouped-query model's
k and v, which TransformerLens refuses, against the same model with its KV heads repeated per
query head); against the edge written out on Watch it learn's model; the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnviz
from attnviz.models.tiny import AttentionOnly
from tests.support import circuits, hfmodels

CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"
ANSWER, WRONG = "it", "was"


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def pair(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("paths")
    folder, _model, tok = circuits.perturbed(root, request.param)
    reference = circuits.without_shared_kv_heads(root, folder) if request.param == "llama" else folder
    return request.param, folder, circuits.bridge(reference), tok


def _transformer_lens(bridge, tok, component, wrong):
    from transformer_lens import patching

    clean, corrupted = (torch.tensor([tok(t)["input_ids"]]) for t in (CLEAN, CORRUPTED))
    _logits, clean_cache = bridge.run_with_cache(clean)
    _logits, corrupted_cache = bridge.run_with_cache(corrupted)
    a = tok.convert_tokens_to_ids(ANSWER)
    if wrong is None:
        def metric(logits):
            return torch.log_softmax(logits[0, -1].double(), -1)[a]
    else:
        w = tok.convert_tokens_to_ids(wrong)

        def metric(logits):
            return logits[0, -1, a] - logits[0, -1, w]
    return patching.get_act_patch_direct_path_all_sources(bridge, corrupted, clean_cache, corrupted_cache, metric,
                                                          component=component, verbose=False).double()


@pytest.mark.parametrize("component", ["q", "k", "v"])
def test_every_path_as_transformer_lens_patches_it(pair, component):
    kind, folder, bridge, tok = pair
    got = attnviz.path_patch(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG, component=component)
    want = _transformer_lens(bridge, tok, component, WRONG)
    later = torch.zeros(2, 4, 2, 4, dtype=torch.bool)
    later[0, :, 1] = True
    assert got.shape == (2, 4, 2, 4) and torch.equal(~torch.isnan(got), later)  # NaN: no path, not measured
    diff = (got[later] - want[later]).abs()
    assert (diff <= 1e-4 * torch.clamp(want[later].abs(), min=1)).all(), float(diff.max())
    corrupted = float(attnviz.patch_heads(str(folder), CLEAN, CORRUPTED, answer=ANSWER, wrong=WRONG).corrupted)
    assert float((got[later] - corrupted).abs().max()) > 1e-3  # paths that move the answer: a wrong one would show


def test_the_log_probability_metric_too(pair):
    kind, folder, bridge, tok = pair
    got = attnviz.path_patch(str(folder), CLEAN, CORRUPTED, answer=ANSWER, component="v")
    want = _transformer_lens(bridge, tok, "v", None)
    torch.testing.assert_close(got[0, :, 1], want[0, :, 1], atol=1e-4, rtol=1e-4)


def _tiny_path(model, clean, corrupted, s, h, r, g, component):
    """One edge written out on the tiny model: its layers one by one, the receiver's layer twice
    (once with the component read from the patched stream, for the receiver's head alone)."""
    def run(ids, stream_edit=None):
        x = model.inputs(ids)
        zs = []
        for i, layer in enumerate(model.layers):
            steps = layer.steps(x, attn_mask=model.mask[:x.shape[1], :x.shape[1]])
            heads = steps.head_outputs  # (1, H, L, D)
            if stream_edit is not None and i == r:
                inputs = {"q": x, "k": x, "v": x}
                inputs[component] = x + stream_edit
                other = layer.steps(inputs["q"], inputs["k"], inputs["v"], attn_mask=model.mask[:x.shape[1],
                                                                                            :x.shape[1]])
                heads = heads.clone()
                heads[:, g] = other.head_outputs[:, g]
            zs.append(heads)
            x = x + layer.out_proj(heads.transpose(1, 2).flatten(2))
        return x[0, -1] @ model.unembed.T, zs

    with torch.no_grad():
        _lc, zc = run(clean)
        _lk, zk = run(corrupted)
        D = zc[0].shape[-1]
        w_o = model.layers[s].out_proj.weight[:, h * D:(h + 1) * D]  # (E, D)
        delta = (zc[s][0, h] - zk[s][0, h]) @ w_o.T  # (L, E)
        return run(corrupted, delta)[0]


@pytest.mark.parametrize("component", ["q", "k", "v"])
def test_the_tiny_models_paths_are_the_edge_written_out(component):
    # Sharper attention and larger writes than at initialisation, so that paths move the answer, yet well
    # inside float32's range: the logit difference is about 7 and the paths differ by about 1 to 4. (Weights
    # × 4 and an unembedding × 5 saturated every softmax: a logit difference of -5,094 and q and v paths
    # equal to float32's rounding there, which passed or failed by machine.)
    model = AttentionOnly(vocab=32, length=19, layers=3, heads=2, d_model=32, seed=0).eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.in_proj_weight.mul_(1.5)
            layer.out_proj.weight.mul_(1.5)
    clean, corrupted = "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9"
    got = attnviz.path_patch(model, clean, corrupted, answer="12", wrong="14", component=component)
    ids = [torch.tensor([[0, 5, 9, t, 7, 5, 9]]) for t in (12, 14)]
    for s, h, r, g in ((0, 1, 1, 0), (0, 0, 2, 1), (1, 1, 2, 0)):
        logits = _tiny_path(model, *ids, s, h, r, g, component)
        assert float(got[s, h, r, g]) == pytest.approx(float(logits[12] - logits[14]), rel=1e-5, abs=1e-5)
    assert torch.isnan(got[1, :, 1]).all() and torch.isnan(got[2]).all()
    assert float(np.nanmax(got.numpy()) - np.nanmin(got.numpy())) > 0.1  # paths that differ, far above rounding


@pytest.mark.parametrize("bad, words", [
    (dict(corrupted="the mat sat on the"), "clean prompt has 6 tokens and the corrupted one 5"),
    (dict(answer="cat sat"), "is not one token"),
    (dict(component="o"), "component must be 'q', 'k' or 'v'"),
])
def test_bad_input_gets_one_clear_line(tmp_path, bad, words):
    folder = hfmodels.save(tmp_path, "gpt2")[0]
    args = dict(clean=CLEAN, corrupted=CORRUPTED, answer=ANSWER, component="q") | bad
    with pytest.raises(ValueError, match=words) as e:
        attnviz.path_patch(str(folder), args.pop("clean"), args.pop("corrupted"), **args)
    assert "\n" not in str(e.value)


def test_an_encoder_has_no_paths_to_patch(tmp_path):
    folder = hfmodels.save(tmp_path, "bert")[0]
    with pytest.raises(ValueError, match="is an encoder: it has no next token"):
        attnviz.path_patch(str(folder), CLEAN, CORRUPTED, answer=ANSWER, component="k")


def test_batches_run_where_step_says_bounded_in_tokens_with_the_same_numbers(monkeypatch):
    """``step(work)`` runs each batch (the app's compute workers), at most ``PATCH_BATCH_TOKENS``
    tokens of runs; the progress rises to 1; the numbers do not change."""
    from attnviz import limits
    from attnviz.analysis.pathpatch import path_patching
    from attnviz.analysis.subjects import TinySubject

    model = AttentionOnly(vocab=32, length=19, layers=3, heads=2, d_model=32, seed=3).eval()
    subject = TinySubject(model, "t")
    clean, corrupted = "BOS 5 9 12 7 5 9", "BOS 5 9 14 7 5 9"
    whole = path_patching(subject, clean, corrupted, answer="12", wrong="14", component="k")
    monkeypatch.setattr(limits, "PATCH_BATCH_TOKENS", 3 * 7)  # three patched runs of 7 tokens a batch
    sizes, fractions = [], []

    def step(work):
        value = work()
        sizes.append(len(value))
        return value

    split = path_patching(subject, clean, corrupted, answer="12", wrong="14", component="k", step=step,
                          progress=fractions.append)
    assert sizes == [3, 1, 3, 3, 2]  # into layer 1: 4 paths (1 layer × 2 heads × 2 heads); into layer 2: 8
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    np.testing.assert_allclose(split.values, whole.values, atol=1e-6)
