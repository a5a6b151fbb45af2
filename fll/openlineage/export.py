"""fll's lineage as OpenLineage events: a recorded run as one RunEvent
(`info_to_event`), and all the store knows of a dataset over a time range
(`export_events`), so that recording the events into an empty store answers
as the store does. Export -> record gives every run back unchanged (same id,
program and checksum).
"""
from __future__ import annotations

from typing import Any

from ..codec import operation_to_dict
from ..errors import BadRequest
from ..model import EndPoint
from ..opset import FieldLineageInfo
from .events import (DATASET_EVENT_SCHEMA_URL, PRODUCER, RUN_FACET, RUN_FACET_SCHEMA_URL,
                     SCHEMA_OWNER_FACET, SCHEMA_OWNER_SCHEMA_URL, SCHEMA_SCHEMA_URL,
                     SYMLINKS_SCHEMA_URL, _iso, event_time_ms, export_run_id, job_of)
from .facets import _build, _event_lineage, _plain_event

def info_to_event(info: FieldLineageInfo, run_id: str, start_ms: int,
                  program: str | None, model: Any = None) -> dict:
    """One RunEvent describing a whole recorded run, at its start. Its `fllRun`
    run facet keeps the original run id and program, and the operations when
    the column-lineage facets alone would not give them back (a run that did
    not come from OpenLineage), so a round trip restores the run exactly.
    ``model``: the run's `fll.store.runs.RunModel` with its merged facets, when
    the store keeps one: the event then has the run's final state as its type,
    its end time in `fllRun` (``endTime``) and its run and job facets; else
    it is a COMPLETE event (a run recorded through the store API)."""
    event = _plain_event(info, start_ms)
    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": RUN_FACET_SCHEMA_URL,
                             "runId": run_id,
                             "program": program if program else "/".join(job_of(program))}
    # only a set whose operations are named as ingest names them can be normal:
    # the exact (linear, but not free) check is for those alone
    if not _ingest_named(info) or _normal(info, event) != info:
        facet["operations"] = [operation_to_dict(op) for op in info.operations]
    ns, name = job_of(program)
    event["job"] = {"namespace": ns, "name": name}
    event["run"] = {"runId": export_run_id(run_id), "facets": {RUN_FACET: facet}}
    if model is not None:
        state, run_facets, job_facets = model
        event["eventType"] = state.state
        if state.end_ms is not None:
            facet["endTime"] = _iso(state.end_ms)
        event["run"]["facets"] = {**{k: v for k, v in run_facets.items() if k != RUN_FACET},
                                  RUN_FACET: facet}
        if job_facets:
            event["job"]["facets"] = job_facets
    return event


def exported_end_ms(event: Any, run_id: str) -> int | None:
    """The end time an event fll exported gives its run (`fllRun`'s
    ``endTime``, see `info_to_event`), or None: on import the run's final
    state is kept at that time, its start at the event's time."""
    try:
        facet = event["run"]["facets"][RUN_FACET]
        if facet.get("runId") != run_id or not isinstance(facet.get("endTime"), str):
            return None
        return event_time_ms({"eventTime": facet["endTime"]})
    except (KeyError, TypeError, AttributeError, BadRequest):
        return None


def _ingest_named(info: FieldLineageInfo) -> bool:
    return all(op.name.startswith(("read:", "transform:", "write:")) for op in info.operations)


def _normal(info: FieldLineageInfo, event: dict) -> FieldLineageInfo:
    lineage, props = _event_lineage(event)
    return _build(lineage, props)


def export_events(store, endpoint: EndPoint, start_ms: int, end_ms: int) -> list[dict]:
    """What the store knows of ``endpoint`` in ``[start_ms, end_ms)`` as OpenLineage
    events, so that recording them into an empty store answers as the store does:

    - a RunEvent for every run that wrote it, failed runs included, oldest
      first, each describing the whole run (all its outputs), its type the
      run's final state, with its end time and facets (`info_to_event`),
      every dataset of it with the SchemaDatasetFacet the run reported for
      it, if any;
    - a DatasetEvent for every schema of ``endpoint`` that no such run reported
      (one from a DatasetEvent or JobEvent, or a RunEvent without column
      lineage), at its time, its owner kept in the `SCHEMA_OWNER_FACET`;
    - a DatasetEvent with the SymlinksDatasetFacet of its aliases, if it has any.
    """
    from ..store import runs as run_model
    events = []
    # every run, failed ones included: an export keeps each run's real state
    runs = sorted(store.including_failed().runs(endpoint, start_ms, end_ms, "incoming"),
                  key=lambda r: (r.start_ms, r.run_id))
    models = run_model.run_models(store, [r.run_id for r in runs])
    raw = run_model.events_of(store, models.values())
    for run in runs:
        info = store.operation_set(run.checksum)
        m = models.get(run.run_id)
        event = info_to_event(info, run.run_id, run.start_ms, run.program,
                              None if m is None else (m, *run_model.merged_facets(m, raw)))
        for ds in event["inputs"] + event["outputs"]:
            fields = _schema_at(store, ds["namespace"], ds["name"], run.start_ms, run.run_id)
            if fields is not None:
                ds.setdefault("facets", {})["schema"] = _schema_facet(fields)
        events.append(event)
    told = {(r.start_ms, r.run_id) for r in runs}
    for at, owner, fields in store.schema_history(endpoint.namespace, endpoint.name,
                                         start_ms, end_ms):
        if (at, owner) in told:
            continue
        events.append(_dataset_event(endpoint, at, {
            "schema": _schema_facet(fields),
            SCHEMA_OWNER_FACET: {"_producer": PRODUCER, "_schemaURL": SCHEMA_OWNER_SCHEMA_URL,
                                 "owner": owner}}))
    aliases = store.aliases(endpoint.namespace, endpoint.name)
    if aliases:
        events.append(_dataset_event(endpoint, max(start_ms, 0), {"symlinks": {
            "_producer": PRODUCER, "_schemaURL": SYMLINKS_SCHEMA_URL,
            "identifiers": [{"namespace": ns, "name": name, "type": "DATASET"}
                            for ns, name in aliases]}}))
    return events


def _dataset_event(endpoint: EndPoint, at: int, facets: dict) -> dict:
    return {"eventTime": _iso(at), "producer": PRODUCER, "schemaURL": DATASET_EVENT_SCHEMA_URL,
            "dataset": {"namespace": endpoint.namespace, "name": endpoint.name,
                        "facets": facets}}


def _schema_facet(fields: list[tuple[str, str | None]]) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": SCHEMA_SCHEMA_URL,
            "fields": [{"name": n} if t is None else {"name": n, "type": t} for n, t in fields]}


def _schema_at(store, namespace: str, name: str, at: int,
               owner: str) -> list[tuple[str, str | None]] | None:
    """The schema ``owner`` (a run id) reported for the dataset at ``at``, if it
    is the one the store answers for that millisecond, else None."""
    found = store.schema_history(namespace, name, at, at + 1)
    return found[0][2] if found and found[0][1] == owner else None
