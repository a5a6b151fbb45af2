"""`init`: create a store's table where its backend needs it."""
from __future__ import annotations

from ..base import Table


def init(table: Table) -> str:
    """Create the table where the backend needs it; returns what was done."""
    for name in ("create_table", "create", "ensure_table"):
        fn = getattr(table, name, None)
        if callable(fn):
            fn()
            return f"created {table.url}"
    # SQLite (and backends that create on open) made it when the table was opened
    next(iter(table.scan(limit=1)), None)
    return f"ready {table.url}"
