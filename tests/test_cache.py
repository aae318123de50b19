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

