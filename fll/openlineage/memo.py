"""A memo of what a pure function of JSON gave, bounded in bytes.

`Memo` keeps values under the SHA-256 digest of a JSON value's bytes as
orjson writes them, or under any small hashable key, least recently used
first out once the bytes its entries hold (as its ``sizeof`` estimates
them) pass its budget. OpenLineage ingest keeps what events built in them
(`fll.openlineage.ingest`, `fll.openlineage.facets`), within the share of
the process's cache budget the server gives it (`memo_budget` there).

Equal JSON bytes are one value (orjson writes every value one way), so they
can only build one thing; the keys are not sorted first: a producer sends
its keys in one order, and another order only builds the same thing once
more. SHA-256 (a collision is as unlikely as for any cryptographic hash,
so no event can be made to find another's set) is hardware-assisted on
most CPUs: twice as fast as BLAKE2b on the 20 KB of a usual event's lineage.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

import orjson

#: what ingest's memos hold together when no server sized them (`fll.store.cache`)
DEFAULT_MEMO_BYTES = 16 * 2**20

MEMO_MAX_KEY = 256 * 1024  # a wider event is built each time, not kept


class Memo:
    """A least-recently-used map bounded by the bytes its entries hold (as
    ``sizeof`` estimates them, key included); thread-safe. Keys are the
    digests `key` makes of JSON values, or any small hashable value."""

    def __init__(self, budget: int, sizeof: Callable[[Any], int]):
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.budget = budget
        self.bytes = 0
        self._sizeof = sizeof
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @staticmethod
    def key(value: Any) -> bytes | None:
        """The digest of ``value``'s JSON; None when it is not kept."""
        raw = canonical(value)
        return None if raw is None else Memo.digest(raw)

    @staticmethod
    def digest(raw: bytes) -> bytes:
        """The key of JSON bytes `canonical` gave."""
        return hashlib.sha256(raw).digest()

    def find(self, key: Hashable) -> Any:
        """What ``key`` was kept with, or `MISS`."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return MISS
            self._data.move_to_end(key)
            return hit[0]

    def keep(self, key: Hashable, value: Any) -> None:
        size = ENTRY_BYTES + self._sizeof(value)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, size)
            self.bytes += size
            while self.bytes > self.budget and self._data:
                self.bytes -= self._data.popitem(last=False)[1][1]  # the least recently used

    def get(self, value: Any, build: Callable[[], Any]) -> Any:
        """What ``value`` builds: kept, or built by ``build`` and kept."""
        key = self.key(value)
        if key is None:
            return build()
        hit = self.find(key)
        if hit is not MISS:
            return hit
        built = build()
        self.keep(key, built)
        return built

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0


MISS: Any = object()  # what `Memo.find` gives for a key it does not hold
# an entry's own bytes: the key (a 32-byte digest, or a pair of checksums),
# its place in the map, the tuple holding value and size
ENTRY_BYTES = 300


def canonical(value: Any) -> bytes | None:
    """The value's JSON, or None when that could stand for another value too: orjson writes NaN and infinities as null (only the
    standard library's parser makes them) and refuses integers beyond 64 bits."""
    try:
        key = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(key) > MEMO_MAX_KEY or b"null" in key:
        return None
    return key
