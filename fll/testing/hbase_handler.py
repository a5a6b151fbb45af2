"""The Thrift 1 ``Hbase`` service of the HBase test double
(`fll.testing.hbase_thrift`): table admin, gets, mutations, ``checkAndPut``
and scanners over the in-memory tables of `fll.testing.hbase_model`."""
from __future__ import annotations

import bisect
import itertools
import struct
import threading
from typing import Any, Iterator

from thriftpy2.thrift import TApplicationException

from .hbase_model import (LATEST, MAX_ROW_LENGTH, _io, _now_ms, _parse_filters, _Scanner,
                          _split, _Table, hb)


class HBaseHandler:
    """The Thrift 1 ``Hbase`` service over an in-memory, thread-safe store."""

    def __init__(self, server: Any = None) -> None:
        # ``server``: the `HBaseThriftServer` serving this handler, if any
        self.tables: dict[bytes, _Table] = {}
        self.lock = threading.RLock()
        self.scanners: dict[int, _Scanner] = {}
        self._scanner_ids = itertools.count(1)
        self._server = server

    # -- helpers ---------------------------------------------------------------
    def _stamp(self) -> int:
        # strictly HBase stamps with the region server's clock; the same ms twice is allowed
        return _now_ms()

    def _table(self, name: bytes, *, batched: bool = False, n: int = 1) -> _Table:
        t = self.tables.get(name)
        if t is None:
            if batched:
                raise _io("org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException",
                          f"Failed {n} action{'s' if n != 1 else ''}: Table "
                          f"'{name.decode('utf-8', 'replace')}' was not found, got: "
                          f"hbase:namespace.: {n} time{'s' if n != 1 else ''}, "
                          f"servers with issues: null")
            raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                      name.decode("utf-8", "replace"))
        if not t.enabled:
            raise _io("org.apache.hadoop.hbase.TableNotEnabledException",
                      f"{name.decode('utf-8', 'replace')} is disabled.")
        return t

    def _check_family(self, t: _Table, name: bytes, column: bytes) -> bytes:
        fam, _ = _split(column)
        if fam not in t.families:
            raise _io("org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException",
                      f"Column family {fam.decode('utf-8', 'replace')} does not exist in region "
                      f"{name.decode('utf-8', 'replace')}")
        return fam

    @staticmethod
    def _row_error(row: bytes) -> str | None:
        if not row:
            return "Row length is 0"
        if len(row) > MAX_ROW_LENGTH:
            return f"Row length {len(row)} is > {MAX_ROW_LENGTH}"
        return None

    def _result(self, key: bytes, cells: dict[bytes, list[tuple[int, bytes]]], sort: bool):
        if sort:
            return hb.TRowResult(row=key, sortedColumns=[
                hb.TColumn(columnName=c, cell=hb.TCell(value=v[0][1], timestamp=v[0][0]))
                for c, v in cells.items()])
        return hb.TRowResult(row=key, columns={
            c: hb.TCell(value=v[0][1], timestamp=v[0][0]) for c, v in cells.items()})

    # -- admin -----------------------------------------------------------------
    def getTableNames(self) -> list[bytes]:
        with self.lock:
            return sorted(self.tables)

    def createTable(self, tableName: bytes, columnFamilies: list) -> None:
        with self.lock:
            if not tableName:
                raise hb.IllegalArgument(message="java.lang.IllegalArgumentException: "
                                                 "Table name must not be empty")
            if tableName in self.tables:
                raise hb.AlreadyExists(message=f"table name already in use: "
                                               f"{tableName.decode('utf-8', 'replace')}")
            if not columnFamilies:
                raise hb.IllegalArgument(message="java.lang.IllegalArgumentException: "
                                                 "Table should have at least one column family.")
            fams = {}
            for d in columnFamilies:
                name = d.name[:-1] if d.name.endswith(b":") else d.name
                if not name or b":" in name:
                    raise hb.IllegalArgument(message=f"java.lang.IllegalArgumentException: "
                                                     f"Illegal family name {d.name!r}")
                d.name = name + b":"
                if not d.maxVersions or d.maxVersions < 1:
                    d.maxVersions = 1
                fams[name] = d
            self.tables[tableName] = _Table(families=fams)

    def deleteTable(self, tableName: bytes) -> None:
        with self.lock:
            t = self.tables.get(tableName)
            if t is None:
                raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                          tableName.decode("utf-8", "replace"))
            if t.enabled:
                raise _io("org.apache.hadoop.hbase.TableNotDisabledException",
                          tableName.decode("utf-8", "replace"))
            del self.tables[tableName]

    def enableTable(self, tableName: bytes) -> None:
        with self.lock:
            if tableName not in self.tables:
                raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                          tableName.decode("utf-8", "replace"))
            self.tables[tableName].enabled = True

    def disableTable(self, tableName: bytes) -> None:
        with self.lock:
            if tableName not in self.tables:
                raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                          tableName.decode("utf-8", "replace"))
            self.tables[tableName].enabled = False

    def isTableEnabled(self, tableName: bytes) -> bool:
        with self.lock:
            if tableName not in self.tables:
                raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                          tableName.decode("utf-8", "replace"))
            return self.tables[tableName].enabled

    def getColumnDescriptors(self, tableName: bytes) -> dict:
        with self.lock:
            t = self.tables.get(tableName)
            if t is None:
                raise _io("org.apache.hadoop.hbase.TableNotFoundException",
                          tableName.decode("utf-8", "replace"))
            return {name + b":": d for name, d in t.families.items()}

    def getTableRegions(self, tableName: bytes) -> list:
        with self.lock:
            self._table(tableName)
            return [hb.TRegionInfo(startKey=b"", endKey=b"", id=1, name=tableName + b",,1",
                                   version=1, serverName=b"127.0.0.1", port=16020)]

    def compact(self, tableNameOrRegionName: bytes) -> None:
        with self.lock:
            self._table(tableNameOrRegionName)

    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        """Drops delete markers and what they hide, as a major compaction does."""
        with self.lock:
            t = self._table(tableNameOrRegionName)
            for key in list(t.keys):
                row = t.rows[key]
                kept = t.visible(key, row, None, LATEST, versions=2 ** 31)
                row.cells, row.col_tomb, row.fam_tomb = kept, {}, {}
                if not kept:
                    del t.rows[key]
            t.keys = sorted(t.rows)

    # -- reads -----------------------------------------------------------------
    def _get_rows(self, tableName, rows, columns, before):
        with self.lock:
            t = self._table(tableName)
            out = []
            for key in rows:
                row = t.rows.get(key)
                cells = t.visible(key, row, columns, before) if row else {}
                if cells:
                    out.append(self._result(key, cells, False))
            return out

    def getRow(self, tableName, row, attributes):
        return self._get_rows(tableName, [row], None, LATEST)

    def getRowWithColumns(self, tableName, row, columns, attributes):
        return self._get_rows(tableName, [row], columns or None, LATEST)

    def getRowTs(self, tableName, row, timestamp, attributes):
        return self._get_rows(tableName, [row], None, timestamp)

    def getRowWithColumnsTs(self, tableName, row, columns, timestamp, attributes):
        return self._get_rows(tableName, [row], columns or None, timestamp)

    def getRows(self, tableName, rows, attributes):
        return self._get_rows(tableName, rows, None, LATEST)

    def getRowsWithColumns(self, tableName, rows, columns, attributes):
        return self._get_rows(tableName, rows, columns or None, LATEST)

    def getRowsTs(self, tableName, rows, timestamp, attributes):
        return self._get_rows(tableName, rows, None, timestamp)

    def getRowsWithColumnsTs(self, tableName, rows, columns, timestamp, attributes):
        return self._get_rows(tableName, rows, columns or None, timestamp)

    def _versions(self, tableName, row, column, before, n):
        with self.lock:
            t = self._table(tableName)
            r = t.rows.get(row)
            cells = t.visible(row, r, [column], before, versions=n) if r else {}
            return [hb.TCell(value=v, timestamp=ts) for vs in cells.values() for ts, v in vs]

    def get(self, tableName, row, column, attributes):
        return self._versions(tableName, row, column, LATEST, 1)

    def getVer(self, tableName, row, column, numVersions, attributes):
        return self._versions(tableName, row, column, LATEST, numVersions)

    def getVerTs(self, tableName, row, column, timestamp, numVersions, attributes):
        return self._versions(tableName, row, column, timestamp + 1, numVersions)

    def getRowOrBefore(self, tableName, row, family):
        raise _io("java.io.IOException", "getRowOrBefore is not supported since HBase 2.0")

    def getRegionInfo(self, row):
        raise _io("java.io.IOException", "getRegionInfo is not supported by this test server")

    # -- writes ----------------------------------------------------------------
    def _apply(self, t: _Table, name: bytes, key: bytes, mutations, ts: int) -> None:
        """One row's mutations, as HBase's handler builds one Delete and one Put."""
        stamp = self._stamp() if ts == LATEST else ts
        for m in mutations:
            self._check_family(t, name, m.column or b"")
        row = t.row_for_write(key)
        for m in mutations:
            fam, qual = _split(m.column)
            if m.isDelete:
                if qual is None:
                    row.fam_tomb[fam] = max(row.fam_tomb.get(fam, -1), stamp)
                else:
                    row.col_tomb[m.column] = max(row.col_tomb.get(m.column, -1), stamp)
        for m in mutations:
            fam, qual = _split(m.column)
            if not m.isDelete:
                col = fam + b":" + (qual or b"")
                versions = [(s, v) for s, v in row.cells.get(col, []) if s != stamp]
                versions.append((stamp, m.value or b""))
                versions.sort(key=lambda sv: -sv[0])
                row.cells[col] = versions[:max(t.families[fam].maxVersions, 1) + 8]

    def mutateRow(self, tableName, row, mutations, attributes):
        self.mutateRowTs(tableName, row, mutations, LATEST, attributes)

    def mutateRowTs(self, tableName, row, mutations, timestamp, attributes):
        problem = self._row_error(row)
        if problem:
            raise hb.IllegalArgument(message=f"java.lang.IllegalArgumentException: {problem}")
        with self.lock:
            t = self._table(tableName)
            self._apply(t, tableName, row, mutations, timestamp)

    def mutateRows(self, tableName, rowBatches, attributes):
        self.mutateRowsTs(tableName, rowBatches, LATEST, attributes, _api="mutateRows")

    def mutateRowsTs(self, tableName, rowBatches, timestamp, attributes, _api="mutateRowsTs"):
        for b in rowBatches:
            if self._row_error(b.row):
                # HBase builds its Put/Delete objects before its try block: the
                # IllegalArgumentException escapes as an internal error
                raise TApplicationException(TApplicationException.INTERNAL_ERROR,
                                            f"Internal error processing {_api}")
        with self.lock:
            t = self._table(tableName, batched=True, n=len(rowBatches))
            for b in rowBatches:
                for m in b.mutations:
                    self._check_family(t, tableName, m.column or b"")
            for b in rowBatches:
                self._apply(t, tableName, b.row, b.mutations, timestamp)

    def atomicIncrement(self, tableName, row, column, value):
        with self.lock:
            t = self._table(tableName)
            self._check_family(t, tableName, column)
            r = t.rows.get(row)
            cells = t.visible(row, r, [column], LATEST) if r else {}
            current = struct.unpack(">q", cells[column][0][1])[0] if column in cells else 0
            current += value
            m = hb.Mutation(column=column, value=struct.pack(">q", current))
            self._apply(t, tableName, row, [m], LATEST)
            return current

    def increment(self, increment):
        self.atomicIncrement(increment.table, increment.row, increment.column,
                             increment.ammount)

    def incrementRows(self, increments):
        for inc in increments:
            self.increment(inc)

    def deleteAll(self, tableName, row, column, attributes):
        self.deleteAllTs(tableName, row, column, LATEST, attributes)

    def deleteAllTs(self, tableName, row, column, timestamp, attributes):
        with self.lock:
            t = self._table(tableName)
            self._apply(t, tableName, row, [hb.Mutation(isDelete=True, column=column)],
                        timestamp)

    def deleteAllRow(self, tableName, row, attributes):
        self.deleteAllRowTs(tableName, row, LATEST, attributes)

    def deleteAllRowTs(self, tableName, row, timestamp, attributes):
        with self.lock:
            t = self._table(tableName)
            self._apply(t, tableName, row,
                        [hb.Mutation(isDelete=True, column=f) for f in t.families], timestamp)

    def append(self, append):
        with self.lock:
            t = self._table(append.table)
            r = t.rows.get(append.row)
            out = []
            for col, val in zip(append.columns, append.values, strict=False):
                self._check_family(t, append.table, col)
                cells = t.visible(append.row, r, [col], LATEST) if r else {}
                new = (cells[col][0][1] if col in cells else b"") + val
                self._apply(t, append.table, append.row, [hb.Mutation(column=col, value=new)],
                            LATEST)
                out.append(hb.TCell(value=new, timestamp=_now_ms()))
                r = t.rows.get(append.row)
            return out

    def checkAndPut(self, tableName, row, column, value, mput, attributes):
        problem = self._row_error(row)
        if problem:
            raise hb.IllegalArgument(message=f"java.lang.IllegalArgumentException: {problem}")
        with self.lock:
            t = self._table(tableName)
            self._check_family(t, tableName, column)
            r = t.rows.get(row)
            cells = t.visible(row, r, [column], LATEST) if r else {}
            current = cells[column][0][1] if column in cells else None
            if current != value:
                return False
            put = hb.Mutation(column=mput.column, value=mput.value or b"")
            self._apply(t, tableName, row, [put], LATEST)
            return True

    # -- scanners --------------------------------------------------------------
    def scannerOpenWithScan(self, tableName, scan, attributes):
        with self.lock:
            self._table(tableName)
            if scan.batchSize is not None and scan.batchSize < 0:
                raise hb.IllegalArgument(message="batch size must be positive")
            s = _Scanner(table=tableName, start=scan.startRow or b"", stop=scan.stopRow or b"",
                         reverse=bool(scan.reversed), columns=scan.columns or None,
                         before=scan.timestamp if scan.timestamp is not None else LATEST,
                         batch=scan.batchSize or None, sort=bool(scan.sortColumns),
                         filters=_parse_filters(scan.filterString))
            sid = next(self._scanner_ids)
            self.scanners[sid] = s
            return sid

    def scannerOpen(self, tableName, startRow, columns, attributes):
        return self.scannerOpenWithScan(tableName, hb.TScan(startRow=startRow,
                                                            columns=columns), attributes)

    def scannerOpenWithStop(self, tableName, startRow, stopRow, columns, attributes):
        return self.scannerOpenWithScan(
            tableName, hb.TScan(startRow=startRow, stopRow=stopRow, columns=columns), attributes)

    def scannerOpenWithPrefix(self, tableName, startAndPrefix, columns, attributes):
        prefix = startAndPrefix.replace(b"'", b"''").decode("latin-1")
        return self.scannerOpenWithScan(tableName, hb.TScan(
            startRow=startAndPrefix, columns=columns,
            filterString=f"PrefixFilter('{prefix}')".encode("latin-1")), attributes)

    def scannerOpenTs(self, tableName, startRow, columns, timestamp, attributes):
        return self.scannerOpenWithScan(tableName, hb.TScan(
            startRow=startRow, columns=columns, timestamp=timestamp), attributes)

    def scannerOpenWithStopTs(self, tableName, startRow, stopRow, columns, timestamp,
                              attributes):
        return self.scannerOpenWithScan(tableName, hb.TScan(
            startRow=startRow, stopRow=stopRow, columns=columns, timestamp=timestamp), attributes)

    def _scanner(self, sid: int) -> _Scanner:
        s = self.scanners.get(sid)
        if s is None:
            raise hb.IllegalArgument(message="scanner ID is invalid")
        return s

    def _next_keys(self, t: _Table, s: _Scanner) -> Iterator[bytes]:
        if s.reverse:
            # start row: inclusive upper bound; stop row: exclusive lower bound
            hi = bisect.bisect_right(t.keys, s.start) if s.start else len(t.keys)
            if s.cursor is not None:
                hi = min(hi, bisect.bisect_left(t.keys, s.cursor))
            for i in range(hi - 1, -1, -1):
                k = t.keys[i]
                if s.stop and k <= s.stop:
                    return
                yield k
        else:
            lo = bisect.bisect_left(t.keys, s.start)
            if s.cursor is not None:
                lo = max(lo, bisect.bisect_right(t.keys, s.cursor))
            for i in range(lo, len(t.keys)):
                k = t.keys[i]
                if s.stop and k >= s.stop:
                    return
                yield k

    def _filtered(self, key: bytes, cells: dict, filters) -> dict | None:
        for name, arg in filters:
            if name == "PrefixFilter" and not key.startswith(arg):
                return None
            if name == "ColumnPrefixFilter":
                cells = {c: v for c, v in cells.items() if (_split(c)[1] or b"").startswith(arg)}
            if name == "KeyOnlyFilter":
                cells = {c: [(ts, b"") for ts, _ in v] for c, v in cells.items()}
            if name == "FirstKeyOnlyFilter":
                cells = dict(list(cells.items())[:1])
        return cells or None

    def scannerGetList(self, id, nbRows):
        with self.lock:
            s = self._scanner(id)
            t = self._table(s.table)
            out = list(s.pending[:nbRows])
            s.pending = s.pending[nbRows:]
            if len(out) >= nbRows:
                return out
            for key in self._next_keys(t, s):
                s.cursor = key
                cells = t.visible(key, t.rows[key], s.columns, s.before)
                cells = self._filtered(key, cells, s.filters) if cells else None
                if not cells:
                    continue
                items = list(cells.items())
                step = s.batch or len(items)
                parts = [self._result(key, dict(items[i:i + step]), s.sort)
                         for i in range(0, len(items), step)]
                need = nbRows - len(out)
                out.extend(parts[:need])
                s.pending.extend(parts[need:])
                if len(out) >= nbRows:
                    break
            return out

    def scannerGet(self, id):
        return self.scannerGetList(id, 1)

    def scannerClose(self, id):
        with self.lock:
            if self.scanners.pop(id, None) is None:
                raise hb.IllegalArgument(message="scanner ID is invalid")
