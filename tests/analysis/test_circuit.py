"""Watch it learn's "the circuit, found by the numbers" (attnviz.analysis.circuit, through
attnviz.circuit): on the trained model, the repeat ``… A B … A`` against the earlier A replaced
finds the induction circuit, a layer-0 head feeding the induction head through its keys; the
one-layer control says it has no later head to compose with. And the example pairs."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz
from attnviz.analysis.examples import REPEAT, example_prompts
from attnviz.analysis.subjects import TinySubject
from attnviz.learn.trained import load_trained
from attnviz.views import learn as V


@pytest.fixture(scope="module")
def models(learned_defaults):
    settings, control = V.default_trainings()
    return [load_trained(s, learned_defaults["dir"] / f"{k}.safetensors")
            for s, k in zip((settings, control), learned_defaults["keys"], strict=True)]


@pytest.fixture(scope="module")
def found(models):
    return attnviz.circuit(models[0])


def test_the_repeat_pair_replaces_the_earlier_a(models):
    pair = example_prompts(TinySubject(models[0], "m"), "break")
    clean, corrupted = pair["clean"].split(), pair["corrupted"].split()
    assert pair["clean"] == REPEAT and clean[-1] == clean[9] == "8" and clean[10] == pair["answer"] == "12"
    assert [i for i, (a, b) in enumerate(zip(clean, corrupted, strict=True)) if a != b] == [9]
    assert corrupted[9] not in clean and pair["wrong"] not in (pair["answer"], None)


def test_the_largest_key_path_into_the_induction_head_comes_from_layer_0_and_recovers_half(found):
    layer, head = found.receiver
    assert layer == 1 and found.heads[layer, head] >= 0.5  # the induction head carries the answer
    into_k = found.into("k")  # (layers, H)
    s, h = np.unravel_index(int(np.nanargmax(into_k)), into_k.shape)
    assert (int(s), int(h)) == found.sender and s == 0 and found.through == "k"
    assert into_k[s, h] >= 0.5
    for c in ("q", "v"):
        assert np.nanmax(found.into(c)) < into_k[s, h]
    assert np.isnan(found.into("k")[1]).all()  # no path from the receiver's own layer


def test_the_key_side_of_the_attended_cell_is_that_layer_0_heads_output(found, models):
    s, h = found.sender
    assert found.key_part == f"L{s}H{h}"
    a = attnviz.score_attribution(models[0], found.clean, layer=found.receiver[0], head=found.receiver[1],
                                  query=len(found.clean.split()) - 1, key=found.attended)
    key_side = a.terms.sum(0).numpy()
    assert a.key_parts[int(np.argmax(key_side))] == f"L{s}H{h}" and found.attended == 10  # B, after the earlier A
    assert "L1 H0" in found.message and f"L{s} H{h} through its keys" in found.message


def test_the_one_layer_control_has_no_later_head_to_compose_with(models):
    control = attnviz.circuit(models[1])
    assert control.receiver is None and control.paths == {}
    assert "has one layer: its heads have no later head to compose with" in control.message


def test_a_gpt2_like_tokenizer_gets_an_indirect_object_pair_with_one_token_names(tmp_path):
    from tests.support.circuits import bpe_gpt2

    folder = bpe_gpt2(tmp_path / "bpe")
    pair = attnviz.example_pair(str(folder))
    assert pair["clean"] == "When Mary and John went to the store, John gave a drink to"
    assert pair["corrupted"] == "When Mary and John went to the store, Tom gave a drink to"
    assert (pair["answer"], pair["wrong"]) == ("ĠMary", "ĠJohn")
    p = attnviz.patch_heads(str(folder), pair["clean"], pair["corrupted"], answer=pair["answer"], wrong=pair["wrong"])
    assert len(p.differ) == 1 and (p.clean_tokens[p.differ[0]], p.corrupted_tokens[p.differ[0]]) == ("ĠJohn", "ĠTom")


def test_a_tokenizer_without_one_token_names_has_no_pair(tmp_path):
    from tests.support import hfmodels

    folder = hfmodels.save(tmp_path, "gpt2")[0]  # a word-level vocabulary of ten words
    assert attnviz.example_pair(str(folder)) is None
    with pytest.raises(ValueError, match="kind must be one of swap, break"):
        attnviz.example_pair(str(folder), "explorer")
