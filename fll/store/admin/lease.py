"""The maintenance lease and the transactions purge, repair and upgrade write in.

`maintenance` holds ``v|lease`` on a backend without transactions (and refuses
while a writer announced itself); `atomically` runs one step in one
transaction where the backend has them; `_delete` deletes in batches.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ... import rowkeys as rk
from ...errors import StoreError
from ..base import Table
from .rows import _BATCH, _T, iso_ms


@contextmanager
def maintenance(table: Table, what: str, *, lease_ms: int = 3_600_000) -> Iterator[None]:
    """Hold the maintenance lease for a purge or repair on a backend without
    transactions: take ``v|lease`` (check-and-put; an expired one is taken
    over), then refuse if any writer announced itself within its time to live.
    Writers check the lease after announcing, so one of the two always sees
    the other. On SQLite every step is its own transaction: nothing to hold."""
    if callable(getattr(table, "atomic", None)):
        yield
        return
    from ..writer import LEASE, WRITER_PREFIX, _now_ms

    key = rk.meta(LEASE)
    now = _now_ms()
    mine = {"t": _T.pack(now + lease_ms), "w": f"{what} since {iso_ms(now)}".encode()}
    current = table.get(key)
    if current is not None and _T.unpack(current["t"])[0] > now:
        raise StoreError(f"store {table.url}: another maintenance command holds the lease "
                         f"({current.get('w', b'?').decode(errors='replace')})")
    expected = None if current is None else current["t"]
    if not table.check_and_put(key, "t", expected, mine):
        raise StoreError(f"store {table.url}: another maintenance command took the lease first")
    try:
        prefix = rk.meta(WRITER_PREFIX)
        active: list[bytes] = []
        expired: list[bytes] = []
        for k, c in table.scan(prefix, rk.prefix_end(prefix)):
            alive = "t" in c and len(c["t"]) == 8 and _T.unpack(c["t"])[0] > now
            (active if alive else expired).append(k)
        if expired:  # writers long gone: their rows would only pile up
            table.delete(expired)
        if active:
            raise StoreError(f"store {table.url}: {len(active)} writer(s) active in the last "
                             f"30 s; {what} needs them stopped on this backend (no "
                             f"transactions): stop them and retry")
        yield
    finally:
        table.delete([key])


def atomically(table: Table, fn: Callable[[Table], Any]) -> Any:
    """``fn(table)`` in one transaction where the backend has them; else as is
    (the caller then holds the maintenance lease, see `lease`)."""
    atomic = getattr(table, "atomic", None)
    if callable(atomic):
        return atomic(lambda _t: fn(table))
    return fn(table)


def _delete(table: Table, keys: list[bytes]) -> None:
    for i in range(0, len(keys), _BATCH):
        table.delete(keys[i:i + _BATCH])
