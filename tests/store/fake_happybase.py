"""An in-memory stand-in for a happybase `ConnectionPool` talking to HBase.

It mimics what fll's HBase backend relies on, as HBase documents it: tables
listed as bytes, ``create_table`` raising ``AlreadyExists``, batches sent as
one ``mutateRows``, ``row``/``rows`` returning ``{b"family:qualifier": value}``
(empty for a missing row), and scans where ``row_start`` is inclusive and
``row_stop`` exclusive *in scan direction* — so a reverse scan starts at the
upper bound and stops before the lower one. Faults can be injected: the next
N calls raise a given exception. It must never be used outside tests.
"""
from __future__ import annotations

import bisect
import contextlib
import threading

import happybase  # noqa: F401  (loads the Hbase_thrift module)
import Hbase_thrift


class FakeHBase:
    """The server side: tables of sorted rows, shared by every fake connection."""

    def __init__(self) -> None:
        self.tables: dict[bytes, dict[bytes, dict[bytes, bytes]]] = {}
        self.lock = threading.Lock()
        self.faults: list[BaseException] = []
        self.calls = 0
        self.created: list[bytes] = []

    def fail_next(self, *errors: BaseException) -> None:
        """The next ``len(errors)`` calls raise these, in order."""
        self.faults.extend(errors)

    def call(self) -> None:
        with self.lock:
            self.calls += 1
            if self.faults:
                raise self.faults.pop(0)


class FakePool:
    def __init__(self, server: FakeHBase, table_prefix: str | None = None):
        self.server = server
        self.prefix = table_prefix

    @contextlib.contextmanager
    def connection(self, timeout=None):
        yield FakeConnection(self.server, self.prefix)


class FakeConnection:
    def __init__(self, server: FakeHBase, prefix: str | None):
        self.server = server
        self.prefix = prefix

    def _name(self, name: str) -> bytes:
        return ((self.prefix + "_") if self.prefix else "").encode() + name.encode()

    def tables(self) -> list[bytes]:
        self.server.call()
        return [t for t in self.server.tables]

    def create_table(self, name: str, families: dict) -> None:
        self.server.call()
        full = self._name(name)
        with self.server.lock:
            if full in self.server.tables:
                raise Hbase_thrift.AlreadyExists(message=b"table exists")
            self.server.tables[full] = {}
            self.server.created.append(full)

    def table(self, name: str) -> "FakeTable":
        return FakeTable(self.server, self._name(name))


class FakeTable:
    def __init__(self, server: FakeHBase, name: bytes):
        self.server = server
        self.name = name

    def _rows(self) -> dict[bytes, dict[bytes, bytes]]:
        rows = self.server.tables.get(self.name)
        if rows is None:
            raise Hbase_thrift.IOError(
                message=b"org.apache.hadoop.hbase.TableNotFoundException: " + self.name)
        return rows

    def row(self, row: bytes) -> dict[bytes, bytes]:
        self.server.call()
        with self.server.lock:
            return dict(self._rows().get(row, {}))

    def rows(self, rows: list[bytes]) -> list[tuple[bytes, dict[bytes, bytes]]]:
        self.server.call()
        with self.server.lock:
            data = self._rows()
            return [(r, dict(data[r])) for r in rows if r in data]

    def scan(self, row_start=None, row_stop=None, limit=None, batch_size=1000, reverse=False):
        self.server.call()
        with self.server.lock:
            keys = sorted(self._rows())
            snapshot = {k: dict(v) for k, v in self._rows().items()}
        if reverse:
            # start = inclusive upper bound, stop = exclusive lower bound
            hi = bisect.bisect_right(keys, row_start) if row_start else len(keys)
            lo = bisect.bisect_right(keys, row_stop) if row_stop else 0
            chosen = keys[lo:hi][::-1]
        else:
            lo = bisect.bisect_left(keys, row_start) if row_start else 0
            hi = bisect.bisect_left(keys, row_stop) if row_stop else len(keys)
            chosen = keys[lo:hi]
        if limit is not None:
            chosen = chosen[:limit]
        for k in chosen:
            yield k, snapshot[k]

    def check_and_put(self, row: bytes, column: bytes, value: bytes | None,
                      data: dict[bytes, bytes]) -> bool:
        """HBase's checkAndPut: ``data`` goes into ``row`` only if ``column``
        holds ``value`` (None: the cell is absent), atomically."""
        self.server.call()
        with self.server.lock:
            rows = self._rows()
            if rows.get(row, {}).get(column) != value:
                return False
            rows.setdefault(row, {}).update(data)
            return True

    def batch(self, batch_size=None, **kw) -> "FakeBatch":
        return FakeBatch(self)


class FakeBatch:
    def __init__(self, table: FakeTable):
        self.table = table
        self.ops: list[tuple[str, bytes, dict | None]] = []

    def put(self, row: bytes, data: dict[bytes, bytes]) -> None:
        self.ops.append(("put", row, data))

    def delete(self, row: bytes) -> None:
        self.ops.append(("delete", row, None))

    def send(self) -> None:
        self.table.server.call()
        with self.table.server.lock:
            rows = self.table._rows()
            for kind, row, data in self.ops:
                if kind == "put":
                    rows.setdefault(row, {}).update(data)
                else:
                    rows.pop(row, None)
        self.ops = []
