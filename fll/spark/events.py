"""Analyse a write event sent by the JVM listener, without a Spark session.

The listener (``jvm/LineageListener.java``) sends, per successful write: the
analyzed plan's ``toJSON()``, what that JSON loses (each relation leaf's
location or table name, keyed by node number and first output exprId) and the
destination. This module turns that into the same `Capture` and operations
`fll.spark.capture` / `track()` build from a live session: the plan is parsed
by `fll.spark.plan`, walked by `fll.spark.lineage`, and the facet built by
`fll.spark.facet` — one implementation of the rules.

Event shape (format 1)::

    {"format": 1, "run_id": str, "start_ms": int, "program": str,
     "command": str, "func": str, "app_id": str, "spark_version": str,
     "destination": {"location": str} | {"name": str},
     "leaves": [{"number": int, "class": str, "first_id": int | null,
                 "datasets": [{"location": str} | {"name": str}]}],
     "plan": [...toJSON nodes...]}

This module must never call Spark, and must refuse (with `BadRequest` naming
the JSON path) an event it cannot analyse completely rather than record part
of its lineage.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import BadRequest, FllError, InvalidLineageError
from ..model import EndPoint
from ..names import dataset_name
from ..opset import FieldLineageInfo
from .datasets import RELATION_LEAVES, first_output_id, write_query
from .lineage_model import nothing_read
from .plan import PlanNode, parse_plan
from .plan_capture import Capture, lineage_and_facet, to_operations

__all__ = ["FORMAT", "SparkWriteEvent", "parse_event", "analyse_event", "record_event",
           "record_spool", "select_spool", "spool_servers"]

FORMAT = 1
#: what a plan that is JSON but not Spark's toJSON() raises while parsed or walked
_MALFORMED = (KeyError, TypeError, IndexError, ValueError, AttributeError, RecursionError)


@dataclass(frozen=True)
class SparkWriteEvent:
    """One analysed write: the run to record and how it was found."""

    run_id: str
    start_ms: int
    program: str
    command: str
    destination: tuple[str, str]
    #: None when the write reads no dataset (inline rows, ``range``, an RDD): nothing to
    #: record (`fll.spark.lineage_model.nothing_read` says why)
    info: FieldLineageInfo | None
    capture: Any  # fll.spark.Capture


def _need(event: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = event.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise BadRequest(f"$.{key} must be {names}, got {type(value).__name__}", f"$.{key}")
    return value


def _dataset(value: Any, where: str) -> tuple[str, str]:
    if isinstance(value, Mapping):
        loc, name = value.get("location"), value.get("name")
        if isinstance(loc, str) and loc:
            return dataset_name(loc)
        if isinstance(name, str) and name:
            return ("spark", name)
    raise BadRequest(f"{where} must be {{\"location\": str}} or {{\"name\": str}}", where)


def parse_event(event: Any) -> dict[str, Any]:
    """Check an event's shape; returns it. `BadRequest` names the first bad JSON path."""
    if not isinstance(event, Mapping):
        raise BadRequest("$ must be a JSON object (a Spark write event)", "$")
    fmt = event.get("format")
    if fmt != FORMAT:
        raise BadRequest(f"$.format must be {FORMAT} (this server reads format {FORMAT}; "
                         f"rebuild the listener with this fll), got {fmt!r}", "$.format")
    run_id = _need(event, "run_id", str)
    if not run_id.strip():
        raise BadRequest("$.run_id must not be empty", "$.run_id")
    _need(event, "start_ms", int)
    _need(event, "program", str)
    _need(event, "command", str)
    _need(event, "plan", list)
    leaves = _need(event, "leaves", list)
    for i, leaf in enumerate(leaves):
        where = f"$.leaves[{i}]"
        if not isinstance(leaf, Mapping):
            raise BadRequest(f"{where} must be an object", where)
        if not isinstance(leaf.get("number"), int):
            raise BadRequest(f"{where}.number must be an integer", f"{where}.number")
        if leaf.get("first_id") is not None and not isinstance(leaf.get("first_id"), int):
            raise BadRequest(f"{where}.first_id must be an integer or null", f"{where}.first_id")
        if not isinstance(leaf.get("datasets"), list):
            raise BadRequest(f"{where}.datasets must be a list", f"{where}.datasets")
        for j, ds in enumerate(leaf["datasets"]):
            _dataset(ds, f"{where}.datasets[{j}]")
    _dataset(event.get("destination"), "$.destination")
    return dict(event)


def _leaf_map(event: Mapping[str, Any], nodes: list[PlanNode],
              query: PlanNode | None) -> dict[int, list[tuple[str, str]]]:
    """Python node number → datasets, matching the JVM's leaves by their first exprId.

    The exprId is what identifies a relation instance in both trees; the
    number is used only for a leaf with no output. A leaf the walk will read
    but the event does not describe is an error: recording it without its
    sources would be wrong lineage, not partial lineage.
    """
    by_id: dict[int, list[tuple[str, str]]] = {}
    by_number: dict[int, list[tuple[str, str]]] = {}
    for i, leaf in enumerate(event["leaves"]):
        found = [_dataset(ds, f"$.leaves[{i}].datasets[{j}]")
                 for j, ds in enumerate(leaf["datasets"])]
        if leaf.get("first_id") is not None:
            by_id[leaf["first_id"]] = found
        by_number[leaf["number"]] = found
    read = {id(n) for n in query.walk()} if query is not None else None
    out: dict[int, list[tuple[str, str]]] = {}
    for node in nodes:
        if node.cls not in RELATION_LEAVES:
            continue
        first = first_output_id(node)
        datasets = by_id.get(first) if first is not None else by_number.get(node.number)
        if datasets is None:
            if read is not None and id(node) not in read:
                continue  # the destination's own relation (AppendData.table), not a read
            raise BadRequest(f"$.leaves has no entry for plan node {node.number} ({node.cls}, "
                             f"first output #{first})", "$.leaves")
        out[node.number] = datasets
    return out


def analyse_event(event: Any) -> SparkWriteEvent:
    """The run a listener event describes, analysed by the rules `track()` uses."""
    ev = parse_event(event)
    start = time.perf_counter()
    try:
        root, nodes = parse_plan(ev["plan"])
    except (FllError, *_MALFORMED) as exc:
        raise BadRequest(f"$.plan is not a Spark plan's toJSON(): {exc}", "$.plan") from None
    query = write_query(root)
    if query is None:
        raise BadRequest(f"$.plan: {root.cls} is not a write command fll analyses", "$.plan")
    leaves = _leaf_map(ev, nodes, query)
    try:
        result, facet = lineage_and_facet(root, leaves)
    except _MALFORMED as exc:  # a hand-made plan the walk cannot follow: a client error
        raise BadRequest(f"$.plan cannot be walked: {type(exc).__name__}: {exc}",
                         "$.plan") from None
    inputs = sorted({ds for found in leaves.values() for ds in found})
    destination = _dataset(ev["destination"], "$.destination")
    cap = Capture(facet, destination, inputs, result, 0, 0.0, time.perf_counter() - start,
                  len(nodes))
    info = to_operations(cap, EndPoint(*destination)) if inputs else None
    return SparkWriteEvent(ev["run_id"], ev["start_ms"], ev["program"], ev["command"],
                           destination, info, cap)


def record_event(store: Any, event: Any) -> tuple[int, dict[str, Any]]:
    """Record one listener event in ``store``: (HTTP-style status, answer).

    201 recorded, 200 already recorded with the same operations, 202 nothing
    to record (the write reads no dataset; ``answer["reason"]`` says why, e.g.
    ``unknown: built from an RDD (LogicalRDD)``), 409 the run id is recorded with
    other operations (``answer["error"]`` says so; nothing changed). A recorded
    run whose lineage is partly unknown also has a ``reason``.
    `BadRequest`/`InvalidLineageError` for an event that cannot be analysed;
    a `StoreError` propagates.
    """
    ev = analyse_event(event)
    answer: dict[str, Any] = {"runId": ev.run_id, "command": ev.command,
                              "destination": {"namespace": ev.destination[0],
                                              "name": ev.destination[1]}}
    if ev.info is None:
        # "unknown: built from an RDD (LogicalRDD)" when the plan cannot say what it read
        return 202, {**answer, "recorded": False, "reason": nothing_read(ev.capture.lineage)}
    conflict = f"run {ev.run_id!r} is already recorded with other operations; nothing changed"
    prior = store.run(ev.run_id)
    if prior is not None and prior.checksum != ev.info.checksum:
        return 409, {**answer, "error": conflict}
    try:
        new = store.record(ev.info, ev.run_id, ev.start_ms, ev.program)
    except InvalidLineageError:
        raced = store.run(ev.run_id)  # recorded by another request meanwhile
        if raced is not None and raced.checksum != ev.info.checksum:
            return 409, {**answer, "error": conflict}
        raise
    if ev.capture.lineage.unknown:  # recorded, but these fields lack inputs fll cannot see
        answer["reason"] = "; ".join(ev.capture.lineage.unknown)
    return (201 if new else 200), {**answer, "recorded": new, "checksum": ev.info.checksum,
                                   "program": ev.program,
                                   "startTimeInSeconds": ev.start_ms // 1000}


def spool_servers(directory: str | Path) -> list[dict[str, Any]]:
    """What waits in a listener spool, per server it was captured for.

    The listener spools into ``DIR/<key>/`` (one sub-directory per server URL and
    token, its ``server`` file naming the URL); ``DIR`` may also be one such
    sub-directory. Events lying in ``DIR`` itself, written by a listener older than
    the per-server spool, have no known server (``"server": None``). Returns
    ``[{"server": url | None, "directory": Path, "events": [paths, oldest first]}]``
    for every group that holds events.
    """
    root = Path(directory)
    if not root.is_dir():
        raise BadRequest(f"spool directory {root} does not exist", "--spool")
    groups: list[dict[str, Any]] = []

    def add(server: str | None, where: Path) -> None:
        events = sorted(where.glob("*.json"))
        if events:
            groups.append({"server": server, "directory": where, "events": events})

    own = _server_of(root)
    add(own, root)
    if own is None:
        for sub in sorted(p for p in root.iterdir() if p.is_dir()):
            server = _server_of(sub)
            if server is not None:
                add(server, sub)
    return groups


def _server_of(directory: Path) -> str | None:
    try:
        first = (directory / "server").read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return first[0].rstrip("/") if first else None


def record_spool(store: Any, directory: str | Path, server: str | None = None
                 ) -> dict[str, Any]:
    """Record the events the listener spooled in ``directory`` for one server, oldest first.

    An event is recorded only into the store of the server it was captured for:
    ``server`` (its URL, as given to ``spark.fll.url``) picks that server's
    events, and must be given whenever events of a known server wait, else
    `BadRequest` names every server waiting (the events stay spooled); only an
    older listener's events, of no known server, are recorded without it.
    ``answer["server"]`` names the server recorded for (None: an older
    listener's events, captured for an unknown server).

    A recorded (or already recorded, or empty) event's file is deleted; one
    that can never be recorded is renamed ``*.rejected`` and listed with why.
    A `StoreError` stops the pass and leaves the remaining files in place.
    """
    chosen = select_spool(directory, server)
    done: dict[str, Any] = {"server": chosen[0]["server"] if chosen else
                            (server.rstrip("/") if server else None),
                            "recorded": 0, "unchanged": 0, "empty": 0, "rejected": []}
    for path in [p for g in chosen for p in g["events"]]:
        try:
            event = json.loads(path.read_bytes())
            status, answer = record_event(store, event)
            if status == 409:
                raise InvalidLineageError(answer["error"])
        except (ValueError, FllError) as exc:
            from ..errors import StoreError

            if isinstance(exc, StoreError):
                raise
            path.rename(path.with_name(path.name + ".rejected"))
            done["rejected"].append({"file": path.name, "error": str(exc).splitlines()[0]})
            continue
        key = {201: "recorded", 200: "unchanged", 202: "empty"}[status]
        done[key] += 1
        path.unlink()
    return done


def select_spool(directory: str | Path, server: str | None = None) -> list[dict[str, Any]]:
    """The `spool_servers` groups `record_spool` would record (see there); `BadRequest`
    when ``server`` has none waiting while others do, or, without ``server``, when
    events captured for a known server wait (the caller must say which server's
    store it records into)."""
    groups = spool_servers(directory)
    if server is not None:
        wanted = server.rstrip("/")
        chosen = [g for g in groups if g["server"] == wanted]
        if not chosen and groups:
            raise BadRequest(f"no event in {directory} was captured for {wanted}; it holds "
                             f"events for {_waiting(groups)}", "--server")
        return chosen
    if any(g["server"] is not None for g in groups):
        raise BadRequest(f"{directory} holds events captured for {_waiting(groups)}: record "
                         f"one server's events into that server's store with --server URL",
                         "--server")
    return groups


def _waiting(groups: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for g in groups:
        name = g["server"] or "an unknown server (an older listener's files)"
        counts[name] = counts.get(name, 0) + len(g["events"])
    return ", ".join(f"{name} ({n} event{'s' if n != 1 else ''})"
                     for name, n in counts.items())
