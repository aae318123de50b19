"""attnviz.cache: one cache bounded in bytes that computes each key once, and what it counts."""


from attnviz import AttentionConfig, compute
from attnviz.cache import ByteBudgetCache, nbytes


def test_the_cache_is_bounded_in_bytes_and_computes_each_key_once():
    import threading

    cache = ByteBudgetCache(10_000, size_of=lambda v: len(v))
    cache.get_or_compute("a", lambda: b"x" * 4000)
    cache.get_or_compute("b", lambda: b"x" * 4000)
    cache.get_or_compute("a", lambda: b"never")  # a hit: "a" becomes most recent
    cache.get_or_compute("c", lambda: b"x" * 4000)  # over 10 000: the least recent ("b") leaves
    assert "a" in cache and "c" in cache and "b" not in cache and cache.total_bytes == 8000
    assert cache.get_or_compute("big", lambda: b"x" * 20_000) and "big" not in cache  # never kept
    calls, gate = [], threading.Event()

    def slow():
        calls.append(1)
        gate.wait(5)
        return b"y" * 10

    threads = [threading.Thread(target=cache.get_or_compute, args=("same", slow)) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert calls == [1]  # thirty students, one link: computed once


def test_nbytes_counts_a_results_tensors():
    r = compute(AttentionConfig(text="I love AI", num_heads=2, d_model=16))
    size = nbytes(r)
    assert r.weights.numel() * 4 < size < 1_000_000


def test_put_replaces_discard_lets_go_and_peek_leaves_the_order():
    cache = ByteBudgetCache(10_000, size_of=lambda v: len(v))
    assert cache.put("a", b"x" * 4000) and cache.put("b", b"x" * 4000)
    assert cache.put("a", b"x" * 1000) and cache.total_bytes == 5000  # in place of the old value, not beside it
    assert cache.peek("b") == b"x" * 4000 and cache.keys() == ["b", "a"]  # a listing is not a use
    assert not cache.put("big", b"x" * 20_000) and "big" not in cache and cache.total_bytes == 5000
    cache.discard("b")
    cache.discard("never held")
    assert cache.keys() == ["a"] and cache.total_bytes == 1000


# --- one memory budget: everything a server keeps between requests, in bytes, in its share ---------------------

from tests.support.budget import SMALL_MB, held  # noqa: E402


def test_the_shares_add_up_to_at_most_the_budget():
    from attnviz import limits

    assert sum(limits.CACHE_SHARES.values()) <= 1
    assert sum(limits.cache_bytes(name) for name in limits.CACHE_SHARES) <= limits.cache_budget_bytes()


def test_every_pool_driven_past_its_share_keeps_the_server_within_the_budget(small_caches):
    """Results, random layers, lookups (token and n-gram vectors, position tables, split texts), figures, the
    Q/K map's runs and finished jobs, each sent more than its share of a 4 MB budget: each keeps what it is
    sent in its share and lets the least recently used go, and all of them together hold at most the budget,
    as cache.py counts them."""
    import numpy as np
    import plotly.graph_objects as go

    from attnviz import limits
    from attnviz.analysis.qkcorpus import cached_corpus_run, run_key
    from attnviz.inputs.embeddings import token_vector
    from attnviz.inputs.tokens import tokenize
    from attnviz.jobs import KEPT, Jobs
    from attnviz.models.random import RandomLayer
    from attnviz.run.run import shared_result
    from ui.compute import cached_figure

    caches = small_caches
    budget = limits.cache_budget_bytes()
    assert budget == SMALL_MB * 2**20 and set(caches) == set(limits.CACHE_SHARES)

    def within():
        for name, c in caches.items():
            assert c.total_bytes <= c.max_bytes == limits.cache_bytes(name), name
        assert held(caches) <= budget

    def drive(name, first, calls):
        """Each call past the share, the first's entry held once made and gone at the end."""
        for i, call in enumerate(calls):
            call()
            within()
            if i == 0:
                assert first in caches[name], f"{name}: not kept in its share"
        assert first not in caches[name] and caches[name].total_bytes > 0, f"{name}: not driven past its share"

    text = " ".join(f"w{i}" for i in range(64))  # 64 tokens: a run at 4 heads keeps ~0.3 MB of steps
    configs = [AttentionConfig(text=text, num_heads=4, d_model=64, seed=s) for s in range(12)]
    drive("results", ("result", configs[0], "en"), [lambda c=c: shared_result(c) for c in configs])
    drive("layers", (64, 4, 0, True), [lambda s=s: RandomLayer(64, 4, s).module for s in range(6)])  # 66 KB each
    words = [f"token{i:04d}" for i in range(300)]  # at d_model 512 a vector is 4 KB, each of its n-grams' 4 KB
    drive("lookups", ("token", words[0], 512), [lambda w=w: token_vector(w, 512) for w in words])
    drive("lookups", ("split", "the first text", "auto"),
          [lambda t=t: tokenize(t) for t in ["the first text", *(f"{w} " * 40 for w in words)]])
    rng = np.random.default_rng(0)
    keys = [("test-figure", i) for i in range(12)]
    drive("figures", keys[0], [lambda k=k: cached_figure(k, lambda: go.Figure(go.Heatmap(z=rng.random((80, 80)))),
                                                         alt=lambda fig: "a heatmap") for k in keys])
    corpora = [[f"corpus {c} sentence {i} with a few words more" for i in range(20)] for c in range(6)]
    config = AttentionConfig(d_model=128, num_heads=4)
    drive("qk-runs", run_key(config, corpora[0]), [lambda ls=ls: cached_corpus_run(config, ls) for ls in corpora])
    jobs = Jobs("test-budget", share=(1, 4, 64))  # its count would keep all twelve: the bytes do not

    def finished(i):
        assert jobs.start(i, lambda job: np.zeros(40_000)).done.wait(10)  # 320 KB each

    drive("jobs", (jobs, 0), [lambda i=i: finished(i) for i in range(12)])
    assert KEPT is caches["jobs"] and jobs.get(0) is None and jobs.get(11).value.shape == (40_000,)
    within()
