"""The write calls of concurrent writers on a backend without transactions
(Bigtable, HBase) sent together: the `put`, `get_many` and `delete_columns`
of every thread that asks while one such call is on the wire go out as ONE
call (one MutateRows / ReadRows on Bigtable, one ``mutateRowsTs`` /
``getRows`` on HBase) as soon as it is back.

`GroupedTable` wraps a `Table`. A call is grouped only in a thread inside
`grouping()` (the server's ingest writers, `fll.server.ingest`); any other
call, and every other method, goes to the table unchanged, so questions and
the CLI never wait for a writer's group.

How a group forms (one "lane" per kind of call): the first caller finds
nothing on the wire and sends its own call at once (a lone writer pays
nothing, there is no timer); whoever arrives while a call is on the wire
joins the next group, whose first caller sends it for all once the wire is
free. Every caller returns only after the call that carried
its rows came back, so the calls of one thread keep their order (a put
before a delete before a put stays so), and every check-then-act above
(`check_and_put`, never grouped) sees the writes its caller made before.

A grouped thread's `get` is a one-key multi-get, and its `read_spans` of
spans that know their keys is such a
multi-get on a backend that reads keys, not ranges, in one call (HBase); on
a backend that reads many ranges in one call (Bigtable) the `read_spans` of
the writers asking at once go as one `read_span_groups`, each caller
answered from its own spans.

Rows of one group: puts to the same row are merged (two writers of one cell
at the same moment: one of them wins, as it would unbatched); column deletes
are unioned; a multi-get reads every key once and each caller gets copies of
its own rows.

This module must never let one caller's error answer another: when a group's
call fails and it carried more than one caller, each caller then sends its own
part alone and gets its own outcome (puts and deletes are idempotent).
"""
from __future__ import annotations

import contextlib
import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from .base import Row, Span, SpanGroup, SpanRead, read_spans_by_rows

_local = threading.local()
T = TypeVar("T")


@contextlib.contextmanager
def grouping() -> Iterator[None]:
    """Group this thread's write calls with other threads' (see the module doc)."""
    prior = getattr(_local, "on", False)
    _local.on = True
    try:
        yield
    finally:
        _local.on = prior


def _grouped() -> bool:
    return getattr(_local, "on", False)


# threads that make a writer's call while the writer makes another (`meanwhile`)
_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()
HELPERS = 16


def meanwhile(call: Callable[[], T]) -> "Future[T]":
    """``call()`` made in a helper thread, grouped if this thread is, while this
    thread goes on: two calls that need not follow each other cost one round
    trip instead of two. The caller waits for the result before it answers."""
    global _helpers
    if _helpers is None:
        with _helpers_lock:
            if _helpers is None:
                _helpers = ThreadPoolExecutor(HELPERS, thread_name_prefix="fll-meanwhile")
    on = _grouped()

    def run() -> T:
        _local.on = on
        try:
            return call()
        finally:
            _local.on = False
    return _helpers.submit(run)


class _Group:
    __slots__ = ("parts", "lead", "done", "error", "result")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        # its first caller waits on ``lead`` to send it, the others on ``done``
        # (each caller is woken once, by the call that concerns it)
        self.lead = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.result: Any = None


class _Lane:
    """One kind of call: at most ``flights`` groups on the wire, the next one gathering."""

    def __init__(self, send: Callable[[list[Any]], Any], flights: int = 1):
        self._send = send
        self._lock = threading.Lock()
        self._open: _Group | None = None
        self._flights = flights
        self._flying = 0
        #: calls sent and the parts they carried (benchmarks and tests read these)
        self.calls = 0
        self.parts = 0

    def call(self, part: Any) -> tuple[_Group, bool]:
        """Send ``part`` in a group; (the group once its call came back, whether
        the call failed for a group of several, so the caller must go alone)."""
        with self._lock:
            group = self._open
            if group is None:
                group = self._open = _Group()
            group.parts.append(part)
            first = len(group.parts) == 1
            if first and self._flying < self._flights:
                self._flying += 1  # room on the wire: this caller sends at once
                self._open = None
                group.lead.set()
        if not first:
            group.done.wait()
            return group, group.error is not None and len(group.parts) > 1
        group.lead.wait()  # set by the call before it once that one came back
        try:
            group.result = self._send(group.parts)
        except BaseException as e:  # noqa: BLE001 - kept for the group's callers
            group.error = e
        finally:
            with self._lock:
                self.calls += 1
                self.parts += len(group.parts)
                following = self._open
                if following is None:
                    self._flying -= 1
                else:  # the group that gathered meanwhile closes and goes next
                    self._open = None
                    following.lead.set()
            group.done.set()
        return group, group.error is not None and len(group.parts) > 1


class _Joined:
    """A put and column deletes sent in one call (`GroupedTable.put_and_delete`)."""

    __slots__ = ("rows", "cells")

    def __init__(self, rows: Mapping[bytes, Row], cells: Mapping[bytes, list[str]]):
        self.rows = rows
        self.cells = cells


class GroupedTable:
    """A `Table` whose grouped threads share their write calls (module doc)."""

    def __init__(self, table: Any, flights: int = 1):
        self.table = table
        self.url = table.url
        self.puts = _Lane(self._put_all, flights)
        self.deletes = _Lane(self._delete_all, flights)
        self.reads = _Lane(self._get_all, flights)
        self.spans = _Lane(self._spans_all, flights)
        # only where the table has it (the write path looks for it)
        if callable(getattr(table, "put_and_delete", None)):
            self.put_and_delete = self._put_and_delete

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    # -- the grouped calls ----------------------------------------------------
    @staticmethod
    def _through(lane: "_Lane", part: Any, alone: Callable[[], Any]) -> tuple[Any, Any]:
        """(the group that carried ``part``, None), its error raised; or (None,
        what ``alone()`` gave) when the call goes by itself: outside `grouping`,
        or when the lane sends it alone (its group failed with several callers)."""
        if not _grouped():
            return None, alone()
        group, by_itself = lane.call(part)
        if by_itself:
            return None, alone()
        if group.error is not None:
            raise group.error
        return group, None

    def put(self, rows: Mapping[bytes, Row]) -> None:
        self._through(self.puts, rows, lambda: self.table.put(rows))

    def _put_and_delete(self, rows: Mapping[bytes, Row], cells: Mapping[bytes, list[str]]
                        ) -> None:
        """A put and column deletes in one call (Bigtable), joining the puts' lane."""
        self._through(self.puts, _Joined(rows, cells),
                      lambda: self.table.put_and_delete(rows, cells))

    def delete_columns(self, cells: Mapping[bytes, list[str]]) -> None:
        self._through(self.deletes, cells, lambda: self.table.delete_columns(cells))

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        group, found = self._through(self.reads, rows, lambda: self.table.get_many(rows))
        if group is None:
            return found
        found = group.result
        if len(group.parts) == 1:
            return found
        # the caller's rows among those found, each a copy (another caller may
        # change its own); walked from the smaller side: a writer's look at a
        # superseded set's buckets asks hundreds of keys and finds a few
        if len(found) < len(rows):
            mine = set(map(bytes, rows))
            return {key: dict(cols) for key, cols in found.items() if key in mine}
        return {key: dict(cols) for key in map(bytes, rows)
                if (cols := found.get(key)) is not None}

    # -- what a group sends ---------------------------------------------------
    def _put_all(self, parts: list[Any]) -> None:
        if len(parts) == 1:
            part = parts[0]
            if isinstance(part, _Joined):
                return self.table.put_and_delete(part.rows, part.cells)
            return self.table.put(part)
        merged: dict[bytes, dict[str, bytes]] = {}
        gone: dict[bytes, dict[str, None]] = {}
        for part in parts:
            rows = part
            if isinstance(part, _Joined):
                rows = part.rows
                for key, cols in part.cells.items():
                    gone.setdefault(bytes(key), {}).update(dict.fromkeys(cols))
            for key, cols in rows.items():
                if not cols:
                    continue
                have = merged.get(bytes(key))
                if have is None:
                    merged[bytes(key)] = dict(cols)
                else:
                    have.update(cols)
        if gone:
            # a cell one writer deletes and another puts at once: the put wins,
            # as when the delete went first (writers of one output take turns)
            cells = {k: [c for c in cols if c not in merged.get(k, {})]
                     for k, cols in gone.items()}
            self.table.put_and_delete(merged, {k: v for k, v in cells.items() if v})
        elif merged:
            self.table.put(merged)
        return None

    def _delete_all(self, parts: list[Mapping[bytes, list[str]]]) -> None:
        if len(parts) == 1:
            return self.table.delete_columns(parts[0])
        merged: dict[bytes, dict[str, None]] = {}
        for cells in parts:
            for key, cols in cells.items():
                merged.setdefault(bytes(key), {}).update(dict.fromkeys(cols))
        wanted = {k: list(cols) for k, cols in merged.items() if cols}
        if wanted:
            self.table.delete_columns(wanted)
        return None

    def _spans_all(self, parts: list[SpanGroup]) -> list[SpanRead]:
        return self.table.read_span_groups(parts)

    def _get_all(self, parts: list[list[bytes]]) -> dict[bytes, dict[str, bytes]]:
        if len(parts) == 1:
            return self.table.get_many(parts[0])
        keys = list(dict.fromkeys(map(bytes, itertools.chain.from_iterable(parts))))
        return self.table.get_many(keys)

    # -- the rest of the protocol, unchanged ----------------------------------
    def get(self, row: bytes) -> dict[str, bytes] | None:
        """A grouped thread's one-row read joins the multi-gets (the same answer:
        None for a row without columns)."""
        if not _grouped() or not row:
            return self.table.get(row)
        return self.get_many([row]).get(bytes(row)) or None

    def scan(self, *args: Any, **kwargs: Any) -> Any:
        return self.table.scan(*args, **kwargs)

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]) -> Any:
        return self.table.scan_ranges(ranges)

    def read_spans(self, spans: Sequence[Span], names: Sequence[Span] = (),
                   values: Sequence[Span] = ()) -> SpanRead:
        """A grouped thread's spans that all know their keys, on a backend that
        reads them as a multi-get anyway (HBase: ``getRows``), go as a grouped
        `get_many` (how a writer looks which bucket cells other runs keep)."""
        if not _grouped():
            return self.table.read_spans(spans, names, values)
        if not getattr(self.table, "one_call_ranges", False):
            if all(s.keys is not None for part in (spans, names, values) for s in part):
                return read_spans_by_rows(self, spans, names, values, by_keys=True)
            return self.table.read_spans(spans, names, values)
        # a backend reading many ranges in one call (Bigtable): the spans of
        # the writers asking at once go as one `read_span_groups`
        part: SpanGroup = (spans, names, values)
        group, read = self._through(self.spans, part,
                                    lambda: self.table.read_spans(spans, names, values))
        if group is None:
            return read
        mine = next(i for i, p in enumerate(group.parts) if p is part)
        return group.result[mine]

    def read_span_groups(self, groups: Any) -> Any:
        return self.table.read_span_groups(groups)

    def delete(self, rows: list[bytes]) -> None:
        self.table.delete(rows)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Row) -> bool:
        return self.table.check_and_put(row, column, expected, values)

    def close(self) -> None:
        self.table.close()
