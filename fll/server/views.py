"""The JSON answers of the REST API, computed from a `LineageStore`.

Pure functions of (store, decoded parameters) → plain dicts and lists, so
they can be tested and reused without HTTP. Shapes follow
design/rest-api.md exactly (CDAP v3 key names; Marquez's column-lineage graph
is `fll.server.column_graph`'s).
Times in answers are epoch seconds, as CDAP gives them; the store speaks ms.

Multi-level walks (`level`, `depth`) keep a visited set, so a cycle across runs
is cut, never looped, and they stop at the limit they are given. A dataset
asked for by an alias (a pipeline file's ``namespace:referenceName``, an
OpenLineage symlink) is answered as the dataset it stands for, and the walks
read a dataset's runs under every name it has (`fll.render.Names`), so runs
recorded under an older name are part of the answer. This module
must never write to the store and never raise anything but fll errors for
what a caller can get wrong.
"""
from __future__ import annotations

from typing import Any, Iterable

from ..errors import BadRequest, NotFound
from ..model import (EndPoint, EndPointField, Operation, ReadOperation, Transformation,
                     TransformOperation)
from ..render import EdgeTags, Names, edge_kind
from ..rowkeys import MAX_TIME
from ..store.lineage import LineageStore
from ..store.runs import run_states
from .field_inputs import MergedTags, field_step

ALL_TIME = (0, MAX_TIME)


# -- lookups that 404 ------------------------------------------------------------

def dataset_known(store: LineageStore, ep: EndPoint) -> bool:
    """A run read or wrote it, or an OpenLineage event reported its schema."""
    return store.exists(ep) or store.schema(ep.namespace, ep.name, *ALL_TIME) is not None


def known_fields(store: LineageStore, ep: EndPoint, start: int, end: int,
                 prefix: str | None = None) -> list[str]:
    """Fields with lineage in the range, and the fields of the schema reported
    for the dataset in the range (a `count(*) AS n` column has no inputs but is
    a field), sorted."""
    names = set(store.fields(ep, start, end, prefix))
    schema = store.schema(ep.namespace, ep.name, start, end) or {}
    low = (prefix or "").lower()
    names.update(n for n in schema if n.lower().startswith(low))
    return sorted(names)


def require_dataset(store: LineageStore, ep: EndPoint) -> None:
    if not dataset_known(store, ep):
        raise NotFound(f"dataset {ep.namespace}:{ep.name} is unknown (no run ever read or "
                       f"wrote it)")


def resolve(store: LineageStore, ep: EndPoint) -> EndPoint:
    """A dataset asked for by an alias (a pipeline file's ``referenceName``, a
    symlink) is answered as the dataset the alias stands for."""
    target = Names(store).canonical(ep)
    return target if target == ep or dataset_known(store, target) else ep


def resolve_field(store: LineageStore, ef: EndPointField) -> EndPointField:
    return EndPointField(resolve(store, ef.endpoint), ef.field)


def require_field(store: LineageStore, ef: EndPointField) -> None:
    require_dataset(store, ef.endpoint)
    if ef.field not in known_fields(store, ef.endpoint, *ALL_TIME):
        raise NotFound(f"field {ef.field!r} of dataset {ef.endpoint.namespace}:"
                       f"{ef.endpoint.name} is unknown (no run ever read or wrote it)")


# -- small JSON pieces -----------------------------------------------------------

def dataset_id(ep: EndPoint) -> dict:
    """CDAP's field-summary dataset shape."""
    return {"namespace": ep.namespace, "dataset": ep.name}


def entity_id(ep: EndPoint) -> dict:
    """CDAP's `DatasetId` as Gson writes it (with the entity type)."""
    return {"namespace": ep.namespace, "dataset": ep.name, "entity": "DATASET"}


def endpoint_json(ep: EndPoint) -> dict:
    return {"namespace": ep.namespace, "name": ep.name}


def _input_json(op: Operation, origin: str, name: str, tags: Iterable[Transformation]) -> dict:
    d: dict[str, Any] = {"origin": origin, "name": name}
    tags = list(tags)
    if tags:
        d["transformations"] = [t.to_dict() for t in tags]
    return d


def operation_json(op: Operation) -> dict:
    """CDAP's `FieldOperationInfo`: inputs/outputs are an endPoint or a field list."""
    out: dict[str, Any] = {"name": op.name, "description": op.description}
    if isinstance(op, ReadOperation):
        out["inputs"] = {"endPoint": {**endpoint_json(op.source),
                                      "properties": dict(op.source.properties)}}
        out["outputs"] = {"fields": list(op.outputs)}
    elif isinstance(op, TransformOperation):
        out["inputs"] = {"fields": [_input_json(op, i.origin, i.name,
                                                op.transformations.get(i, ()))
                                    for i in op.inputs]}
        out["outputs"] = {"fields": list(op.outputs)}
    else:
        out["inputs"] = {"fields": [_input_json(op, i.origin, i.name, ()) for i in op.inputs]}
        out["outputs"] = {"endPoint": {**endpoint_json(op.destination),
                                       "properties": dict(op.destination.properties)}}
    return out


def _grouped(fields: Iterable[EndPointField]) -> list[dict]:
    by: dict[EndPoint, set[str]] = {}
    for f in fields:
        by.setdefault(f.endpoint, set()).add(f.field)
    return [{"dataset": dataset_id(ep), "fields": sorted(by[ep])} for ep in sorted(by)]


def _directions(direction: str, allowed: tuple[str, ...] = ("incoming", "outgoing", "both")
                ) -> list[str]:
    d = (direction or "").lower()
    if d not in allowed:
        raise BadRequest(f"direction must be one of {', '.join(allowed)}, got {direction!r}",
                         "direction")
    return ["incoming", "outgoing"] if d == "both" else [d]


# -- CDAP v3: lineage/fields ------------------------------------------------------

def dataset_fields(store: LineageStore, ep: EndPoint, start: int, end: int,
                   prefix: str | None, include_current: bool) -> list:
    ep = resolve(store, ep)
    require_dataset(store, ep)
    names = Names(store).equivalents(ep)
    if not include_current:
        return sorted({f for e in names for f in store.fields(e, start, end, prefix)})
    # "current" fields: every field the dataset ever had; lineage judged in the range
    with_lineage = {f.field for e in names for d in ("incoming", "outgoing")
                    for f, targets in store.field_map(e, start, end, d).items() if targets}
    return [{"name": n, "lineage": n in with_lineage}
            for n in sorted({f for e in names for f in known_fields(store, e, *ALL_TIME,
                                                                    prefix)})]


def field_summary(store: LineageStore, ef: EndPointField, start: int, end: int,
                  direction: str, level: int, show_indirect: bool = True) -> dict:
    """Fields ``ef`` comes from / goes to, ``level`` hops across datasets.

    CDAP's shape, plus one key per dataset group when any of its edges is
    tagged: ``transformations``, per field the tags of the edge it was first
    reached by (``[]`` untagged). With
    ``show_indirect`` False, fields reached only through INDIRECT edges are
    left out and not walked past.
    """
    ef = resolve_field(store, ef)
    dirs = _directions(direction)
    names = Names(store)
    steps = {d: field_step(store, names, d) for d in dirs}
    first = {d: steps[d](ef, start, end) for d in dirs}
    if not any(first.values()):
        # a field with lineage in the range is known; only without any does the
        # 404 check need every set the dataset ever had
        require_field(store, ef)
    tagger = MergedTags(store, start, end, names)
    answer: dict[str, Any] = {"incoming": None, "outgoing": None}
    for d in dirs:
        step = steps[d]
        seen = {ef}
        found: dict[EndPointField, list[Transformation]] = {}
        frontier = [ef]
        for _ in range(level):
            nxt = []
            for f in frontier:
                for g in sorted(first[d] if f == ef else step(f, start, end)):
                    if g in seen:
                        continue
                    tags = tagger.of(g, f) if d == "incoming" else tagger.of(f, g)
                    if not show_indirect and edge_kind(tags) == "INDIRECT":
                        continue
                    seen.add(g)
                    found[g] = tags
                    nxt.append(g)
            frontier = nxt
            if not frontier:
                break
        groups = _grouped(found)
        for group in groups:
            ep = EndPoint(group["dataset"]["namespace"], group["dataset"]["dataset"])
            tagged = {name: [t.to_dict() for t in found[EndPointField(ep, name)]]
                      for name in group["fields"]}
            if any(tagged.values()):  # untagged (CDAP) producers keep CDAP's exact shape
                group["transformations"] = tagged
        answer[d] = groups
    return answer


def field_operations(store: LineageStore, ef: EndPointField, start: int, end: int,
                     direction: str) -> dict:
    ef = resolve_field(store, ef)
    dirs = _directions(direction)
    require_field(store, ef)
    answer: dict[str, Any] = {"incoming": None, "outgoing": None}
    names = Names(store).equivalents(ef.endpoint)  # runs recorded under an older name too
    groups = {d: [g for e in names for g in store.operations(EndPointField(e, ef.field),
                                                             start, end, d)] for d in dirs}
    # each run's state (COMPLETE for a run recorded without OpenLineage)
    states = run_states(store, [r.run_id for gs in groups.values() for g in gs for r in g.runs])
    for d in dirs:
        answer[d] = [{
            "programs": [{"program": r.program, "run": r.run_id,
                          "lastExecutedTimeInSeconds": r.start_ms // 1000,
                          "state": states.get(r.run_id, "COMPLETE")} for r in g.runs],
            "operations": [operation_json(op) for op in g.operations],
        } for g in groups[d]]
    return answer


def all_field_lineage(store: LineageStore, ep: EndPoint, start: int, end: int,
                      direction: str) -> dict:
    ep = resolve(store, ep)
    dirs = _directions(direction)
    require_dataset(store, ep)
    answer: dict[str, Any] = {
        "direction": (direction or "").upper(), "start-ts": start // 1000,
        "end-ts": end // 1000, "entityId": entity_id(ep),
        "fields": store.fields(ep, start, end), "incoming": None, "outgoing": None}
    for d in dirs:
        by: dict[EndPoint, set[tuple[str, str]]] = {}
        for mine, others in store.field_map(ep, start, end, d).items():
            for other in others:
                pair = (other.field, mine.field) if d == "incoming" else (mine.field, other.field)
                by.setdefault(other.endpoint, set()).add(pair)
        answer[d] = [{"entityId": entity_id(other),
                      "relations": [{"source": s, "destination": t} for s, t in sorted(by[other])]}
                     for other in sorted(by)]
    return answer


# -- the seed design's paths --------------------------------------------------------

def dataset_field_mappings(store: LineageStore, ep: EndPoint, start: int, end: int,
                           level: int, show_indirect: bool = True) -> list[dict]:
    """Field maps between ``ep`` and its sources (backward) and destinations
    (forward), ``level`` dataset hops each way, through runs in the range.

    A tagged ``{from, to}`` also carries ``kind`` (DIRECT or INDIRECT) and
    ``transformations``; with ``show_indirect`` False the
    INDIRECT ones are left out (and a dataset pair left with none)."""
    ep = resolve(store, ep)
    require_dataset(store, ep)
    tagger = EdgeTags(store, start, end)
    maps: dict[tuple[EndPoint, EndPoint], set[tuple[str, str]]] = {}
    for d in ("incoming", "outgoing"):
        seen = {ep}
        frontier = [ep]
        for _ in range(level):
            nxt = []
            for here in frontier:
                for mine, others in store.field_map(here, start, end, d).items():
                    for other in others:
                        if d == "incoming":
                            key, pair = (other.endpoint, here), (other.field, mine.field)
                        else:
                            key, pair = (here, other.endpoint), (mine.field, other.field)
                        maps.setdefault(key, set()).add(pair)
                        if other.endpoint not in seen:
                            seen.add(other.endpoint)
                            nxt.append(other.endpoint)
            frontier = sorted(nxt)
            if not frontier:
                break
    out = []
    for s_ep, t_ep in sorted(maps):
        fieldmap = []
        for a, b in sorted(maps[(s_ep, t_ep)]):
            tags = tagger.of(EndPointField(_plain(s_ep), a), EndPointField(t_ep, b))
            kind = edge_kind(tags)
            if not show_indirect and kind == "INDIRECT":
                continue
            entry: dict[str, Any] = {"from": a, "to": b}
            if tags:  # untagged pairs keep the plain {from, to} shape
                entry["kind"] = kind
                entry["transformations"] = [t.to_dict() for t in tags]
            fieldmap.append(entry)
        if fieldmap:
            out.append({"source": endpoint_json(s_ep), "destination": endpoint_json(t_ep),
                        "fieldmap": fieldmap})
    return out


def _plain(ep: EndPoint) -> EndPoint:
    return EndPoint(ep.namespace, ep.name)


def field_detail(store: LineageStore, ef: EndPointField, start: int, end: int,
                 direction: str) -> dict:
    """One level of a field's lineage with operations: one path per distinct
    operation set; nodes are ``<operation>.<field>``, connections the operations."""
    ef = resolve_field(store, ef)
    d = (direction or "").lower()
    if d not in ("backward", "forward"):
        raise BadRequest(f"direction must be backward or forward, got {direction!r}",
                         "direction")
    require_field(store, ef)
    paths = []
    groups = store.operations(ef, start, end, "incoming" if d == "backward" else "outgoing")
    states = run_states(store, [r.run_id for g in groups for r in g.runs])
    for g in groups:
        path = _path(g.operations, ef, d == "backward", [r.run_id for r in g.runs])
        # each run's state, in the order of "runs" (COMPLETE without OpenLineage events)
        path["runStates"] = [states.get(r.run_id, "COMPLETE") for r in g.runs]
        paths.append(path)
    return {"startTimeInSeconds": start // 1000, "endTimeInSeconds": end // 1000,
            "paths": paths}


def _path(ops: list[Operation], ef: EndPointField, backward: bool, runs: list[str]) -> dict:
    # node id -> (operation that produced it, field); never re-split ids, since
    # operation and field names may themselves hold dots
    owner: dict[str, tuple[str, str]] = {}

    def node(origin: str, name: str) -> str:
        nid = f"{origin}.{name}"
        owner[nid] = (origin, name)
        return nid

    conns: list[tuple[str, str, str]] = []
    node_ep: dict[str, tuple[str, EndPoint]] = {}
    anchors: set[str] = set()
    for op in ops:
        if isinstance(op, ReadOperation):
            for f in op.outputs:
                nid = node(op.name, f)
                node_ep[nid] = ("sourceEndPoint", op.source)
                if not backward and op.source == ef.endpoint and f == ef.field:
                    anchors.add(nid)
        elif isinstance(op, TransformOperation):
            for i in op.inputs:
                for o in op.outputs:
                    conns.append((node(i.origin, i.name), node(op.name, o), op.name))
        else:
            for i in op.inputs:
                nid = node(op.name, i.name)
                node_ep[nid] = ("destinationEndPoint", op.destination)
                conns.append((node(i.origin, i.name), nid, op.name))
                if backward and op.destination == ef.endpoint and i.name == ef.field:
                    anchors.add(nid)
    # keep only what lies on a path to (backward) or from (forward) the field
    step: dict[str, list[str]] = {}
    for a, b, _ in conns:
        near, far = (b, a) if backward else (a, b)
        step.setdefault(near, []).append(far)
    keep = set(anchors)
    stack = list(anchors)
    while stack:
        for far in step.get(stack.pop(), ()):
            if far not in keep:
                keep.add(far)
                stack.append(far)
    kept = [c for c in conns if c[0] in keep and c[1] in keep]
    nodes = []
    for nid in sorted(keep):
        entry: dict[str, Any] = {"id": nid, "label": owner[nid][1]}
        if nid in node_ep:
            key, ep = node_ep[nid]
            entry[key] = endpoint_json(ep)
        nodes.append(entry)
    used_ops = {c[2] for c in kept} | {owner[n][0] for n in keep}
    return {"nodes": nodes,
            "operations": [operation_json(op) for op in ops if op.name in used_ops],
            "connections": [{"from": a, "to": b, "operation": o} for a, b, o in kept],
            "runs": runs}


def dataset_properties(store: LineageStore, ep: EndPoint, start: int, end: int) -> list[dict]:
    ep = resolve(store, ep)
    require_dataset(store, ep)
    found = store.properties(ep, start, end)
    states = run_states(store, [p["programRun"] for p in found])
    return [{"programRun": p["programRun"], "properties": p["properties"],
             "state": states.get(p["programRun"], "COMPLETE")} for p in found]


def datasets(store: LineageStore) -> dict:
    """Every dataset a run read or wrote, or an event reported the schema of; one
    with aliases (a pipeline file's referenceName, symlinks) lists them, so a
    search finds it by either name."""
    aliases = store.all_aliases()
    out = []
    for ep in store.datasets(with_schemas=True):
        d = endpoint_json(ep)
        others = aliases.get((ep.namespace, ep.name))
        if others:
            d["aliases"] = [{"namespace": a, "name": b} for a, b in others]
        out.append(d)
    return {"datasets": out}
