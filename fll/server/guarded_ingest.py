"""A run event's write on a backend without transactions (Bigtable, HBase),
in as few store calls as its order rules allow.

`GuardedRuns.merge` merges an event's lineage with the run's stored set (a
run's lineage is the union of its events) and records it with
`Writer.record_run`, the event's other rows joined to the write path's own
calls: the schema bodies go with the data rows, the run model's rows naming
nothing yet (the event body, the job, the job's run) with the index rows,
and the run-model row that names the event and the datasets' schema
references with the run marked written, so each is written after what it
names, as when written one by one.

The set a run was last recorded with in this process is kept
(`GuardedRuns.known`), so the next event of the run merges with it without
reading the run row first: `Writer.record_run` checks it against the row it
reads and claims anyway (`RunWrite.expect`), and a run changed meanwhile (by
another server, or a purge) is merged again with what is stored
(`StaleRun`). A run not known here is taken for new on the same terms. An
answer saying "nothing new" (200) is only ever given from a fresh read; when
that read finds the run indexed while under way and the event ends it, the
run is recorded again with its set, which writes its bucket cells
(`Writer._record_guarded`).

This module must never write an event's rows for a run it has not claimed,
and never answer from a set it did not check against the store.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from .. import openlineage as ol
from .. import rowkeys as rk
from ..errors import InvalidLineageError
from ..opset import DeferredSet
from ..store import runs as run_model
from ..store.datasets import schema_body
from ..store.layout import marked_under_way
from ..store.lineage import LineageStore
from ..store.reader import RunInfo
from ..store.writer import Rows, RunWrite, StaleRun
from .errors import ApiError

#: runs whose stored set this process keeps (about 200 bytes each)
RUNS_KEPT = 8192


def receipt(run_id: str, checksum: str, start_ms: int, program: str | None, new: bool) -> dict:
    """The answer's body for a run event with lineage."""
    return {"recorded": new, "runId": run_id, "checksum": checksum,
            "startTimeInSeconds": start_ms // 1000, "program": program}


def cannot_extend(run_id: str, checksum: str) -> ApiError:
    """409: the run's stored set is one OpenLineage events cannot extend."""
    return ApiError(409, f"run {run_id!r} is already recorded with other operations "
                         f"(operation set {checksum}) that OpenLineage events cannot "
                         f"extend; nothing was changed")


def union_with_stored(lineage: LineageStore, event: Callable[[], dict], info: Any,
                      prior: RunInfo | None) -> Any:
    """The set a run gets from this event: its own when the run has none or the
    same, else the union with the stored set (read only if that union is not
    remembered); None when they cannot be merged: an event whose set is not in
    normal form (an fllRun facet's own operations) cannot extend a run."""
    if prior is None or prior.checksum == info.checksum:
        return info
    if info.checksum != ol.normal_checksum(info):
        return None
    checksum = prior.checksum
    return ol.union_of(DeferredSet(checksum, lambda: lineage.operation_set(checksum)),
                       event, info)


def event_write(model: run_model.RunEvent | None, facts: list, run_id: str,
                expect: str | None) -> tuple[RunWrite, int]:
    """The `RunWrite` of one event (its run-model rows when ``model``, the
    schemas of ``facts`` under ``run_id``) and how many schemas it keeps.
    The schemas are checked here, before anything is written."""
    bodies: Rows = {}
    refs: list[tuple[bytes, str, bytes]] = []
    for f in facts:
        if f.schema is not None:
            body, digest = schema_body(f.namespace, f.name, f.schema)
            bodies[rk.schema_body(rk.checksum_of(digest))] = {"f": body}
            refs.append((rk.schemas(f.namespace, f.name), f.name, digest))
    made: dict[int, Rows] = {}

    def rows(start: int) -> Rows:
        got = made.get(start)
        if got is None:
            got = made[start] = run_model.model_rows(model, start) if model is not None else {}
        return got

    named = rk.run_model(run_id)

    def beside(start: int) -> Rows:
        return {k: v for k, v in rows(start).items() if k != named}

    def after(start: int) -> Rows:
        out: Rows = {}
        if named in rows(start):
            out[named] = rows(start)[named]
        column = rk.schema_column(start, run_id)
        for key, _name, digest in refs:
            out.setdefault(key, {})[column] = digest
        return out
    return RunWrite(expect, bodies, beside, after), len(refs)


class GuardedRuns:
    """The sets of runs this process recorded last, and the merge (module doc)."""

    def __init__(self, lineage: LineageStore, kept: int = RUNS_KEPT):
        self.lineage = lineage
        self.kept = kept
        self._lock = threading.Lock()
        self._known: OrderedDict[str, RunInfo] = OrderedDict()

    def known(self, run_id: str) -> RunInfo | None:
        with self._lock:
            return self._known.get(run_id)

    def _keep(self, info: RunInfo) -> None:
        with self._lock:
            self._known[info.run_id] = info
            self._known.move_to_end(info.run_id)
            while len(self._known) > self.kept:
                self._known.popitem(last=False)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._known.pop(run_id, None)

    def _read(self, run_id: str) -> tuple[RunInfo | None, bool]:
        """The run as stored, and whether it is marked indexed while under way."""
        key = rk.run(run_id)
        row = self.lineage.table.get(key)
        return self.lineage.run(run_id, rows={key: row}), marked_under_way(row)

    def merge(self, event: Callable[[], dict], info: Any, run_id: str, start_ms: int,
              program: str,
              model: run_model.RunEvent | None, facts: list,
              keep_rest: Callable[[int], int], under_way: bool = False
              ) -> tuple[dict, int, int]:
        """Record the run's union with this event (``event()``: its inputs and
        outputs, for a union not remembered; the module doc): (the
        answer's body, its status, the run's stored start). ``model``'s rows
        and ``facts``' schemas are written with it; on a 200 (nothing new),
        ``keep_rest(start)`` writes them and returns the schemas kept.
        ``under_way``: the event leaves the run going (`Writer.record`)."""
        prior = self.known(run_id)
        fresh = marked = False
        for _ in range(8):
            target = union_with_stored(self.lineage, event, info, prior)
            if target is None:
                assert prior is not None
                if not fresh:  # a 409 only from a fresh read
                    (prior, marked), fresh = self._read(run_id), True
                    continue
                raise cannot_extend(run_id, prior.checksum)
            if prior is not None and prior.checksum == target.checksum:
                if not fresh:  # only a read of the store says nothing is new
                    (prior, marked), fresh = self._read(run_id), True
                    continue
                if marked and not under_way:
                    return self._settle(target, run_id, start_ms, program, model, facts)
                self._keep(prior)
                body = receipt(run_id, target.checksum, prior.start_ms, prior.program, False)
                body["schemas"] = keep_rest(prior.start_ms)
                return body, 200, prior.start_ms
            write, schemas = event_write(model, facts, run_id,
                                         None if prior is None else prior.checksum)
            try:
                changed = self.lineage.record_run(target, run_id, start_ms, program, write,
                                                  supersede=prior is not None,
                                                  under_way=under_way)
            except StaleRun as e:
                fresh = True
                prior = None if e.found is None else RunInfo(run_id, e.found[1], e.found[2],
                                                             e.found[0])
                continue
            except InvalidLineageError:
                self.forget(run_id)
                raise
            assert write.start is not None
            self._keep(RunInfo(run_id, write.start, write.program, target.checksum))
            body = receipt(run_id, target.checksum, write.start, write.program, changed)
            body["schemas"] = schemas
            return body, 201 if changed else 200, write.start
        self.forget(run_id)
        raise ApiError(503, f"run {run_id!r} kept changing under concurrent events; retry")

    def _settle(self, target: Any, run_id: str, start_ms: int, program: str,
                model: run_model.RunEvent | None, facts: list) -> tuple[dict, int, int]:
        """A run indexed while under way ends with the set it has: recorded
        again with it (its bucket cells written, its first-run cells gone) and
        the event's rows; nothing new to say (200)."""
        write, schemas = event_write(model, facts, run_id, target.checksum)
        try:
            self.lineage.record_run(target, run_id, start_ms, program, write, supersede=True)
        except StaleRun:
            self.forget(run_id)  # changed meanwhile: the client's retry merges afresh
            raise ApiError(503, f"run {run_id!r} changed under a concurrent event; "
                                f"retry") from None
        assert write.start is not None
        self._keep(RunInfo(run_id, write.start, write.program, target.checksum))
        body = receipt(run_id, target.checksum, write.start, write.program, False)
        body["schemas"] = schemas
        return body, 200, write.start
