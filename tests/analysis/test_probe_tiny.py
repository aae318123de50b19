"""Watch it learn names its heads' roles as the explorer does (``attnviz.analysis.roles``):
on a probe of seeded random tokens repeated once, the trained default model has a
previous-token head in layer 0 and an induction head in layer 1, recorded at every
checkpoint, drawn as the heads' titles and listed in the Head roles table."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import probe as P
from attnviz.analysis.probe import PROBE_LENGTH, probe_ids
from attnviz.analysis.roles import SCORES, head_roles
from attnviz.learn import trained as T
from attnviz.learn.train import VOCAB, LearnSettings
from attnviz.models.tiny import BOS, FIRST_TOKEN
from tests.support.apphelp import app, figures

PAGE = "app_pages/watch_it_learn.py"


def _by_hand(model) -> tuple[list[int], dict]:
    """The probe built here from its definition, the model run on it, and ``attnviz.head_scores``."""
    half = probe_ids(VOCAB, PROBE_LENGTH, low=FIRST_TOKEN)
    ids = [BOS] + half
    with torch.no_grad():
        _logits, weights = model(torch.tensor([ids]))  # [(1, H, L, L)]
    w = torch.stack([x[0] for x in weights]).numpy()  # (layers, H, L, L)
    return ids, attnviz.head_scores(w, [str(t) for t in ids])


@pytest.fixture(scope="module")
def final_model(learned_defaults):
    return T.load_trained(LearnSettings(), learned_defaults["dir"] / f"{learned_defaults['keys'][0]}.safetensors")


def test_the_roles_probe_is_bos_then_seeded_random_ordinary_tokens_repeated_once():
    ids = P.tiny_probe(VOCAB)
    half = ids[1:1 + PROBE_LENGTH]
    assert ids[0] == BOS and len(ids) == 1 + 2 * PROBE_LENGTH and ids[1 + PROBE_LENGTH:] == half
    assert all(FIRST_TOKEN <= t < VOCAB for t in half) and len(set(half)) > PROBE_LENGTH // 2
    assert P.tiny_probe(VOCAB) == ids  # seeded: the same probe on every server


def test_the_trained_model_has_a_previous_token_head_in_layer_0_and_an_induction_head_in_layer_1(
        final_model, learned_defaults):
    ids, want = _by_hand(final_model)
    assert ids == P.tiny_probe(VOCAB)
    got = P.tiny_model_scores(final_model)
    assert all(np.allclose(got[c], want[c], atol=1e-9) for c in SCORES)
    roles = head_roles(want, want)
    assert "previous_token" in roles[0].tolist() and "induction" in roles[1].tolist(), roles
    assert "induction" not in roles[0].tolist()  # layer 0 cannot: it has no previous-token head before it
    # the training recorded the same roles at its last checkpoint (the worker's one thread: equal to rounding)
    last = learned_defaults["records"][0]["checkpoints"][-1]["roles"]
    assert all(np.allclose(last[c], want[c], atol=1e-5) for c in SCORES)
    assert learned_defaults["records"][0]["roles_probe"] == ids


def test_the_induction_role_appears_as_it_learns_and_never_in_the_one_layer_control(learned_defaults):
    two, one = learned_defaults["records"]
    first = P.tiny_roles(two["checkpoints"][0]["roles"])
    assert "induction" not in first.tolist()[1]  # the untrained model has none
    found = [c["step"] for c in two["checkpoints"] if "induction" in P.tiny_roles(c["roles"])[1].tolist()]
    change = two["phase_change"]
    assert found and change is not None and abs(found[0] - change["step"]) <= 2 * LearnSettings().every, (found, change)
    assert all("induction" not in P.tiny_roles(c["roles"]).reshape(-1).tolist() for c in one["checkpoints"])


def _titles(fig: dict) -> list[str]:
    return [a["text"] for a in fig["layout"].get("annotations", [])]


def _figure(at, start: str) -> dict:
    return next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(start))


def test_the_page_titles_the_heads_with_their_roles_and_tables_the_scores(learned_defaults, final_model,
                                                                         monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))
    at = app(page=PAGE, timeout=120)
    assert not at.exception and not at.error and any("A replay" in c.value for c in at.caption)
    for start in ("every head on the probe at step 2000", "every head on your sequence"):
        titles = _titles(_figure(at, start))
        layer0, layer1 = [t for t in titles if t.startswith("L0 ")], [t for t in titles if t.startswith("L1 ")]
        assert len(layer0) == len(layer1) == 2, titles
        assert any(t.endswith(" · prev") for t in layer0) and any(t.endswith(" · induction") for t in layer1), titles
    legend = "**prev** on the previous token ≥ 0.4"
    assert any(legend in c.value and "The roles probe is BOS, then 12 random tokens" in c.value for c in at.caption)
    assert any("Head roles" in h.value for h in at.subheader)
    table = next(d.value for d in at.dataframe if "role" in d.value.columns)
    assert list(table.columns) == ["layer", "head", "role", *SCORES]
    _ids, want = _by_hand(final_model)
    for _i, row in table.iterrows():
        for c in SCORES:
            assert row[c] == pytest.approx(want[c][row["layer"], row["head"]], abs=1e-9), (c, row)
    roles = head_roles(want, want)
    assert table["role"].tolist() == roles.reshape(-1).tolist()
    assert "previous_token" in table[table["layer"] == 0]["role"].tolist()
    assert "induction" in table[table["layer"] == 1]["role"].tolist()


def test_an_opened_head_is_drawn_on_your_sequence_and_knocked_out(learned_defaults, final_model, monkeypatch):
    """What a selected row opens (the browser test selects it): the knock-out names that head,
    and the head is drawn alone, titled with its role."""
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))
    roles = head_roles(*[_by_hand(final_model)[1]] * 2)
    head = roles[1].tolist().index("induction")
    at = app(f"knockout=1.{head}", page=PAGE, timeout=120)
    assert not at.exception and at.selectbox(key="knockout").value == f"1.{head}"
    assert any(f"Without head L1 H{head} the loss on the repeat" in m.value for m in at.markdown)
    assert any(f["layout"]["title"]["text"] == f"head L1 H{head} · induction on your sequence" for f in figures(at))


def test_a_training_recorded_before_roles_replays_and_says_so(learned_defaults, tmp_path, monkeypatch):
    for key in learned_defaults["keys"]:
        for suffix in (".json", ".safetensors"):
            shutil.copy(learned_defaults["dir"] / f"{key}{suffix}", tmp_path / f"{key}{suffix}")
        record = json.loads((tmp_path / f"{key}.json").read_text(encoding="utf-8"))
        for c in record["checkpoints"]:
            del c["roles"]
        (tmp_path / f"{key}.json").write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(tmp_path))
    at = app(page=PAGE, timeout=120)
    assert not at.exception and not at.error
    assert any("recorded before roles were" in c.value for c in at.caption)
    assert not any(" · " in t for t in _titles(_figure(at, "every head on the probe")))
    assert any(t.endswith(" · induction") for t in _titles(_figure(at, "every head on your sequence")))


def test_the_command_lines_animation_titles_each_frames_heads_with_that_checkpoints_roles(learned_defaults):
    from attnviz.cli.learn import animation
    from attnviz.plots import FigureStyle

    record = learned_defaults["records"][0]
    fig = animation(record, FigureStyle())
    first, last = ([a.text for a in f.layout.annotations] for f in (fig.frames[0], fig.frames[-1]))
    assert first == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]  # untrained: no role passes its threshold
    assert any(t.endswith(" · prev") for t in last[:2]) and any(t.endswith(" · induction") for t in last[2:]), last
