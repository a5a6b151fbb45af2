"""The Cloud Bigtable backend (and Google's emulator, ``cbtemulator``, for tests).

URL: ``bigtable://<project>/<instance>/<table>`` with optional
``?emulator=host:port`` (default: the ``BIGTABLE_EMULATOR_HOST`` variable; unset
means the managed service with Application Default Credentials),
``app_profile=…``, ``timeout=30`` (seconds per call), ``deadline=60`` (seconds
of retrying before giving up), ``create=true|false`` (create the table and
column family when missing), ``batch=1000`` (rows per MutateRows request) and
``page=500`` (rows per ReadRows page).

It speaks the v2 admin API through the generated gRPC client, and the data
API on that client's channel with bare protobuf messages
(`fll.store.bigtable_wire`: half the CPU of a call), so that it alone decides
what is retried: every mutation's per-row status is checked
(a row the server did not confirm is retried while the error is transient and
otherwise raises `StoreError` naming the row), reads are paged and resumed from
the last row received, and reverse scans use Bigtable's native reversed reads
(announced with the ``bigtable-features`` request header, which the emulator
requires); a server answering those UNIMPLEMENTED gets a forward read of the
range reversed in memory (at most ``limit`` rows held; cost grows with the
range). Bigtable applies each row atomically but not a batch of rows, so
``atomic_batches`` is False and the lineage store orders its writes instead.
Cells are written with server timestamps and read latest-version-only.

This module must never report a write as done before every row's status said
OK, and never put credentials in a message.
"""
from __future__ import annotations

import base64
import logging
import os
import random
import threading
import time
from collections import deque
from typing import Callable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import parse_qs, urlsplit

from ..errors import StoreError
from .base import (Row, Span, SpanGroup, SpanRead, in_ranges, read_span_groups_by_rows,
                   read_spans_by_rows, redact,
                   register_backend, scan_bounds)
from .bigtable_wire import FAMILY, DataCalls, merge_chunks, messages

_EXTRA_HINT = "pip install 'fll[bigtable]'"
# gRPC status codes worth another attempt: DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
# ABORTED, UNAVAILABLE. Anything else (INVALID_ARGUMENT, PERMISSION_DENIED…) will
# fail the same way again.
_TRANSIENT = {4, 8, 10, 14}
_NOT_FOUND = 5
# The emulator's gRPC server takes at most 4 MiB per message; real Bigtable 256 MB.
_MAX_REQUEST_BYTES = 3 * 1024 * 1024 + 512 * 1024
_T = TypeVar("_T")
_log = logging.getLogger("fll.store")


class BigtableTable:
    """A `Table` in one Bigtable table, one column family ``c``."""

    atomic_batches = False
    #: `scan_ranges` is one ReadRows call whatever the ranges
    one_call_ranges = True
    #: `check_and_put` writes all its values in the check's own atomic call
    #: (HBase's Thrift 1 guards and writes one cell, the rest follow)
    one_call_check_and_put = True

    def __init__(self, project: str, instance: str, table: str, *, emulator: str | None = None,
                 app_profile: str = "", timeout: float = 30.0, deadline: float = 60.0,
                 create: bool = True, batch_rows: int = 1000, page_rows: int = 500,
                 url: str | None = None):
        try:
            import grpc
            from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
            from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
                BigtableTableAdminGrpcTransport,
            )
            from google.cloud.bigtable_v2 import BigtableClient
            from google.cloud.bigtable_v2.services.bigtable.transports import (
                BigtableGrpcTransport,
            )
            from google.cloud.bigtable_v2.types import FeatureFlags
        except ImportError as e:
            raise StoreError(f"the bigtable:// backend needs google-cloud-bigtable ({e}); "
                             f"{_EXTRA_HINT}") from None
        self.project, self.instance, self.table_id = project, instance, table
        self.emulator = emulator
        self.app_profile = app_profile
        self.timeout = timeout
        self.deadline = deadline
        self.create = create
        self.batch_rows = batch_rows
        self.page_rows = page_rows
        self.url = url or f"bigtable://{project}/{instance}/{table}"
        self.instance_path = f"projects/{project}/instances/{instance}"
        self.table_path = f"{self.instance_path}/tables/{table}"
        self._where = f"bigtable table {self.table_path}" + (
            f" (emulator {emulator})" if emulator else "")
        self._features = [("bigtable-features", base64.urlsafe_b64encode(
            FeatureFlags.serialize(FeatureFlags(reverse_scans=True))).decode())]
        self._ensure_lock = threading.Lock()
        self._native_reverse = True
        try:
            if emulator:
                # short reconnect backoff: an emulator restarted on the same port
                # is reachable again within a second, not gRPC's default minutes
                options = [("grpc.max_send_message_length", -1),
                           ("grpc.max_receive_message_length", -1),
                           ("grpc.initial_reconnect_backoff_ms", 100),
                           ("grpc.min_reconnect_backoff_ms", 100),
                           ("grpc.max_reconnect_backoff_ms", 1000),
                           # ReadRows and MutateRows read on the calling thread, not
                           # through the channel's spin thread: less CPU per call
                           (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
                self._channel = grpc.insecure_channel(emulator, options=options)
                self._client = BigtableClient(transport=BigtableGrpcTransport(
                    channel=self._channel))
                self._admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(
                    channel=self._channel))
            else:
                self._channel = None
                self._client = BigtableClient(transport="grpc")
                self._admin = BigtableTableAdminClient()
            # the channel the client made (with its credentials), for the data calls
            transport = self._client.transport
            assert isinstance(transport, BigtableGrpcTransport)
            self._data = DataCalls(transport.grpc_channel, self.table_path, app_profile)
        except Exception as e:  # google.auth raises DefaultCredentialsError, among others
            raise StoreError(f"{self._where}: cannot create the client: {_brief(e)} (set "
                             f"GOOGLE_APPLICATION_CREDENTIALS, or BIGTABLE_EMULATOR_HOST "
                             f"for the emulator)") from None
        if create:
            self._ensure_table()

    # -- errors and retries ----------------------------------------------------
    def _error(self, what: str, e: BaseException | str) -> StoreError:
        return StoreError(f"{self._where}: {what} failed: "
                          f"{e if isinstance(e, str) else _brief(e)}")

    def _refused_or_warn(self, what: str, e: BaseException) -> None:
        """Fail at once when nothing listens at the address we never reached;
        otherwise say once that we are retrying, instead of 30-60 s of silence."""
        if _code(e) not in _TRANSIENT:
            return
        if not getattr(self, "_reached", False) and "connection refused" in str(e).lower():
            raise self._error(what, "connection refused: nothing listens at the address "
                              "(is the emulator or BIGTABLE_EMULATOR_HOST right?)") from None
        if not getattr(self, "_warned", False):
            self._warned = True
            _log.warning("%s: %s failed (%s); retrying for up to %gs …", self._where, what,
                         _brief(e), self.deadline)

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` until it succeeds, retrying transient errors with jittered
        backoff until the deadline; re-create a vanished table once."""
        give_up = time.monotonic() + self.deadline
        delay = 0.05
        recreated = False
        while True:
            try:
                result = fn()
                self._reached = True
                return result
            except (StoreError, _NoReverse):
                raise
            except Exception as e:
                self._refused_or_warn(what, e)
                code = _code(e)
                if code == _NOT_FOUND and self.create and not recreated and \
                        "table" in str(e).lower():
                    # a fresh emulator (or a dropped table): create it and try again
                    recreated = True
                    self._ensure_table()
                    continue
                if code not in _TRANSIENT:
                    raise self._error(what, e) from None
                if time.monotonic() + delay > give_up:
                    raise self._error(what, f"gave up after {self.deadline:g}s of retries: "
                                      f"{_brief(e)}") from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)

    def _ensure_table(self) -> None:
        from google.cloud.bigtable_admin_v2 import (ColumnFamily, GcRule, GetTableRequest,
                                                    ModifyColumnFamiliesRequest, Table as TablePb)

        family = ColumnFamily(gc_rule=GcRule(max_num_versions=1))
        schema = GetTableRequest(name=self.table_path, view=TablePb.View.SCHEMA_VIEW)

        def ensure() -> None:
            try:
                found = self._admin.get_table(request=schema, timeout=self.timeout, retry=None)
            except Exception as e:
                code = _code(e)
                if code == 7:  # PERMISSION_DENIED: data-only credentials; assume it exists
                    return
                if code != _NOT_FOUND:
                    raise
                try:
                    self._admin.create_table(parent=self.instance_path, table_id=self.table_id,
                                             table=TablePb(column_families={FAMILY: family}),
                                             timeout=self.timeout, retry=None)
                    return
                except Exception as e2:
                    if _code(e2) != 6:  # ALREADY_EXISTS: another client won the race
                        raise
                found = self._admin.get_table(request=schema, timeout=self.timeout, retry=None)
            if FAMILY not in found.column_families:
                self._admin.modify_column_families(
                    name=self.table_path, timeout=self.timeout, retry=None,
                    modifications=[ModifyColumnFamiliesRequest.Modification(
                        id=FAMILY, create=family)])

        with self._ensure_lock:
            give_up = time.monotonic() + self.deadline
            delay = 0.05
            while True:
                try:
                    ensure()
                    self._reached = True
                    return
                except Exception as e:
                    self._refused_or_warn("creating the table and column family", e)
                    if _code(e) not in _TRANSIENT or time.monotonic() + delay > give_up:
                        raise self._error("creating the table and column family", e) from None
                    time.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, 2.0)

    # -- writes ----------------------------------------------------------------
    def put(self, rows: Mapping[bytes, Row]) -> None:
        self.put_and_delete(rows, {})

    def put_and_delete(self, rows: Mapping[bytes, Row], cells: Mapping[bytes, list[str]]
                       ) -> None:
        """`put` and `delete_columns` in one MutateRows (each row's entry
        applied alone, as in either): for cells no put of the call names."""
        m = messages()
        Mutation = m.Mutation

        entries = []
        for key, cols in rows.items():
            key = bytes(key)
            if not key:
                raise StoreError(f"{self._where}: Bigtable row keys cannot be empty")
            if not cols:
                continue
            entries.append((key, [Mutation(set_cell=Mutation.SetCell(
                family_name=FAMILY, column_qualifier=c.encode("utf-8"),
                timestamp_micros=-1, value=bytes(v))) for c, v in cols.items()],
                len(key) + sum(len(c) + len(v) + 16 for c, v in cols.items())))
        if cells:
            at = {e[0]: i for i, e in enumerate(entries)}
            for key, deletes, size in self._column_deletes(cells):
                i = at.get(key)
                if i is None:
                    entries.append((key, deletes, size))
                else:  # one entry per row: its sets and deletes applied together
                    entries[i] = (key, entries[i][1] + deletes, entries[i][2] + size)
        self._mutate("write", entries, m.MutateRowsRequest)

    def _column_deletes(self, cells: Mapping[bytes, list[str]]) -> list:
        Mutation = messages().Mutation
        return [(bytes(k), [Mutation(delete_from_column=Mutation.DeleteFromColumn(
            family_name=FAMILY, column_qualifier=c.encode("utf-8"))) for c in cols],
            len(k) + sum(len(c) + 16 for c in cols)) for k, cols in cells.items() if k and cols]

    def delete_columns(self, cells: Mapping[bytes, list[str]]) -> None:
        """Remove single columns (``DeleteFromColumn`` mutations)."""
        self._mutate("delete", self._column_deletes(cells), messages().MutateRowsRequest)

    def delete(self, rows: list[bytes]) -> None:
        m = messages()
        Mutation = m.Mutation

        entries = [(bytes(k), [Mutation(delete_from_row=Mutation.DeleteFromRow())], len(k) + 8)
                   for k in dict.fromkeys(rows) if k]
        self._mutate("delete", entries, m.MutateRowsRequest)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Mapping[str, bytes]) -> bool:
        """One CheckAndMutateRow: the predicate selects the latest cell of
        ``column`` (with exactly ``expected`` as its value, by a closed value
        range, so no regex escaping of binary values); the puts go in the
        true branch when a value is expected and in the false branch when the
        cell must be absent. A retried call that already applied reports False;
        callers re-read the row to tell "mine" from "someone else's"."""
        m = messages()
        CheckAndMutateRowRequest, ColumnRange, Mutation, RowFilter, ValueRange = (
            m.CheckAndMutateRowRequest, m.ColumnRange, m.Mutation, m.RowFilter, m.ValueRange)

        key = bytes(row)
        if not key:
            raise StoreError(f"{self._where}: Bigtable row keys cannot be empty")
        qualifier = column.encode("utf-8")
        filters = [RowFilter(column_range_filter=ColumnRange(
                       family_name=FAMILY, start_qualifier_closed=qualifier,
                       end_qualifier_closed=qualifier)),
                   RowFilter(cells_per_column_limit_filter=1)]
        if expected is not None:
            filters.append(RowFilter(value_range_filter=ValueRange(
                start_value_closed=bytes(expected), end_value_closed=bytes(expected))))
        puts = [Mutation(set_cell=Mutation.SetCell(
            family_name=FAMILY, column_qualifier=c.encode("utf-8"), timestamp_micros=-1,
            value=bytes(v))) for c, v in values.items()]
        request = CheckAndMutateRowRequest(
            table_name=self.table_path, app_profile_id=self.app_profile, row_key=key,
            predicate_filter=RowFilter(chain=RowFilter.Chain(filters=filters)),
            true_mutations=puts if expected is not None else [],
            false_mutations=puts if expected is None else [])

        def attempt() -> bool:
            response = self._data.check_and_mutate_row(request=request, timeout=self.timeout,
                                                       retry=None)
            return bool(response.predicate_matched) == (expected is not None)
        return self._call("check and put", attempt)

    def _mutate(self, what: str, entries: list, request_type) -> None:
        chunk: list = []
        size = 0
        for entry in entries:
            if chunk and (len(chunk) >= self.batch_rows or size + entry[2] > _MAX_REQUEST_BYTES):
                self._mutate_chunk(what, chunk, request_type)
                chunk, size = [], 0
            chunk.append(entry)
            size += entry[2]
        if chunk:
            self._mutate_chunk(what, chunk, request_type)

    def _mutate_chunk(self, what: str, chunk: list, request_type) -> None:
        """One MutateRows request; rows without an OK status are retried
        (transient) or reported (anything else); never silently dropped."""
        pending = list(range(len(chunk)))

        def attempt() -> None:
            nonlocal pending
            request = request_type(
                table_name=self.table_path, app_profile_id=self.app_profile,
                entries=[request_type.Entry(row_key=chunk[i][0], mutations=chunk[i][1])
                         for i in pending])
            statuses: dict[int, tuple[int, str]] = {}
            try:
                for response in self._data.mutate_rows(request=request, timeout=self.timeout,
                                                       retry=None):
                    for e in response.entries:
                        statuses[pending[e.index]] = (e.status.code, e.status.message)
            finally:
                # rows confirmed OK are done even if the stream broke afterwards
                failed = [(i, st) for i, st in statuses.items()
                          if st[0] != 0 and st[0] not in _TRANSIENT]
                pending = [i for i in pending if statuses.get(i, (-1,))[0] != 0]
            if failed:
                i, (code, message) = failed[0]
                raise StoreError(f"{self._where}: {what} of row {_show(chunk[i][0])} failed: "
                                 f"{_code_name(code)}: {message}" +
                                 (f" (and {len(failed) - 1} more rows)" if len(failed) > 1
                                  else ""))
            if pending:
                code, message = statuses.get(pending[0], (14, "no status returned"))
                raise _Transient(code, f"{len(pending)} of {len(chunk)} rows not confirmed, "
                                       f"e.g. {_show(chunk[pending[0]][0])}: "
                                       f"{_code_name(code)} {message}")

        self._call(what, attempt)

    # -- reads -----------------------------------------------------------------
    def read_spans(self, spans: Sequence[Span], names: Sequence[Span] = (),
                   values: Sequence[Span] = ()) -> SpanRead:
        """One ReadRows of every span (`scan_ranges`)."""
        return read_spans_by_rows(self, spans, names, values)

    def read_span_groups(self, groups: Sequence[SpanGroup]) -> list[SpanRead]:
        """One ReadRows of every group's spans."""
        return read_span_groups_by_rows(self, groups)

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]
                    ) -> list[tuple[bytes, dict[str, bytes]]]:
        """One ReadRows call with every range in its row set (Bigtable answers
        them in key order); the rows are then put back in the order asked."""
        wanted = [b for b in (scan_bounds(lo, hi, None) for lo, hi in ranges) if b is not None]
        if not wanted:
            return []
        rows = self._read(ranges=wanted)
        if len(wanted) == 1:
            return rows
        return in_ranges(rows, wanted)

    def first_cells(self, rows: Sequence[bytes], lo: str, hi: str
                    ) -> dict[bytes, tuple[str, bytes]]:
        """One ReadRows of the keys (per 5,000), one cell per row: the first in the range."""
        keys = sorted({bytes(r) for r in rows if r})
        return {key: next(iter(cols.items())) for i in range(0, len(keys), 5000)
                for key, cols in self._read(keys=keys[i:i + 5000], columns=(lo, hi)) if cols}

    def _read(self, *, keys: list[bytes] | None = None, start: bytes = b"",
              start_open: bool = False, stop: bytes = b"", limit: int = 0,
              reverse: bool = False, ranges: list[tuple[bytes, bytes]] | None = None,
              columns: tuple[str, str] | None = None) -> list[tuple[bytes, dict[str, bytes]]]:
        """One bounded ReadRows call, returned whole so no stream outlives it
        (``columns``: only each row's first cell in that column range)."""
        m = messages()
        ColumnRange, ReadRowsRequest, RowFilter, RowRange, RowSet = (
            m.ColumnRange, m.ReadRowsRequest, m.RowFilter, m.RowRange, m.RowSet)

        if keys is not None:
            row_set = RowSet(row_keys=keys)
        elif ranges is not None:
            row_set = RowSet(row_ranges=[
                RowRange(start_key_closed=lo, end_key_open=hi) if hi
                else RowRange(start_key_closed=lo) for lo, hi in ranges])
        else:
            rng = RowRange()
            if start:
                if start_open:
                    rng.start_key_open = start
                else:
                    rng.start_key_closed = start
            if stop:
                rng.end_key_open = stop
            row_set = RowSet(row_ranges=[rng])
        latest = RowFilter(cells_per_column_limit_filter=1)
        if columns is not None:
            lo, hi = (c.encode("utf-8") for c in columns)
            latest = RowFilter(chain=RowFilter.Chain(filters=[RowFilter(
                column_range_filter=ColumnRange(family_name=FAMILY, start_qualifier_closed=lo,
                                                end_qualifier_open=hi)),
                latest, RowFilter(cells_per_row_limit_filter=1)]))
        request = ReadRowsRequest(table_name=self.table_path, app_profile_id=self.app_profile,
                                  rows=row_set, rows_limit=limit, reversed=reverse, filter=latest)

        def attempt() -> list[tuple[bytes, dict[str, bytes]]]:
            try:
                # the first response is fetched by read_rows itself, hence inside
                return list(merge_chunks(self._data.read_rows(
                    request=request, timeout=self.timeout, retry=None,
                    metadata=self._features)))
            except Exception as e:
                if reverse and _code(e) == 12:  # UNIMPLEMENTED: no reversed reads here
                    raise _NoReverse() from None
                raise

        return self._call("read", attempt)

    def get(self, row: bytes) -> dict[str, bytes] | None:
        if not row:
            return None
        found = self._read(keys=[bytes(row)])
        return found[0][1] if found and found[0][1] else None

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        keys = list(dict.fromkeys(bytes(r) for r in rows if r))
        out: dict[bytes, dict[str, bytes]] = {}
        # one ReadRows per 5,000 keys (a field question's cover is a few
        # hundred): the request stays far below Bigtable's request size limit
        for i in range(0, len(keys), 5000):
            for key, cols in self._read(keys=keys[i:i + 5000]):
                if cols:
                    out[key] = cols
        return out

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        bounds = scan_bounds(start, stop, limit)
        if bounds is None:
            return
        start, stop = bounds
        if reverse and not self._native_reverse:
            yield from self._reverse_in_memory(start, stop, limit)
            return
        emitted = 0
        lo, lo_open, hi = start, False, stop
        while True:
            want = self.page_rows if limit is None else min(self.page_rows, limit - emitted)
            try:
                page = self._read(start=lo, start_open=lo_open, stop=hi, limit=want,
                                  reverse=reverse)
            except _NoReverse:
                self._native_reverse = False
                yield from self._reverse_in_memory(start, hi, None if limit is None
                                                   else limit - emitted)
                return
            for key, cols in page:
                yield key, cols
            emitted += len(page)
            if len(page) < want or (limit is not None and emitted >= limit):
                return
            # resume after the last row: forward moves the open start up,
            # reverse moves the exclusive end down
            if reverse:
                hi = page[-1][0]
            else:
                lo, lo_open = page[-1][0], True

    def _reverse_in_memory(self, start: bytes, stop: bytes, limit: int | None
                           ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Reverse scan for servers without reversed reads: reads the whole range
        forward (I/O grows with the range, not the limit) and keeps only the last
        ``limit`` rows in memory (the whole range when there is no limit)."""
        tail: deque = deque(maxlen=limit)
        tail.extend(self.scan(start, stop))
        while tail:
            yield tail.pop()

    def close(self) -> None:
        try:
            if self._channel is not None:
                self._channel.close()
            else:
                self._client.transport.close()
                self._admin.transport.close()
        except Exception:  # closing twice or a dead channel: nothing left to release
            pass


class _NoReverse(Exception):
    """The server answered a reversed read with UNIMPLEMENTED."""


class _Transient(Exception):
    """Rows left unconfirmed by a MutateRows call, with their gRPC code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.grpc_code = code


def _code(e: BaseException) -> int | None:
    """The numeric gRPC status code of an error, if it carries one."""
    code = getattr(e, "grpc_code", None)
    if isinstance(code, int):
        return code
    code = getattr(e, "grpc_status_code", None)
    if code is not None:
        return code.value[0]
    code_fn = getattr(e, "code", None)
    if callable(code_fn):  # a raw grpc.RpcError
        try:
            return code_fn().value[0]
        except Exception:
            return None
    return None


def _code_name(code: int) -> str:
    import grpc  # the backend's own dependency: loaded whenever a table is

    return next((c.name for c in grpc.StatusCode if c.value[0] == code), f"code {code}")


def _brief(e: BaseException) -> str:
    """One line: the gRPC code name and the server's message, no debug blob."""
    code = _code(e)
    details = getattr(e, "details", None)  # a bare grpc.RpcError: its server message
    message = (details() if callable(details) else None) or getattr(e, "message", None) \
        or str(e)
    message = message.splitlines()[0] if message else type(e).__name__
    if code is not None and _code_name(code) not in message:
        return f"{_code_name(code)}: {message}"
    return message


def _show(key: bytes) -> str:
    return repr(key if len(key) <= 80 else key[:80] + b"...")


def _open(url: str) -> BigtableTable:
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/")]
    if len(path) != 3 or path[0] != "" or not parts.netloc or not all(path[1:]):
        raise StoreError(f"bigtable URL must look like bigtable://project/instance/table, "
                         f"got {redact(url)!r}")
    params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    known = {"emulator", "app_profile", "timeout", "deadline", "create", "batch", "page"}
    unknown = set(params) - known
    if unknown:
        raise StoreError(f"unknown bigtable URL parameter(s) {', '.join(sorted(unknown))} in "
                         f"{redact(url)!r}; known: {', '.join(sorted(known))}")

    def number(name: str, default: float, kind=float):
        try:
            value = kind(params.get(name, default))
        except ValueError:
            raise StoreError(f"bigtable URL parameter {name} must be a number, "
                             f"in {redact(url)!r}") from None
        if value <= 0:
            raise StoreError(f"bigtable URL parameter {name} must be positive, in {redact(url)!r}")
        return value

    create = params.get("create", "true").lower()
    if create not in ("true", "false", "1", "0", "yes", "no"):
        raise StoreError(f"bigtable URL parameter create must be true or false, in {redact(url)!r}")
    emulator = params.get("emulator") or os.environ.get("BIGTABLE_EMULATOR_HOST") or None
    return BigtableTable(parts.netloc, path[1], path[2], emulator=emulator,
                         app_profile=params.get("app_profile", ""),
                         timeout=number("timeout", 30.0), deadline=number("deadline", 60.0),
                         create=create in ("true", "1", "yes"),
                         batch_rows=number("batch", 1000, int), page_rows=number("page", 500, int),
                         url=url)


register_backend("bigtable", _open, extra="bigtable")
