"""Head scores on hand-made patterns, and attention flow against networkx's max-flow."""

import networkx as nx
import numpy as np
import pytest

import attnviz
from attnviz.analysis.roles import SCORES, flow_capacities
from attnviz.limits import MAX_FLOW_TOKENS

TOKS = ["a", "b", "c", "d", "a", "b", "c", "d"]  # repeated once: duplicate and induction defined


def _pattern(kind, n=8):
    w = np.zeros((n, n))
    for i in range(n):
        if kind == "previous_token":
            w[i, max(i - 1, 0)] = 1
        elif kind == "first_token":
            w[i, 0] = 1
        elif kind == "self":
            w[i, i] = 1
        elif kind == "duplicate_token":
            w[i, i - 4 if i >= 4 else 0] = 1
        elif kind == "induction":
            w[i, i - 3 if i >= 4 else 0] = 1
    return w[None, None]  # (layers=1, H=1, L, S)


@pytest.mark.parametrize("kind", ["previous_token", "self", "duplicate_token", "induction"])
def test_perfect_pattern_scores_one_on_its_own_score_only(kind):
    s = attnviz.head_scores(_pattern(kind), TOKS)
    assert s[kind].shape == (1, 1)
    assert s[kind][0, 0] == pytest.approx(1.0)
    for other in ("previous_token", "self", "duplicate_token", "induction"):
        if other != kind:
            assert s[other][0, 0] < 0.3, (kind, other, s[other])
    assert s["entropy"][0, 0] == pytest.approx(0.0, abs=1e-9)


def test_first_token_and_uniform_entropy():
    s = attnviz.head_scores(_pattern("first_token"), list("abcdefgh"))
    assert s["first_token"][0, 0] == pytest.approx(1.0)
    assert s["self"][0, 0] < 0.2 and s["previous_token"][0, 0] < 0.2
    u = np.full((1, 1, 8, 8), 1 / 8)
    assert attnviz.head_scores(u, list("abcdefgh"))["entropy"][0, 0] == pytest.approx(1.0)
    causal = np.tril(np.ones((8, 8)))
    causal = (causal / causal.sum(-1, keepdims=True))[None, None]
    assert attnviz.head_scores(causal, list("abcdefgh"))["entropy"][0, 0] == pytest.approx(1.0)


def test_pad_positions_are_ignored():
    w = np.zeros((1, 1, 10, 10))
    w[0, 0, :8, :8] = _pattern("previous_token")[0, 0]
    w[0, 0, 8:, :] = 0.1  # pad rows with weight everywhere
    s = attnviz.head_scores(w, TOKS + ["[PAD]", "[PAD]"])
    assert s["previous_token"][0, 0] == pytest.approx(1.0)
    assert set(s) == set(SCORES)


def _reference_flows(w: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema's own procedure, written out here with networkx: res_att_mat =
    rownorm(mean_h A + I); get_adjmat's graph (node ℓ·L + k, edges from layer ℓ to ℓ − 1);
    compute_flows' max-flow from every non-input node u to every input v (Edmonds–Karp),
    stored at flow_values[u][(layer(u) − 1)·L + v], each row u divided by its sum; then
    convert_adjmat_tomats' blocks: (layers, L, L). Also the raw values before the division."""
    layers, _H, L, _ = w.shape
    res = w.sum(1) / w.shape[1] + np.eye(L)[None]  # (layers, L, L)
    res = res / res.sum(-1)[..., None]
    V = (layers + 1) * L
    adj = np.zeros((V, V))
    for i in range(1, layers + 1):
        for k_f in range(L):
            for k_t in range(L):
                adj[i * L + k_f, (i - 1) * L + k_t] = res[i - 1, k_f, k_t]
    g = nx.DiGraph()
    for a in range(V):
        for b in range(V):
            if adj[a, b] > 0:
                g.add_edge(a, b, capacity=float(adj[a, b]))
    flows, raw = np.zeros((V, V)), np.zeros((V, V))
    for u in range(L, V):
        pre = u // L - 1
        for v in range(L):
            raw[u, pre * L + v] = nx.maximum_flow_value(g, u, v, flow_func=nx.algorithms.flow.edmonds_karp)
        flows[u] = raw[u] / raw[u].sum()
    blocks = lambda m: np.stack([m[(i + 1) * L:(i + 2) * L, i * L:(i + 1) * L] for i in range(layers)])  # noqa: E731
    return blocks(flows), blocks(raw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flow_is_the_references_share_of_the_flow_on_every_layer(seed):
    rng = np.random.default_rng(seed)
    layers, H, L = 3, 2, 5
    w = rng.random((layers, H, L, L)) ** 3
    w /= w.sum(-1, keepdims=True)
    if seed == 2:  # a causal pattern: the flow of position i reaches inputs j ≤ i only
        w = np.tril(w)
        w /= w.sum(-1, keepdims=True)
    shares, raw = _reference_flows(w)
    flow = attnviz.attention_flow(w)
    assert flow.shape == (1, L, L)
    assert np.abs(flow[0] - shares[-1]).max() <= 1e-6
    assert np.allclose(flow.sum(-1), 1.0)
    every = attnviz.attention_flow(w, every_layer=True)
    assert every.shape == (layers, L, L) and np.abs(every - shares).max() <= 1e-6
    assert np.abs(attnviz.attention_flow(w, raw=True)[0] - raw[-1]).max() <= 1e-6
    assert raw[-1].sum(-1).max() > 1.4  # raw values are not shares: they saturated the view's 0–1 scale
    hat = 0.5 * w.mean(1) + 0.5 * np.eye(L)  # (layers, L, L): ½·mean_h A + ½·I, as rollout
    assert np.allclose(hat / hat.sum(-1, keepdims=True), flow_capacities(w))
    if seed == 2:
        assert np.abs(np.triu(flow[0], 1)).max() == 0


def test_flow_refuses_over_the_bound():
    L = MAX_FLOW_TOKENS + 1
    w = np.full((1, 1, L, L), 1 / L)
    with pytest.raises(ValueError, match=str(MAX_FLOW_TOKENS)):
        attnviz.attention_flow(w)


def test_roles_take_the_strongest_passing_score_and_probe_roles_only_from_the_probe():
    from attnviz.analysis.probe import probe_ids
    from attnviz.analysis.roles import head_roles

    w = np.concatenate([_pattern("previous_token"), _pattern("induction")], axis=1)  # (1, 2, 8, 8)
    s = attnviz.head_scores(w, TOKS)
    assert list(head_roles(s, s)[0]) == ["previous_token", "induction"]
    assert head_roles(s, None)[0, 1] != "induction"  # no probe: induction is not claimed
    ids = probe_ids(50, 6, seed=3)
    assert ids[:6] == ids[6:] and ids == probe_ids(50, 6, seed=3)


@pytest.mark.minilm
def test_minilms_model_view_names_its_heads_roles_layer_by_layer():
    """Every layer is scored (a run's (layers, H, L, S) of one sentence), and MiniLM's
    previous-token head in layer 0 and its first-token ([CLS]) sinks are labelled."""
    from attnviz import AttentionConfig, compute
    from attnviz.analysis.roles import ROLE_LABELS, head_roles
    from attnviz.views.layers import model_figure
    from attnviz.views.roles import roles_table
    from attnviz.views.selection import style_for
    from attnviz.views.state import ViewState

    r = compute(AttentionConfig(model="minilm-l6"))
    k = r.lengths[0]
    w = r.layer_weights[:, 0, :, :k, :k].numpy()  # (layers, H, k, k)
    scores = attnviz.head_scores(w, r.tokens[0][:k])
    assert scores["previous_token"].shape == (6, 12)
    hand = np.array([[np.diagonal(w[layer, h], -1).mean() for h in range(12)] for layer in range(6)])
    assert np.allclose(scores["previous_token"], hand, atol=1e-6)
    from attnviz.analysis.probe import probe_scores

    roles = head_roles(scores, probe_scores(r))  # the sentence's roles, and the probe's
    assert roles[0].tolist().count("previous_token") >= 1 and (roles == "first_token").sum() >= 6
    table = roles_table(r, ViewState())
    assert len(table) == 72 and [row["role"] for row in table] == roles.reshape(-1).tolist()
    fig = model_figure(r, ViewState(), style_for(ViewState())).to_plotly_json()
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    layer0, head = 0, roles[0].tolist().index("previous_token")
    assert titles[layer0 * 12 + head] == f"H{head}<br>{ROLE_LABELS['previous_token']}"  # the role on its own line


@pytest.mark.minilm
def test_probe_roles_are_scored_on_a_seeded_repeated_probe_of_the_models_own_words():
    """Induction and duplicate-token come from a probe (random whole words of the model's
    vocabulary, repeated once), never from the user's sentence: MiniLM has a duplicate-token
    head there; an attention file cannot be rerun, so it has no probe scores."""
    from attnviz import AttentionConfig, compute
    from attnviz.analysis.probe import PROBE_LENGTH, probe_scores, probe_text, probe_text_of
    from attnviz.analysis.probe import vocabulary as probe_vocabulary
    from attnviz.analysis.roles import head_scores
    from attnviz.views.roles import roles_table
    from attnviz.views.state import ViewState

    r = compute(AttentionConfig(model="minilm-l6"))
    text = probe_text_of(r)
    words = text.split()
    assert len(words) == 2 * PROBE_LENGTH and words[:PROBE_LENGTH] == words[PROBE_LENGTH:]
    assert text == probe_text(probe_vocabulary("minilm-l6"))  # seeded: the same probe every time
    assert all(w in probe_vocabulary("minilm-l6") for w in words)
    probe_run = compute(AttentionConfig(model="minilm-l6", text=text))
    k = probe_run.lengths[0]
    want = head_scores(probe_run.layer_weights[:, 0, :, :k, :k].numpy(), probe_run.tokens[0][:k])
    got = probe_scores(r)
    assert all(np.array_equal(got[c], want[c]) for c in ("induction", "duplicate_token"))
    table = roles_table(r, ViewState())
    assert any(row["role"] == "duplicate_token" for row in table)
    assert all(row["duplicate_token (probe)"] == float(got["duplicate_token"][row["layer"], row["head"]])
               for row in table)
    with pytest.raises(ValueError, match="fewer than 2 whole words"):
        probe_text(["only"])
