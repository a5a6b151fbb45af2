"""What every part of a `fll.store.lineage.LineageStore` shares: its table,
its caches and its lock, declared once here for the parts (`fll.store.writer`,
`fll.store.reader`, `fll.store.datasets`) that the store is composed of; the
store's constructor sets them."""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..opset import FieldLineageInfo
from .base import Table
from .cache import CacheBudget, SizedLRU
from .datarows import _Cached


class StoreState:
    """The state of a lineage store (set by `LineageStore.__init__`)."""

    #: whether questions read the failed-run rows too (`including_failed`)
    include_failed = False

    table: Table
    url: str
    format: int
    first_runs: bool
    cache_budget: CacheBudget
    _cache: SizedLRU[_Cached]
    _lock: threading.Lock
    _buckets: dict[tuple[str, int], list[tuple[bytes, dict[str, bytes]]]]
    _level_keys: dict[tuple[str, int, int], list[tuple[bytes, dict[str, bytes]]]]
    _cols: dict[str, dict[str, bytes]]
    _eps: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]]
    _writer_id: str
    _announced: int
    _raw: dict[str, bytes]
    _shape_rows: dict[str, bytes]
    _sets_put: set[str]
    _adopted: OrderedDict[str, dict[bytes, dict[str, bytes]]]
    _adopt_lock: threading.Lock
    _shapes: SizedLRU[tuple[bytes, bytes]]
    _written: OrderedDict[str, FieldLineageInfo]
    _schema_bodies: OrderedDict[bytes, list]
    #: top buckets directories listed lately (`fll.store.reader.Reader._likely_tops`)
    _tops_seen: set[int]
