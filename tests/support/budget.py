"""A server's caches under a small ``ATTNVIZ_CACHE_MB``, to drive each past its share in a test (the
``small_caches`` fixture of tests/conftest.py)."""

from __future__ import annotations

from attnviz import cache, limits

SMALL_MB = 4


def made() -> dict[str, cache.ByteBudgetCache]:
    """Every cache a server makes (each module that makes one imported), by name."""
    import attnviz.analysis.qkcorpus  # noqa: F401 - the Q/K map's runs
    import attnviz.inputs.embeddings  # noqa: F401 - the lookups
    import attnviz.jobs  # noqa: F401 - the finished jobs
    import attnviz.models.random  # noqa: F401 - the random layers
    import attnviz.run.run  # noqa: F401 - the results
    import ui.compute  # noqa: F401 - the figures

    return dict(cache.CACHES)


def small_caches(monkeypatch):
    """``ATTNVIZ_CACHE_MB`` at ``SMALL_MB``, and every shared cache emptied and bounded again by its share of
    it, as a server started with that budget makes them; afterwards emptied again and given its bound back.
    The loaded models keep their own bound (``ATTNVIZ_MAX_LOADED_MB``)."""
    caches = {name: c for name, c in made().items() if name != "models"}  # made first, with the server's bounds
    bounds = {name: c.max_bytes for name, c in caches.items()}
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", str(SMALL_MB))
    for name, c in caches.items():
        c.clear()
        c.max_bytes = limits.cache_bytes(name)
    yield caches
    for name, c in caches.items():
        c.clear()
        c.max_bytes = bounds[name]


def held(caches: dict[str, cache.ByteBudgetCache]) -> int:
    """The bytes every shared cache holds now, as each accounts them."""
    return sum(c.total_bytes for c in caches.values())
