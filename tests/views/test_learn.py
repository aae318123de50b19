"""Watch it learn's "which heads carry the repeat" (attnviz.views.learn.carry_repeat): the trained
two-layer model's last layer holds a head that brings back at least half of the logit difference
the repeat makes; the one-layer control has no such head."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.learn.trained import load_trained
from attnviz.views import learn as V


@pytest.fixture(scope="module")
def carry(learned_defaults):
    settings, control = V.default_trainings()
    model, one = (load_trained(s, learned_defaults["dir"] / f"{k}.safetensors")
                  for s, k in zip((settings, control), learned_defaults["keys"], strict=True))
    return V.carry_repeat(model, one)


def test_a_last_layer_head_carries_the_repeat(carry):
    m = carry["model"]
    assert carry["gap"] == pytest.approx(m["clean"] - m["corrupted"]) and carry["gap"] > 1
    layer, head = m["best"]
    assert layer == 1 and m["best_share"] >= V.CARRIES and m["carries"] == [(layer, head)]
    np.testing.assert_allclose(m["share"], (m["heads"] - m["corrupted"]) / carry["gap"])
    assert f"Head L{layer} H{head} carries the repeat" in V.carry_summary(carry)


def test_the_one_layer_control_has_no_such_head(carry):
    c = carry["control"]
    assert c["share"].shape == (1, 4) and c["best_share"] < V.CARRIES and not c["carries"]
    assert "The one-layer control" in V.carry_summary(carry)




def test_the_circuit_found_by_the_numbers_is_induction_and_the_control_has_none(learned_defaults):
    settings, control = V.default_trainings()
    model, one = (load_trained(s, learned_defaults["dir"] / f"{k}.safetensors")
                  for s, k in zip((settings, control), learned_defaults["keys"], strict=True))
    found = V.learned_circuit(model, one)
    m = found["model"]
    assert m.receiver == (1, 0) and m.through == "k" and m.sender[0] == 0
    into = m.into("k")  # every layer-0 head's key path into the induction head
    assert np.nanmax(into) >= 0.5 and np.nanmax(into) > np.nanmax(m.into("q")) and np.nanmax(into) > np.nanmax(
        m.into("v"))
    assert m.key_part == f"L{m.sender[0]}H{m.sender[1]}"
    assert f"It reads L{m.sender[0]} H{m.sender[1]} through its keys" in m.message
    assert found["control"].receiver is None and "no later head to compose with" in found["control"].message
    fig = V.circuit_figure_of(m, V.F.FigureStyle())
    assert any(t.name == "path into k" for t in fig.data)


def test_eap_ig_finds_the_induction_circuits_key_edge_among_its_top_three(learned_defaults):
    settings, _control = V.default_trainings()
    model = load_trained(settings, learned_defaults["dir"] / f"{learned_defaults['keys'][0]}.safetensors")
    found = V.learned_circuit(model)["model"]
    edges = V.learned_edges(model, found)
    s, h = found.sender
    assert edges["key_edge"] == f"a{s}.h{h}->a1.h0<k>" and 1 <= edges["rank"] <= 3
    assert edges["key_edge"] in [n for n, _v in edges["top"]]
    assert f"ranks {edges['rank']} of them all" in V.edges_summary(edges)
