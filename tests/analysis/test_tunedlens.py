"""A tuned lens (attnviz.analysis.tunedlens, through attnviz.logit_lens and attnviz.train_lens) against
tuned-lens 0.2.0's own ``TunedLens`` (a test requirement, installed without its training dependencies):
a lens with random translators saved by tuned-lens and read by attnviz gives tuned-lens's logits on
the same hidden states, and one attnviz writes loads in tuned-lens; every bad folder is refused with
one sentence; a lens trained here reads held-out text closer to the model's own distribution than the
logit lens at every layer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import attnviz
from attnviz import limits
from attnviz.analysis.lens import point_logits
from attnviz.analysis.subjects import registry_subject
from attnviz.analysis.tunedlens import read_lens
from attnviz.models.tiny import AttentionOnly
from tests.support import hfmodels
from tests.support.reference import assert_within

TEXT = "the cat sat on the mat because it was tired"
WORDS = "the cat sat on mat because it was tired".split()


def _reference():
    """tuned-lens's ``TunedLens``; it looks for TransformerLens's ``HookedTransformer``, which TransformerLens 4
    removed, whenever TransformerLens is installed: told it is not."""
    import tuned_lens.model_surgery as surgery
    from tuned_lens.nn import TunedLens

    surgery._transformer_lens_available = False
    return TunedLens


@pytest.fixture(scope="module", params=["gpt2", "llama", "neox"])
def model(request, tmp_path_factory):
    """(kind, folder, the transformers model, its tokenizer), every bias and norm perturbed."""
    folder, m, tok = hfmodels.perturbed(tmp_path_factory.mktemp("tuned"), request.param)
    return request.param, folder, m.eval(), tok


def _random_reference(m, seed=0):
    lens = _reference().from_model(m)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in lens.layer_translators:
            t.weight.copy_(0.2 * torch.randn(t.weight.shape, generator=g))
            t.bias.copy_(0.2 * torch.randn(t.bias.shape, generator=g))
    return lens


def test_a_lens_tuned_lens_saved_reads_as_tuned_lens_reads_it(model, tmp_path):
    _kind, folder, m, tok = model
    ref = _random_reference(m)
    ref.save(tmp_path / "lens")
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    with torch.no_grad():
        out = m(ids, output_hidden_states=True)
        want = [ref(out.hidden_states[i], i)[0] for i in range(len(ref))]  # each (L, V): translator i, stream into i
    subject = registry_subject(str(folder), "lens")
    lens = read_lens(tmp_path / "lens", subject)
    names, got = zip(*point_logits(subject.stack, subject.stack.run(ids), mode="per-layer", lens=lens), strict=True)
    assert names[0] == "embeddings" and len(names) == len(ref) + 1 and not any("middle" in n for n in names)
    for i in range(len(ref)):
        assert_within(got[i], want[i])
    assert_within(got[-1], out.logits[0])  # the last point is the model's own
    assert float((want[0] - ref.unembed(out.hidden_states[0])[0]).abs().max()) > 1e-2  # the translators act
    r = attnviz.logit_lens(str(folder), TEXT, lens=tmp_path / "lens", answer="was")
    assert r.mode == "tuned" and r.points == list(names) and r.lens == str(tmp_path / "lens")
    assert_within(r.answer_logit[0], want[0][:, tok.convert_tokens_to_ids("was")] - want[0].double().mean(-1))


def test_a_lens_attnviz_writes_loads_in_tuned_lens(model, tmp_path):
    _kind, folder, m, tok = model
    lens = attnviz.train_lens(str(folder), [TEXT], steps=3, out=tmp_path / "ours")
    ref = _reference().from_model_and_pretrained(m, str(tmp_path / "ours"))
    assert ref.config.unembed_hash == json.loads((tmp_path / "ours" / "config.json").read_text())["unembed_hash"]
    h = torch.randn(5, m.config.hidden_size)
    for i in range(len(ref)):
        with torch.no_grad():
            assert_within(lens.translate(h, i), ref.transform_hidden(h, i))
    assert float(lens.weight.abs().max()) > 0  # it moved from the logit lens


class Payload:
    """An object a pickle would rebuild by running this module's code: what weights_only refuses."""


def _bad(folder, tmp_path, change):
    """A copy of a good lens folder for ``folder``'s model, ``change(path)`` made to it."""
    subject = registry_subject(str(folder), "lens")
    good = tmp_path / "bad"
    attnviz.train_lens(str(folder), [TEXT], steps=1, out=good)
    change(good)
    return good, subject


@pytest.mark.parametrize("change, says", [
    (lambda p: p.joinpath("params.pt").unlink(), "not a tuned lens folder: it has no params.pt"),
    (lambda p: p.joinpath("config.json").write_text("{"), "is not JSON"),
    (lambda p: p.joinpath("config.json").write_text(json.dumps({"d_model": 32, "num_hidden_layers": 3})),
     "tuned for a model of 3 layers and width 32; .* has 2 layers and width 32"),
    (lambda p: p.joinpath("config.json").write_text(json.dumps({"d_model": 64, "num_hidden_layers": 2})),
     "tuned for a model of 2 layers and width 64"),
    (lambda p: p.joinpath("config.json").write_text(json.dumps({"d_model": 32, "num_hidden_layers": 2,
                                                                "lens_type": "other"})), "attnviz reads"),
    (lambda p: torch.save({"0.weight": torch.zeros(32, 32)}, p / "params.pt"), "one translator per layer"),
    (lambda p: torch.save({**{f"{i}.weight": torch.zeros(32, 16) for i in range(2)},
                           **{f"{i}.bias": torch.zeros(32) for i in range(2)}}, p / "params.pt"),
     r"0.weight must be a float tensor of shape \(32, 32\)"),
    (lambda p: torch.save({**{f"{i}.weight": torch.full((32, 32), float("nan")) for i in range(2)},
                           **{f"{i}.bias": torch.zeros(32) for i in range(2)}}, p / "params.pt"), "not finite"),
    (lambda p: torch.save({"0.weight": torch.zeros(600, 600)}, p / "params.pt"), "bytes; a tuned lens for 2 layers"),
    (lambda p: torch.save({"0.weight": Payload()}, p / "params.pt"), "cannot be read as tensors alone"),
])
def test_a_folder_that_is_no_lens_for_the_model_is_refused_in_one_sentence(tmp_path_factory, tmp_path, change, says):
    folder, _m, _tok = hfmodels.save(tmp_path_factory.mktemp("badlens"), "gpt2")
    bad, subject = _bad(folder, tmp_path, change)
    with pytest.raises(ValueError, match=says) as e:
        attnviz.logit_lens(str(folder), TEXT, lens=bad)
    assert "\n" not in str(e.value)


def test_the_bound_on_a_lens_file_is_the_models_translators():
    assert limits.max_lens_bytes(2, 32) == 2 * (32 * 32 + 32) * 4 + limits.LENS_FILE_SLACK_BYTES


def _texts(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, 10)) for _ in range(n)]


def _per_layer_kl(result) -> np.ndarray:
    """Each point's KL averaged over the positions, the last (the model's own) left out."""
    return result.kl[:-1].mean(-1)


def test_a_lens_trained_here_reads_held_out_text_closer_to_the_model_than_the_logit_lens(model):
    _kind, folder, _m, _tok = model
    lens = attnviz.train_lens(str(folder), _texts(0, 200), steps=150, seed=0)
    assert lens.fit["steps"] == 150 and lens.fit["tokens"] == 200 * 10
    assert all(t < g for t, g in zip(lens.fit["kl_tuned_lens"], lens.fit["kl_logit_lens"], strict=True))
    held = _texts(1, 3)
    for text in held:
        tuned = attnviz.logit_lens(str(folder), text, lens=lens)
        plain = attnviz.logit_lens(str(folder), text, mode="per-layer", mid=False)
        assert tuned.points == plain.points
        assert (_per_layer_kl(tuned) < _per_layer_kl(plain)).all(), (_per_layer_kl(tuned), _per_layer_kl(plain))
        np.testing.assert_array_equal(tuned.kl[-1], plain.kl[-1])  # the last point is the model's own in both


def test_a_training_is_its_seed_and_watch_it_learns_model_trains_on_its_task():
    tiny = AttentionOnly(vocab=32, length=19, layers=2, heads=2, d_model=32, seed=3).eval()
    a = attnviz.train_lens(tiny, steps=40, seed=5)
    b = attnviz.train_lens(tiny, steps=40, seed=5)
    torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)
    assert a.fit["tokens"] > 0 and all(t < g for t, g in zip(a.fit["kl_tuned_lens"], a.fit["kl_logit_lens"],
                                                               strict=True))
    r = attnviz.logit_lens(tiny, "BOS 5 9 12 7 5 9", lens=a)
    assert r.points == ["embeddings", "layer 0 end", "layer 1 end"]
    with pytest.raises(ValueError, match="steps must be a whole number from 1 to"):
        attnviz.train_lens(tiny, steps=0)
