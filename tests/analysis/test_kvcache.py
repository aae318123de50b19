"""KV-cache policies (attnviz.analysis.kvcache) against a reference written from kvpress 0.5.5's
source: on hand-made attention and keys with ties, and on a LLaMA folder with grouped-query heads
(its own output_attentions and cached keys); the cost's attention lost against output_attentions;
bad input refused with one clear message."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.analysis import kvcache as KV
from tests.support import kvpress_reference as ref
from tests.support import longmodels
from tests.support.hfmodels import save


def _hand_made(n=80, H=4, kv=2, D=4):
    """Causal attention whose rows spread evenly over pairs of keys (many exact ties), and keys of a
    few repeated norms (ties again)."""
    a = torch.zeros(1, H, n, n)
    for h in range(H):
        for i in range(n):
            cols = torch.arange(0, i + 1, 1 + (h % 2))  # every key, or every other: equal weights
            a[0, h, i, cols] = 1.0 / len(cols)
    keys = torch.zeros(1, kv, n, D)
    keys[..., 0] = (torch.arange(n) % 3 + 1).float()  # norms 1, 2, 3 repeating
    return a, keys


@pytest.mark.parametrize("policy", KV.POLICIES)
@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.5, 0.97])
def test_kept_sets_are_kvpress_s_on_hand_made_scores_with_ties(policy, ratio):
    a, keys = _hand_made()
    want = ref.kept(policy, keys, a, ratio)[0]
    kv, n = keys.shape[1], keys.shape[2]
    if ratio == 0:
        scores = torch.zeros(kv, n)
    elif policy == "streaming":
        scores = KV.streaming_scores(kv, n, ratio)
    elif policy == "observed":
        scores = KV.observed_scores(a[0].sum(1), kv)
    elif policy == "snapkv":
        scores = KV.snapkv_scores(a[0, :, -KV.WINDOW:, :], kv)
    else:
        scores = KV.knorm_scores(keys[0])
    got = KV.kept_from_scores(scores, ratio).tolist()
    assert got == want
    assert len(got[0]) == ref.compute_n_kept(n, ratio)


def test_n_kept_is_compute_n_kept():
    for n, r in [(10, 0.95), (10, 0.5), (7, 0.3), (1, 0.5), (100, 0.999)]:
        assert KV.compute_n_kept(n, r) == ref.compute_n_kept(n, r) == max(1, int(n * (1 - r)))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return longmodels.save(tmp_path_factory.mktemp("kv"), "llama", 4096)


def _eager(folder, ids):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=True)
    cache = out.cache if hasattr(out, "cache") else out.past_key_values
    return out.attentions, [layer.keys for layer in cache.layers]


@pytest.mark.parametrize("policy", KV.POLICIES)
def test_kept_sets_are_kvpress_s_on_a_grouped_query_model(llama, policy):
    ids = [int(x) for x in np.random.default_rng(0).integers(4, 12, size=200)]
    attentions, keys = _eager(llama, ids)
    for ratio in (0.5, 0.8):
        got = KV.kv_keep(str(llama), ids, policy=policy, ratio=ratio)
        want = [ref.kept(policy, k, a, ratio)[0] for a, k in zip(attentions, keys, strict=True)]
        assert got.kept == want
        # the cost's cache: the prompt without its last token
        pre_a, pre_k = _eager(llama, ids[:-1])
        assert got.kept_before_last == [ref.kept(policy, k, a, ratio)[0] for a, k in zip(pre_a, pre_k, strict=True)]
        # the last token's attention on what was evicted from that cache, from output_attentions
        for layer, a in enumerate(attentions):
            last = a[0, :, -1].double()  # (H, N)
            for h in range(last.shape[0]):
                kept = set(got.kept_before_last[layer][h // 2]) | {len(ids) - 1}
                lost = sum(float(last[h, j]) for j in range(len(ids)) if j not in kept)
                assert abs(got.lost[layer, h] - lost) < 1e-5
        assert got.kl >= 0 and isinstance(got.top_changed, bool)


def test_nothing_evicted_costs_nothing(llama):
    ids = [int(x) for x in np.random.default_rng(1).integers(4, 12, size=100)]
    got = KV.kv_keep(str(llama), ids, policy="observed", ratio=0.0)
    assert got.n_kept == 100 and np.all(got.lost == 0) and abs(got.kl) < 1e-9 and not got.top_changed


def test_the_random_layer_has_no_next_token_cost():
    got = KV.kv_keep("random", "the cat sat on the mat " * 15, policy="streaming", ratio=0.5)
    assert got.kl is None and got.top_changed is None and "no language-model head" in got.notes[0]
    assert got.lost.shape == (1, 4) and np.all((got.lost > 0) & (got.lost < 1))


def test_bad_input_gets_one_clear_message(llama, tmp_path):
    ids = [int(x) for x in np.random.default_rng(2).integers(4, 12, size=100)]
    for ratio in (1.0, -0.1, "half", True):
        with pytest.raises(ValueError, match=r"must be in \[0, 1\)"):
            KV.kv_keep(str(llama), ids, policy="knorm", ratio=ratio)
    with pytest.raises(ValueError, match="Unknown policy 'h2o'"):
        KV.kv_keep(str(llama), ids, policy="h2o", ratio=0.5)
    with pytest.raises(ValueError, match="snapkv policy needs more than 65 tokens"):
        KV.kv_keep(str(llama), ids[:65], policy="snapkv", ratio=0.5)
    with pytest.raises(ValueError, match="streaming policy needs more than 5 tokens"):
        KV.kv_keep(str(llama), ids[:5], policy="streaming", ratio=0.5)
    folder, _m, _t = save(tmp_path, "roberta")
    with pytest.raises(ValueError, match="is an encoder: it keeps no cache to evict"):
        KV.kv_keep(str(folder), "the cat sat", policy="knorm", ratio=0.5)
