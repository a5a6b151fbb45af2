"""Storage: the `Table` protocol, its backends, and the lineage store on top.

`open_store(url)` is the one way in: it picks the backend by URL scheme
(`sqlite://`, `hbase://`, `bigtable://`) and wraps it in a `LineageStore`.
"""
from __future__ import annotations

import os

from .base import Table, known_schemes, open_table, redact, register_backend
from .lineage import LineageStore
from .reader import OperationGroup, RunInfo

# the built-in backends register themselves on import; the protocol module
# (base) knows none of them, so there is no import circle
from . import sqlite  # noqa: E402,F401  isort: skip
try:
    from . import hbase  # noqa: E402,F401  isort: skip
except ImportError:  # pragma: no cover - the hbase extra is not installed
    pass
try:
    from . import bigtable  # noqa: E402,F401  isort: skip
except ImportError:  # pragma: no cover - the bigtable extra is not installed
    pass

DEFAULT_URL = "sqlite:///fll-data/fll.db"

__all__ = ["Table", "LineageStore", "RunInfo", "OperationGroup", "open_store", "open_table", "open_rows",
           "register_backend", "known_schemes", "redact", "DEFAULT_URL", "default_url"]


def default_url() -> str:
    """`FLL_STORE` if set, else the embedded default ``./fll-data/fll.db``."""
    return os.environ.get("FLL_STORE") or DEFAULT_URL


def open_rows(url: str | None = None) -> Table:
    """A store's table for reading and writing rows as they are, in any format
    (what `fll admin upgrade`, fsck and the row commands work on)."""
    from .layout import WIDE_PREFIXES

    table = open_table(url or default_url())
    declare = getattr(table, "declare_wide", None)
    if callable(declare):
        declare(WIDE_PREFIXES)
    return table


def open_store(url: str | None = None, **options) -> LineageStore:
    """Open a lineage store; ``url`` defaults to `default_url()`."""
    return LineageStore(open_table(url or default_url()), **options)
