"""A thread-safe cache bounded in bytes, that computes each key once.

A server shares one cache between every session. Two properties matter in a
classroom, where thirty students open the same link at the same moment:

- **bounded in bytes, not entries**: one 500-token batch can outweigh a hundred
  short sentences, so the least recently used entries leave until the total fits;
- **single flight**: while a key is being computed, other callers of that key wait
  for it instead of computing (and holding) thirty copies.

An entry larger than the whole budget is computed and returned but not kept. A caller that
knows an entry's size before computing it (a model's weight files) says so, and room is
made first, so the new entry never sits beside what it replaces.

It is the one byte-bounded cache of the package, and a process's caches are named in one
registry (``named``, ``CACHES``), each sized from the one table of bounds: the shared results
(``attnviz.run.run``), the app's figures, the finished background jobs (``attnviz.jobs``), the Q/K
map's corpus runs, the lookups (embeddings, position tables, split texts, settings states) and the
random layer's weights take their shares of ``ATTNVIZ_CACHE_MB`` (``attnviz.limits.CACHE_SHARES``),
the loaded models (``attnviz.models.registry``) ``ATTNVIZ_MAX_LOADED_MB``.

May import: attnviz.limits (numpy and torch, to size what it holds).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import torch

from attnviz.limits import cache_bytes

# The types of a plain value (a setting, a label, a timing): what a list can hold and still be
# sized, or shared by a figure, without a call per item.
PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def nbytes(obj: Any, _seen: set[int] | None = None) -> int:
    """An estimate of the memory held by ``obj``: its tensors and arrays, counted once
    (views of one storage count once), plus a small constant per object (a string shared
    by two lists of plain values counts in each)."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        key = ("storage", storage.data_ptr())
        if key in seen:
            return 64
        seen.add(key)
        return storage.nbytes() + 64
    if isinstance(obj, np.ndarray):
        return (obj.nbytes if obj.base is None else 0) + 64
    if isinstance(obj, (str, bytes)):
        return len(obj) + 48
    if isinstance(obj, dict):
        if set(map(type, obj)) | set(map(type, obj.values())) <= PLAIN_TYPES:  # settings, timings
            return 64 + 96 * len(obj) + sum(len(v) for v in (*obj, *obj.values()) if type(v) is str)
        return 64 + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        if set(map(type, obj)) <= PLAIN_TYPES:  # a text's tokens: hundreds of strings, no call each
            return 56 + 48 * len(obj) + sum(len(v) for v in obj if type(v) is str)
        return 56 + sum(nbytes(v, seen) for v in obj)
    if isinstance(obj, torch.nn.Module):
        return 64 + sum(nbytes(t, seen) for t in itertools.chain(obj.parameters(), obj.buffers()))
    if hasattr(obj, "__dict__"):
        return 64 + sum(nbytes(v, seen) for v in vars(obj).values())
    return 32


class _Flight:
    """One computation in progress, shared by every caller of its key."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class ByteBudgetCache:
    """LRU cache of computed values, bounded by the sum of their sizes in bytes."""

    def __init__(self, max_bytes: int, size_of: Callable[[Any], int] = nbytes) -> None:
        self.max_bytes = int(max_bytes)
        self._size_of = size_of
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._flights: dict[Hashable, _Flight] = {}
        self.total_bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[Hashable]:
        """The keys held now, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any], *, size: int | None = None) -> Any:
        """The cached value of ``key``, computing it (once, however many callers) if absent.

        Callers that arrive while ``key`` is being computed wait and get the same value,
        or the same exception (exceptions are not cached). ``size``: the entry's bytes, known
        before it is computed: the least recently used entries leave first, to make room.
        """
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key][0]
            flight = self._flights.get(key)
            owner = flight is None
            if owner:
                flight = self._flights[key] = _Flight()
                self.misses += 1
                if size is not None:
                    self._evict(self.max_bytes - size)
        if not owner:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            return flight.value
        try:
            flight.value = compute()
        except BaseException as e:
            flight.error = e
            raise
        finally:
            with self._lock:
                if flight.error is None:
                    self._put(key, flight.value, size)
                del self._flights[key]
            flight.done.set()
        return flight.value

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The cached value of ``key`` (now the most recently used), or ``default``; never computes."""
        with self._lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key][0]

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """The cached value of ``key``, or ``default``, leaving the order of use as it is (a listing is not a use)."""
        with self._lock:
            held = self._entries.get(key)
            return default if held is None else held[0]

    def put(self, key: Hashable, value: Any, *, size: int | None = None) -> bool:
        """Keep ``value`` under ``key`` (in place of what it held), the least recently used leaving to make room;
        computed elsewhere (a background job's result). False where it is larger than the whole budget: not kept."""
        size = self._size_of(value) if size is None else size
        with self._lock:
            self._drop(key)
            self._put(key, value, size)
            return key in self._entries

    def discard(self, key: Hashable) -> None:
        """Let ``key``'s entry go, if it is held."""
        with self._lock:
            self._drop(key)

    def _drop(self, key: Hashable) -> None:
        held = self._entries.pop(key, None)
        if held is not None:
            self.total_bytes -= held[1]

    def make_room(self, size: int) -> None:
        """Unload the least recently used entries until ``size`` more bytes fit."""
        with self._lock:
            self._evict(self.max_bytes - size)

    def _evict(self, down_to: int) -> None:
        while self._entries and self.total_bytes > down_to:
            _, (_, old) = self._entries.popitem(last=False)
            self.total_bytes -= old

    def _put(self, key: Hashable, value: Any, size: int | None = None) -> None:
        size = self._size_of(value) if size is None else size
        if size > self.max_bytes:
            return  # larger than the whole budget: handed back, never kept
        self._entries[key] = (value, size)
        self.total_bytes += size
        self._evict(self.max_bytes)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.total_bytes = 0


CACHES: dict[str, ByteBudgetCache] = {}  # every cache of this process, by name
_NAMING = threading.Lock()


def named(name: str, size_of: Callable[[Any], int] = nbytes) -> ByteBudgetCache:
    """The process's one cache called ``name`` (made now, bounded by ``limits.cache_bytes(name)``,
    if it is the first to ask)."""
    with _NAMING:
        if name not in CACHES:
            CACHES[name] = ByteBudgetCache(cache_bytes(name), size_of=size_of)
        return CACHES[name]

