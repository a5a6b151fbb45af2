"""Memory bounded in bytes: the caches a process keeps share one budget.

`CacheBudget` splits ``--cache-mb`` between the caches that grow with what is
asked (decoded operation sets with the answers expanded from them, shapes,
answers merged over a list of sets); `SizedLRU` is the least-recently-used
map each of them is, bounded by the bytes its entries hold, as the entries
themselves estimate them (`fll.summaries.Summaries.footprint`: measured against
tracemalloc within 30%, always above). An entry that grows after it was
stored (a decoded set answering more fields) is counted again each time it is
used, so the total can pass the budget by what entries grew since their last
use, never by more.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Iterable, NamedTuple, TypeVar

V = TypeVar("V")

#: the default per process, when neither --cache-mb nor the config file set one
DEFAULT_CACHE_MB = 512


class CacheBudget(NamedTuple):
    """Bytes for each cache of one process."""

    sets: int  # decoded operation sets and their expanded answers (`LineageStore`)
    shapes: int  # shapes' operations and summaries as stored (`LineageStore`)
    merges: int  # answers merged over lists of sets (`fll.store.reads.SetMerges`)
    # what OpenLineage events' JSON built: checksums, and the lineage of sets
    # built lately (`fll.openlineage.ingest.memo_budget`)
    ingest: int

    @classmethod
    def of_mb(cls, mb: float) -> "CacheBudget":
        total = int(mb * 2**20)
        return cls(sets=total * 67 // 100, shapes=total * 10 // 100, merges=total * 19 // 100,
                   ingest=total * 4 // 100)


class SizedLRU(Generic[V]):
    """A thread-safe LRU map bounded by ``budget`` bytes (``sizeof`` of each
    value, re-read on every hit) and by ``count`` entries. The newest entry is
    kept even when it alone passes the budget (a question is answered; the
    next store evicts it)."""

    def __init__(self, budget: int, sizeof: Callable[[V], int], count: int = 1 << 30):
        self.budget, self.count = budget, count
        self._sizeof = sizeof
        self._data: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            value, size = hit
            now = self._sizeof(value)
            self._data[key] = (value, now)
            self._data.move_to_end(key)
            self._bytes += now - size
            self._evict()
            return value

    def get_many(self, keys: Iterable[Hashable]) -> dict[Hashable, V]:
        """The entries of ``keys`` that are here (one lock for all: a question
        over a hundred sets asks for a hundred)."""
        out: dict[Hashable, V] = {}
        data, sizeof = self._data, self._sizeof
        with self._lock:
            for key in keys:
                hit = data.get(key)
                if hit is not None:
                    value, size = hit
                    now = sizeof(value)
                    if now != size:
                        data[key] = (value, now)
                        self._bytes += now - size
                    data.move_to_end(key)
                    out[key] = value
            self._evict()
        return out

    def put(self, key: Hashable, value: V) -> None:
        size = self._sizeof(value)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, size)
            self._bytes += size
            self._evict()

    def _evict(self) -> None:
        while len(self._data) > 1 and (self._bytes > self.budget or len(self._data) > self.count):
            _, (_, size) = self._data.popitem(last=False)
            self._bytes -= size

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


def sizeof_merged(value: Any) -> int:
    """Bytes of a merged answer (`SetMerges`): its own estimate when it keeps
    one, else a map or set of fields."""
    own = getattr(value, "footprint", None)
    if isinstance(own, int):
        return own
    try:
        return 240 + 140 * len(value)
    except TypeError:
        return 240
