"""The read path: operation sets by checksum (the cache first, the rest in one
multi-get), the sets with a run in a time range (`checksums`: the canonical
cover in one call), and the questions built on them (fields, incoming,
outgoing, operations, runs)."""
from __future__ import annotations

import copy
import struct
import time
from typing import Iterable, Iterator, NamedTuple, Sequence

from .. import rowkeys as rk
from ..errors import FllError, StoreError
from ..model import DROPPED, EndPoint, EndPointField, Operation
from ..opset import FieldLineageInfo
from ..summaries import Summaries
from .base import Span, SpanGroup, SpanRead
from .datarows import SHAPED, _Cached, data_parts, shape_ref
from .layout import (_BUCKET_KINDS, _FAILED_KINDS, _FIRST_KINDS, _RUN_KINDS, _T, _corrupt,
                     _cover_spans, _decode_key, _first_run_spans, row_sets)
from .state import StoreState

class RunInfo(NamedTuple):
    """One recorded run."""

    run_id: str
    start_ms: int
    program: str | None
    checksum: str


class OperationGroup(NamedTuple):
    """The operations of one distinct operation set that touch a field, and its runs."""

    checksum: str
    operations: list[Operation]
    runs: list[RunInfo]  # newest first


#: top buckets a store remembers its directories listing (`Reader._likely_tops`)
TOPS_KEPT = 8


class _IndexPlan(NamedTuple):
    """One dataset's index read for `LineageStore.checksums`: its range, the
    ``(spans, names, values)`` of `Table.read_spans`, its directory row's key
    and the top buckets the directory may list (``rk.cover4``)."""

    dataset: tuple[str, str]
    start: int
    end: int
    direction: str
    group: SpanGroup
    directory: bytes
    top: tuple[int, int] | None
    #: the top buckets read by key with the directory row (not after it)
    guessed: tuple[int, ...] = ()


class Reader(StoreState):
    """The questions a lineage store answers."""

    def _decode(self, checksum: str, row: dict[str, bytes] | None,
                shapes: dict[str, tuple[bytes, bytes]]) -> _Cached:
        key = rk.data(checksum)
        if row is None:
            raise StoreError(f"store {self.url}: operation set {checksum} is referenced by an "
                             f"index row but its data row is missing (run `fll admin fsck`)")
        try:
            if SHAPED in row:
                shape_checksum, eps = shape_ref(row)
                shape = shapes.get(shape_checksum)
                if shape is None:
                    raise StoreError(f"store {self.url}: operation set {checksum} has the shape "
                                     f"{shape_checksum}, whose row is missing (run "
                                     f"`fll admin fsck`)")
                return _Cached(shape[0], Summaries(shape[1], [EndPoint(e["namespace"], e["name"])
                                                              for e in eps]),
                               (self.url, key), eps)
            ops, summaries = data_parts(row)
            return _Cached(ops, Summaries(summaries), (self.url, key))
        except StoreError:
            raise
        except (ValueError, FllError, IndexError, TypeError):
            raise _corrupt(self.url, key) from None  # never cached: a repair shows at once

    def _load_shapes(self, rows: Iterable[dict[str, bytes]]) -> dict[str, tuple[bytes, bytes]]:
        """The shapes these ``d|`` rows name: the cache first, the rest in one
        multi-get (an absent or corrupt shape is left out: each set naming it
        is then a store error)."""
        out, wanted = self._cached_shapes(rows)
        if wanted:
            self._keep_shapes(wanted, self.table.get_many(sorted(rk.shape(c) for c in wanted)),
                              out)
        return out

    def _cached_shapes(self, rows: Iterable[dict[str, bytes]]
                       ) -> tuple[dict[str, tuple[bytes, bytes]], set[str]]:
        """The shapes these ``d|`` rows name that are cached, and the checksums
        of those that are not (`_keep_shapes` takes them once read)."""
        out: dict[str, tuple[bytes, bytes]] = {}
        wanted = set()
        for row in rows:
            value = row.get(SHAPED)
            if value is not None and len(value) >= 16:
                c = rk.checksum_of(value[:16])
                hit = self._shapes.get(c)
                if hit is not None:
                    out[c] = hit
                else:
                    wanted.add(c)
        return out, wanted

    def _keep_shapes(self, wanted: Iterable[str], found: dict[bytes, dict[str, bytes]],
                     out: dict[str, tuple[bytes, bytes]]) -> None:
        """The ``wanted`` shapes among the rows ``found``, into ``out`` and the cache."""
        for c in wanted:
            shape_row = found.get(rk.shape(c))
            if shape_row is None:
                continue
            try:
                out[c] = parts = data_parts(shape_row)
            except ValueError:
                continue
            self._shapes.put(c, parts)

    def _remember(self, checksum: str, cached: _Cached) -> None:
        self._cache.put(checksum, cached)

    def _load(self, checksum: str) -> _Cached:
        return self._load_many([checksum])[checksum]

    def _load_many(self, checksums: Iterable[str]) -> dict[str, _Cached]:
        """Operation sets by checksum: the cache first, the rest in one multi-get."""
        out: dict[str, _Cached] = {}
        wanted = list(checksums)
        out.update(self._cache.get_many(wanted))  # type: ignore[arg-type]
        missing = [c for c in dict.fromkeys(wanted) if c not in out]
        if missing:
            rows = self.table.get_many([rk.data(c) for c in missing])
            shapes = self._load_shapes(rows.values())
            for c in missing:
                cached = self._decode(c, rows.get(rk.data(c)), shapes)
                self._remember(c, cached)
                out[c] = cached
        return out

    def operation_set(self, checksum: str) -> FieldLineageInfo:
        """The operation set stored under ``checksum`` (one this process recorded
        lately without reading it: an OpenLineage run's COMPLETE merges with the
        set its START recorded)."""
        with self._lock:
            written = self._written.get(checksum)
        if written is not None:
            return written
        return self._load(checksum).info

    def summaries(self, checksums: Iterable[str]) -> dict[str, Summaries]:
        """The precomputed summaries of operation sets, by checksum (the cache
        first, the rest in one multi-get): what a caller merging many sets at
        once (the REST server) needs without re-deriving them from operations."""
        return {c: cached.summaries for c, cached in self._load_many(checksums).items()}

    def checksums(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> list[str]:
        """Distinct operation sets with a run in ``[start, end)`` that write
        (incoming) or read (outgoing) ``endpoint``, sorted.

        One multi-get of the range's canonical cover (`fll.rowkeys.cover4`):
        bucket rows of whole aligned buckets, the runs' own millisecond rows at
        the edges; a second only when the range spans more than 64 top
        buckets. Cost follows the sets in the range, never the history."""
        plan = self._index_plan(endpoint.namespace, endpoint.name, start, end, direction)
        return self._index_answers([plan], self.table.read_spans(*plan.group))[0]

    def checksums_many(self, datasets: Iterable[tuple[str, str]], start: int, end: int,
                       direction: str = "incoming") -> dict[tuple[str, str], list[str]]:
        """`checksums` of several datasets (``(namespace, name)``) in the round
        trips of one: every dataset's index rows in one `Table.read_span_groups`
        (a second only for ranges over more than 64 top buckets)."""
        plans = [self._index_plan(ns, name, start, end, direction)
                 for ns, name in dict.fromkeys(datasets)]
        reads = self.table.read_span_groups([p.group for p in plans]) if plans else []
        return {p.dataset: found for p, found in zip(plans, self._index_answers(plans, *reads),
                                                         strict=True)}

    def _index_plan(self, ns: str, name: str, start: int, end: int,
                    direction: str, *, top_span: bool = False) -> "_IndexPlan":
        """What `checksums` reads for one dataset: the spans of its range's
        cover. A range over more than 64 top buckets reads those the directory
        row lists in a second call, or, with ``top_span``, reads them as one
        keyless span in the same call where the table reads key ranges in one
        call (Bigtable, SQLite). Where it reads keys in one call and a range
        with a scanner (HBase), ``top_span`` reads the directory row with the
        top buckets it most likely lists by key instead (`_likely_tops`):
        only a top bucket it lists beside those is read in a second call."""
        bucket_kind, run_kind = _BUCKET_KINDS[direction], _RUN_KINDS[direction]
        runs, top = rk.cover4_runs(start, end)
        # the keys as rk.run_row / rk.bucket4 build them, a prefix per level made once
        heads = [rk.dataset_prefix(run_kind, ns, name)] + \
            [rk.dataset_prefix(bucket_kind, ns, name) + bytes([0x30 + k])
             for k in range(1, len(rk.LEVELS4))]
        spans = _cover_spans(heads, runs)
        # the run rows at the cover's edges, read whole: their runs are
        # filtered by time below; the buckets' sets are their column names
        edges = [s for s in spans if s.lo[:1] == run_kind]
        buckets = [s for s in spans if s.lo[:1] != run_kind]
        interior: list[Span] = []
        if self.first_runs:
            # the sets' first runs in the range, which have no bucket cells:
            # the rows holding ``start`` and ``end - 1`` filtered by time, the
            # rows between read for their sets alone
            edges += _first_run_spans(rk.dataset_prefix(_FIRST_KINDS[direction], ns, name),
                                      start, end, interior)
        index = rk.directory(bucket_kind, ns, name)
        guessed: tuple[int, ...] = ()
        if top and top_span and not getattr(self.table, "one_call_ranges", False):
            guessed = tuple(t for t in self._likely_tops() if top[0] <= t < top[1])
            buckets += [Span(k, k + b"\x00", (k,)) for k in (
                rk.bucket4(bucket_kind, ns, name, rk.TOP, t) for t in guessed)]
            edges.append(Span(index, index + b"\x00", (index,)))
        elif top and top_span:  # the top buckets in the range, newest first, as one span
            head = heads[rk.TOP]
            buckets.append(Span(head + rk.invert(top[1] - rk.LEVELS4[rk.TOP]),
                                head + rk.invert(top[0]) + b"\x00"))
            top = None
        elif top:  # more top buckets than are worth enumerating: the directory lists them
            edges.append(Span(index, index + b"\x00", (index,)))
        return _IndexPlan((ns, name), start, end, direction, (edges, buckets, interior),
                          index, top, guessed)

    def _likely_tops(self) -> list[int]:
        """The top buckets a dataset's directory most likely lists: now's and
        the one before, and those directories read lately listed."""
        size = rk.LEVELS4[rk.TOP]
        now = int(time.time() * 1000)
        return sorted(self._tops_seen | {now - now % size, now - now % size - size})

    def _saw_tops(self, tops: Iterable[int]) -> None:
        """Remember top buckets a directory listed (the newest `TOPS_KEPT`)."""
        seen = self._tops_seen
        if not seen.issuperset(tops):
            kept = sorted(seen.union(tops))[-TOPS_KEPT:]
            self._tops_seen = set(kept)

    def _index_answers(self, plans: list["_IndexPlan"], *reads: SpanRead) -> list[list[str]]:
        """Each plan's sorted checksums from its read (`read_spans` answers, one
        per plan), reading the top buckets a directory row names, for every
        plan that needs them, in one more call."""
        return self._index_answers_and_rows(plans, reads)[0]

    def _index_answers_and_rows(self, plans: list["_IndexPlan"], reads: Sequence[SpanRead],
                                also: Sequence[bytes] = ()
                                ) -> tuple[list[list[str]], dict[bytes, dict[str, bytes]]]:
        """`_index_answers`, and the rows of the keys ``also`` read in the same
        call as the top buckets (one call in all when either is wanted)."""
        found: list[set[str]] = []
        tops: list[list[bytes]] = []
        for plan, read in zip(plans, reads, strict=True):
            (ns, name), start, end = plan.dataset, plan.start, plan.end
            got = set(read.names)
            try:
                got.update(rk.checksum_of(v[1:]) for v in read.values if len(v) > 1)
            except (ValueError, UnicodeDecodeError):
                raise _corrupt(self.url, plan.group[2][0].lo) from None
            listed = read.rows.pop(plan.directory, None)
            wanted: list[bytes] = []
            if plan.top and listed:
                try:
                    firsts = sorted(int(c) for c in listed)
                except ValueError:
                    raise _corrupt(self.url, plan.directory) from None
                wanted = [rk.bucket4(_BUCKET_KINDS[plan.direction], ns, name, rk.TOP, t)
                          for t in firsts if plan.top[0] <= t < plan.top[1]
                          and t not in plan.guessed]
                self._saw_tops(firsts)
            if self.include_failed:
                got.update(r.checksum for r in self._failed_runs(
                    plan.direction, EndPoint(ns, name), start, end))
            for key, cols in read.rows.items():
                try:  # run rows, filtered by each run's exact time
                    got.update(c for _, c, t in row_sets(key, cols) if start <= t < end)
                except (ValueError, UnicodeDecodeError):
                    raise _corrupt(self.url, key) from None
            found.append(got)
            tops.append(wanted)
        rows: dict[bytes, dict[str, bytes]] = {}
        if any(tops) or also:
            groups: list[SpanGroup] = [
                ((), [Span(k, k + b"\x00", (k,)) for k in keys], ()) for keys in tops]
            groups.append(([Span(k, k + b"\x00", (k,)) for k in also], (), ()))
            *answers, extra = self.table.read_span_groups(groups)
            for got, read in zip(found, answers, strict=True):
                got.update(read.names)
            rows = extra.rows
        return [sorted(got) for got in found], rows

    def _failed_runs(self, direction: str, endpoint: EndPoint, start: int, end: int
                     ) -> Iterator[RunInfo]:
        """The FAIL/ABORT runs in the range that wrote (incoming) or read
        (outgoing) ``endpoint``, newest first: one scan of its failed-run rows
        (read only when a question asks for failed runs)."""
        lo, hi = rk.time_range(rk.dataset_prefix(_FAILED_KINDS[direction], endpoint.namespace,
                                                 endpoint.name), start, end)
        for key, cols in self.table.scan(lo, hi):
            k = _decode_key(self.url, key)
            if k.start_ms is None or k.run_id is None or "c" not in cols:
                raise _corrupt(self.url, key)
            yield RunInfo(k.run_id, k.start_ms, None, cols["c"].decode())

    def _summaries(self, endpoint: EndPoint, start: int, end: int,
                   direction: str) -> Iterator[tuple[str, Summaries]]:
        loaded = self._load_many(self.checksums(endpoint, start, end, direction))
        for c, cached in loaded.items():
            yield c, cached.summaries

    # -- questions -------------------------------------------------------------
    def fields(self, endpoint: EndPoint, start: int, end: int,
               prefix: str | None = None) -> list[str]:
        """Field names of ``endpoint`` seen as destination or source in the range, sorted."""
        names: set[str] = set()
        for _, s in self._summaries(endpoint, start, end, "incoming"):
            names.update(f.field for f in s.destination_fields if f.endpoint == endpoint)
        for _, s in self._summaries(endpoint, start, end, "outgoing"):
            names.update(f.field for f in s.source_fields if f.endpoint == endpoint)
        if prefix:
            low = prefix.lower()
            names = {n for n in names if n.lower().startswith(low)}
        return sorted(names)

    def incoming(self, efield: EndPointField, start: int, end: int) -> set[EndPointField]:
        """Source fields ``efield`` was built from by runs in the range."""
        out: set[EndPointField] = set()
        for _, s in self._summaries(efield.endpoint, start, end, "incoming"):
            out |= s.incoming.get(efield, frozenset())
        return out

    def outgoing(self, efield: EndPointField, start: int, end: int, *,
                 include_dropped: bool = False) -> set[EndPointField]:
        """Destination fields built from ``efield`` by runs in the range."""
        out: set[EndPointField] = set()
        for _, s in self._summaries(efield.endpoint, start, end, "outgoing"):
            out |= s.outgoing.get(efield, frozenset())
        if not include_dropped:
            out.discard(DROPPED)
        return out

    def operations(self, efield: EndPointField, start: int, end: int,
                   direction: str = "incoming") -> list[OperationGroup]:
        """Per distinct operation set touching the field, its operations on the
        field's paths (topological order) and its runs in the range, newest first.
        Groups are ordered by their newest run. One scan of the runs in the range
        (they are listed anyway) and one multi-get of the sets."""
        by_set: dict[str, list[RunInfo]] = {}
        for r in self._scan_runs(_RUN_KINDS[direction], efield.endpoint, start, end):
            by_set.setdefault(r.checksum, []).append(r)
        groups: list[OperationGroup] = []
        for checksum, cached in self._load_many(by_set).items():
            s = cached.summaries
            if direction == "incoming":
                if efield not in s.destination_fields:
                    continue
                ops = cached.info.incoming_operations(efield)
            else:
                if efield not in s.source_fields:
                    continue
                ops = cached.info.outgoing_operations(efield)
            groups.append(OperationGroup(checksum, ops, by_set[checksum]))
        groups.sort(key=lambda g: (-g.runs[0].start_ms if g.runs else 0, g.checksum))
        return groups

    def _scan_runs(self, kind: bytes, endpoint: EndPoint, start: int, end: int,
                   limit: int | None = None, *, programs: bool = True) -> Iterator[RunInfo]:
        """Runs of the ``b|``/``f|`` rows in the range, newest first (same
        millisecond: by run id): one scan, its cost the answer's size, then one
        multi-get of the answer's run rows for their programs."""
        # from the run row holding ``start``: its runs are filtered by their time
        lo, hi = rk.time_range(rk.dataset_prefix(kind, endpoint.namespace, endpoint.name),
                               start - start % rk.LEVELS4[0] if start > 0 else start, end)
        found: list[tuple[bytes, str, int, str]] = []
        seen: set[str] = set()
        if self.include_failed:
            yield from self._with_failed(kind, endpoint, start, end, limit, programs)
            return
        for key, cols in self._run_rows(lo, hi, limit, found):
            try:
                runs = sorted(((t, r, c) for r, c, t in row_sets(key, cols)
                               if start <= t < end), key=lambda x: (-x[0], x[1]))
            except (ValueError, UnicodeDecodeError):
                raise _corrupt(self.url, key) from None
            for t, run_id, checksum in runs:
                if run_id not in seen:
                    seen.add(run_id)
                    found.append((key, run_id, t, checksum))
        if limit is not None:
            found = found[:limit]
        # the program is in the run row only: one multi-get of the answer's run rows
        rows = self.table.get_many([rk.run(r) for _, r, _, _ in found]) \
            if programs and found else {}
        for key, run_id, t, checksum in found:
            try:
                prog = rows.get(rk.run(run_id), {}).get("p", b"").decode() or None
            except UnicodeDecodeError:
                raise _corrupt(self.url, key) from None
            yield RunInfo(run_id, t, prog, checksum)

    def _with_failed(self, kind: bytes, endpoint: EndPoint, start: int, end: int,
                     limit: int | None, programs: bool) -> Iterator[RunInfo]:
        """`_scan_runs` of the default index and the failed-run rows, merged."""
        direction = "incoming" if kind == rk.BACKWARD else "outgoing"
        plain = copy.copy(self)
        plain.include_failed = False
        runs = list(plain._scan_runs(kind, endpoint, start, end, limit, programs=programs))
        failed = list(self._failed_runs(direction, endpoint, start, end))
        if failed and programs:
            rows = self.table.get_many([rk.run(r.run_id) for r in failed])
            failed = [r._replace(program=rows.get(rk.run(r.run_id), {}).get(
                "p", b"").decode(errors="replace") or None) for r in failed]
        merged = sorted(runs + failed, key=lambda r: (-r.start_ms, r.run_id))
        yield from merged[:limit] if limit is not None else merged

    def _run_rows(self, lo: bytes, hi: bytes, limit: int | None, found: list
                  ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """The run rows of ``[lo, hi)`` until ``found`` (filled by the caller)
        holds ``limit`` runs. A row holds one run or 64 (one a millisecond), so
        with a limit the rows are read in pages sized by the runs per row seen
        so far: one call for a dense history, a few for a sparse one, never
        the whole range (a backend may read a page whole)."""
        if limit is None:
            yield from self.table.scan(lo, hi)
            return
        cursor, want, seen = lo, min(limit + 1, 16), 0
        while len(found) < limit:
            page = list(self.table.scan(cursor, hi, limit=want))
            for row in page:
                if len(found) >= limit:
                    return
                yield row
            seen += len(page)
            if len(page) < want:
                return
            cursor = page[-1][0] + b"\x00"
            per_row = max(len(found), 1) / seen
            want = max(16, int((limit - len(found)) / per_row * 1.25) + 2)

    def field_map(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> dict[EndPointField, set[EndPointField]]:
        """Every field of ``endpoint`` with its lineage over the range, from the
        precomputed summaries: incoming = each field written to it → its source
        fields; outgoing = each field read from it → the fields built from it
        (the dropped marker left out). Fields without lineage map to an empty set."""
        out: dict[EndPointField, set[EndPointField]] = {}
        for _, s in self._summaries(endpoint, start, end, direction):
            if direction == "incoming":
                mine, summary = s.destination_fields, s.incoming
            else:
                mine, summary = s.source_fields, s.outgoing
            for f in mine:
                if f.endpoint == endpoint:
                    out.setdefault(f, set()).update(summary.get(f, frozenset()))
        for targets in out.values():
            targets.discard(DROPPED)
        return out

    def runs(self, endpoint: EndPoint, start: int, end: int, direction: str = "both",
             limit: int | None = None) -> list[RunInfo]:
        """Runs that wrote (incoming) and/or read (outgoing) the dataset, newest first."""
        kinds = {"incoming": [rk.BACKWARD], "outgoing": [rk.FORWARD],
                 "both": [rk.BACKWARD, rk.FORWARD]}[direction]
        seen: dict[str, RunInfo] = {}
        for kind in kinds:
            for r in self._scan_runs(kind, endpoint, start, end, limit):
                seen.setdefault(r.run_id, r)
        ordered = sorted(seen.values(), key=lambda r: (-r.start_ms, r.run_id))
        return ordered[:limit] if limit is not None else ordered

    def run(self, run_id: str, *, rows: dict[bytes, dict[str, bytes] | None] | None = None
            ) -> RunInfo | None:
        """A recorded run by id, or None. ``rows``: those `Writer.run_rows` read
        in the caller's open transaction (then nothing is read here)."""
        key = rk.run(run_id)
        row = rows[key] if rows is not None and key in rows else self.table.get(key)
        if row is None or "c" not in row:
            return None  # unknown, or only its start claimed
        # a pending run (w=0) is reported: a reader may already list it from index
        # rows written before the run row was marked; fsck finishes a dead writer's
        try:
            return RunInfo(run_id, _T.unpack(row["t"])[0], row.get("p", b"").decode() or None,
                           row["c"].decode())
        except (KeyError, struct.error, UnicodeDecodeError):
            raise _corrupt(self.url, key) from None

    def properties(self, endpoint: EndPoint, start: int, end: int) -> list[dict]:
        """Per run in the range, the properties the run gave ``endpoint``."""
        out = []
        for r in self.runs(endpoint, start, end):
            ep = self._load(r.checksum).info.endpoint(endpoint.namespace, endpoint.name)
            out.append({"programRun": r.run_id, "program": r.program, "startMs": r.start_ms,
                        "properties": dict(ep.properties) if ep else {}})
        return out

    def datasets(self, *, with_schemas: bool = False) -> list[EndPoint]:
        """Every dataset with at least one recorded run, as source or destination;
        with ``with_schemas`` also those known only by a reported schema (an
        OpenLineage DatasetEvent, or a run event without column lineage)."""
        found: set[EndPoint] = set()
        if with_schemas:  # one S| row per dataset
            for key, _ in self.table.scan(rk.SCHEMAS + rk.SEP, rk.prefix_end(rk.SCHEMAS + rk.SEP)):
                k = rk.decode(key)
                found.add(EndPoint(k.namespace or "?", k.name or "?"))
        for kind in (rk.BACKWARD, rk.FORWARD):
            prefix = kind + rk.SEP
            stop = rk.prefix_end(prefix)
            cursor = prefix
            while True:
                first = next(iter(self.table.scan(cursor, stop, limit=1)), None)
                if first is None:
                    break
                k = rk.decode(first[0])
                ep = EndPoint(k.namespace or "?", k.name or "?")
                found.add(ep)
                cursor = rk.prefix_end(rk.dataset_prefix(kind, ep.namespace, ep.name))
        return sorted(found)

    def all_runs(self) -> dict[EndPoint, tuple[list[RunInfo], list[RunInfo]]]:
        """Every dataset with recorded runs: (the runs that wrote it, the runs
        that read it), each newest first, as `runs` answers them for the whole
        history. One scan of each run index and one multi-get of the run rows
        (for their programs), however many datasets there are: what a question
        about every dataset and job (Marquez's namespaces, lineage graph,
        search) reads instead of two scans per dataset."""
        found: dict[EndPoint, tuple[list[tuple[int, str, str]], list[tuple[int, str, str]]]] = {}
        for side, kind in enumerate((rk.BACKWARD, rk.FORWARD)):
            prefix = kind + rk.SEP
            # a run row's key is its dataset's prefix and 8 bytes of time: a
            # dataset's key is decoded once, its rows' times read directly
            head: bytes | None = None
            seen: set[str] = set()
            items: list[tuple[int, str, str]] = []
            for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
                if key[:-8] != head:
                    k = _decode_key(self.url, key)
                    if k.level != 0 or k.namespace is None or k.name is None:
                        raise _corrupt(self.url, key)
                    head, seen = key[:-8], set()
                    items = found.setdefault(EndPoint(k.namespace, k.name), ([], []))[side]
                try:
                    row_ms = rk.uninvert(key[-8:])
                    for run_id, value in cols.items():
                        if run_id not in seen:  # the newest cell of a run, as _scan_runs
                            seen.add(run_id)
                            t, checksum = rk.run_of(row_ms, value)
                            items.append((t, run_id, checksum))
                except (ValueError, UnicodeDecodeError, struct.error):
                    raise _corrupt(self.url, key) from None
        ids = sorted({r for w, rd in found.values() for _, r, _ in w + rd})
        rows = self.table.get_many([rk.run(r) for r in ids]) if ids else {}
        programs: dict[str, str | None] = {}
        for r in ids:
            try:
                programs[r] = rows.get(rk.run(r), {}).get("p", b"").decode() or None
            except UnicodeDecodeError:
                raise _corrupt(self.url, rk.run(r)) from None

        def infos(items: list[tuple[int, str, str]]) -> list[RunInfo]:
            return [RunInfo(r, t, programs[r], c)
                    for t, r, c in sorted(items, key=lambda x: (-x[0], x[1]))]
        return {ep: (infos(w), infos(rd)) for ep, (w, rd) in found.items()}

    def exists_many(self, endpoints: Iterable[EndPoint]) -> dict[EndPoint, bool]:
        """`exists` of several datasets: on a backend that reads the first row
        of several ranges at once (HBase's ``first_rows``: one-row scanners
        pipelined, two round trips) every prefix in one call, else one by one."""
        eps = list(dict.fromkeys(endpoints))
        first_rows = getattr(self.table, "first_rows", None)
        if first_rows is None:
            return {e: self.exists(e) for e in eps}
        kinds = (rk.BACKWARD, rk.FORWARD) + ((rk.FAILED_BACKWARD, rk.FAILED_FORWARD)
                                            if self.include_failed else ())
        prefixes = [rk.dataset_prefix(k, e.namespace, e.name) for e in eps for k in kinds]
        found = first_rows([(p, rk.prefix_end(p)) for p in prefixes]) if prefixes else []
        n = len(kinds)
        return {e: any(r is not None for r in found[i * n:(i + 1) * n])
                for i, e in enumerate(eps)}

    def exists(self, endpoint: EndPoint) -> bool:
        """Whether any run ever read or wrote ``endpoint`` (a failed run
        counts only for a store `including_failed`)."""
        kinds = (rk.BACKWARD, rk.FORWARD) + ((rk.FAILED_BACKWARD, rk.FAILED_FORWARD)
                                            if self.include_failed else ())
        for kind in kinds:
            prefix = rk.dataset_prefix(kind, endpoint.namespace, endpoint.name)
            if next(iter(self.table.scan(prefix, rk.prefix_end(prefix), limit=1)), None):
                return True
        return False
