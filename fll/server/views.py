"""The JSON answers of the REST API, computed from a `LineageStore`.

Pure functions of (store, decoded parameters) → plain dicts and lists, so
they can be tested and reused without HTTP. Shapes follow
design/rest-api.md exactly (CDAP v3 key names, Marquez's column-lineage graph).
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

import uuid
from typing import Any, Callable, Iterable

from ..errors import BadRequest, NotFound
from ..model import (EndPoint, EndPointField, Operation, ReadOperation, Transformation,
                     TransformOperation)
from ..render import EdgeTags, Names, edge_kind, prefetch, read_hop
from ..rowkeys import MAX_TIME
from ..store.lineage import LineageStore
from ..store.runs import run_states

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
    steps = {d: _step(store, names, d) for d in dirs}
    first = {d: steps[d](ef, start, end) for d in dirs}
    if not any(first.values()):
        # a field with lineage in the range is known; only without any does the
        # 404 check need every set the dataset ever had
        require_field(store, ef)
    tagger = _Tags(store, start, end, names)
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


def _step(store: LineageStore, names: Names, direction: str
          ) -> Callable[[EndPointField, int, int], set[EndPointField]]:
    """One hop of a walk, reading the field under every name of its dataset and
    answering each field under one name."""
    ask = store.incoming if direction == "incoming" else store.outgoing

    def step(f: EndPointField, start: int, end: int) -> set[EndPointField]:
        found: set[EndPointField] = set()
        for ep in names.equivalents(f.endpoint):
            found.update(names.field(g) for g in ask(EndPointField(ep, f.field), start, end))
        found.discard(f)
        return found
    return step


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


# -- Marquez-compatible column lineage ------------------------------------------------

def set_inputs(store: LineageStore, checksum: str, ef: EndPointField
               ) -> dict[EndPointField, list[Transformation]]:
    """``ef``'s source fields and their tags in one operation set, from its
    stored summaries (composed at record time: nothing is rebuilt per read;
    kept with the decoded set, so bounded by the store's set cache). Shared:
    never change it."""
    return store.summaries([checksum])[checksum].incoming_tags(ef)


def merged_inputs(store: LineageStore, ef: EndPointField, start: int, end: int,
                  drop_indirect: bool = False) -> dict[EndPointField, list[Transformation]]:
    """``ef``'s source fields (as recorded, under the names the sets give them)
    with their tags merged over the range's operation sets, in set order; with
    ``drop_indirect`` an input only INDIRECT in a set is left out of that set.
    Kept per list of sets when the store is a request's `ReadView` (the list is
    the key, so a write that adds a set is a new key): a whole-history question
    over a dataset with a hundred sets merges them once, not per request.
    The answer is shared: never change it."""
    sets = tuple(store.checksums(ef.endpoint, start, end, "incoming"))
    if len(sets) == 1 and not drop_indirect:
        return set_inputs(store, sets[0], ef)  # one set: its own answer, not a copy

    def compute() -> dict[EndPointField, list[Transformation]]:
        merged: dict[EndPointField, list[Transformation]] = {}
        for c in sets:
            for src, tags in set_inputs(store, c, ef).items():
                if drop_indirect and edge_kind(tags) == "INDIRECT":
                    continue
                cur = merged.setdefault(src, [])
                cur.extend(t for t in tags if t not in cur)
        return merged
    merges = getattr(store, "merges", None)
    if merges is None:
        return compute()
    key = ("inputs", ef.endpoint.namespace, ef.endpoint.name, ef.field, drop_indirect, sets)
    return merges.get(key, compute)


def named_inputs(store: LineageStore, names: Names, f: EndPointField, start: int, end: int,
                 drop_indirect: bool = False) -> dict[EndPointField, list[Transformation]]:
    """``f``'s inputs over every name of its dataset, each source under one name,
    tags merged in the order the sets give them (a fresh dict)."""
    merged: dict[EndPointField, list[Transformation]] = {}
    kept = getattr(store, "merges", None) is not None
    for ep in names.equivalents(f.endpoint):
        here = EndPointField(ep, f.field)
        raw = merged_inputs(store, here, start, end, drop_indirect) if kept else None
        if raw is None or any(names.field(src) != src for src in raw):
            # set by set (without a request's ReadView, or when two sources are one
            # dataset under two names: their tags must interleave set by set)
            for c in store.checksums(ep, start, end, "incoming"):
                for src, tags in set_inputs(store, c, here).items():
                    if drop_indirect and edge_kind(tags) == "INDIRECT":
                        continue
                    cur = merged.setdefault(names.field(src), [])
                    cur.extend(t for t in tags if t not in cur)
            continue
        for src, tags in raw.items():
            cur = merged.setdefault(names.field(src), [])
            cur.extend(t for t in tags if t not in cur)
    return merged


class _Tags(EdgeTags):
    """`EdgeTags` whose per-destination merge comes from `named_inputs` (kept
    per list of sets across requests) when the store is a request's view."""

    def into(self, dest: EndPointField) -> dict[EndPointField, list[Transformation]]:
        if getattr(self.store, "merges", None) is None:
            return super().into(dest)
        hit = self._into.get(dest)
        if hit is None:
            hit = self._into[dest] = named_inputs(self.store, self.names, dest,
                                                  self.start_ms, self.end_ms)
        return hit


def _colon_splits(rest: str, parts: int) -> list[list[str]]:
    """Every way to cut ``rest`` at colons into ``parts`` non-empty pieces, the
    shortest first piece first (namespaces such as ``postgres://host:5432`` hold
    colons, so no single split is right)."""
    colons = [i for i, c in enumerate(rest) if c == ":"]
    if parts == 2:
        return [[rest[:i], rest[i + 1:]] for i in colons if 0 < i < len(rest) - 1]
    return [[rest[:a], rest[a + 1:b], rest[b + 1:]]
            for a in colons for b in colons if 0 < a < b - 1 and b < len(rest) - 1]


def unversioned(node_id: str) -> list[str]:
    """``node_id``, and without its ``#<uuid>`` when it ends in one (Marquez's
    version node ids, e.g. ``dataset:ns:name#<version>``): tried in that
    order, so a name that holds ``#`` still resolves. fll answers a version
    node as the node itself."""
    head, sep, tail = node_id.rpartition("#")
    if sep and head:
        try:
            uuid.UUID(tail)
        except ValueError:
            return [node_id]
        return [node_id, head]
    return [node_id]


def parse_node_id(store: LineageStore, node_id: str) -> tuple[EndPoint, str | None]:
    """``datasetField:<ns>:<dataset>:<field>`` or ``dataset:<ns>:<name>``, either
    perhaps with ``#<version>`` (`unversioned`).

    Every split at colons is tried and the one naming a known dataset wins.
    """
    candidates = unversioned(node_id or "")
    for candidate in candidates[:-1]:
        try:
            return _parse_node_id(store, candidate)
        except NotFound:
            continue
    return _parse_node_id(store, candidates[-1])


def _parse_node_id(store: LineageStore, node_id: str) -> tuple[EndPoint, str | None]:
    kind, sep, rest = (node_id or "").partition(":")
    if not sep or kind not in ("dataset", "datasetField"):
        raise BadRequest(f"nodeId must look like datasetField:<namespace>:<dataset>:<field>, "
                         f"dataset:<namespace>:<name> or job:<namespace>:<name>, "
                         f"got {node_id!r}", "nodeId")
    candidates: list[tuple[EndPoint, str | None]] = [
        (EndPoint(p[0], p[1]), p[2] if kind == "datasetField" else None)
        for p in _colon_splits(rest, 3 if kind == "datasetField" else 2)]
    if not candidates:
        raise BadRequest(f"nodeId {node_id!r} does not name a namespace, dataset"
                         + (" and field" if kind == "datasetField" else ""), "nodeId")
    names = Names(store)
    known = []
    for ep, fld in candidates:  # a name that is an alias stands for its dataset
        target = names.canonical(ep)
        if dataset_known(store, target):
            known.append((target, fld))
        elif dataset_known(store, ep):
            known.append((ep, fld))
    if not known:
        raise NotFound(f"nodeId {node_id!r} names no known dataset")
    if kind == "datasetField":
        with_field = [c for c in known if c[1] is not None
                      and c[1] in known_fields(store, c[0], *ALL_TIME)]
        if not with_field:
            raise NotFound(f"nodeId {node_id!r} names no known field")
        return with_field[0]
    return known[0]


def job_outputs(store: LineageStore, node_id: str, start: int, end: int) -> list[EndPointField]:
    """``job:<namespace>:<name>``: the fields the job's latest run in
    ``[start, end)`` wrote (Marquez: the column lineage of the job's outputs)."""
    wanted: set[str] = set()
    for candidate in unversioned(node_id):
        rest = candidate.partition(":")[2]
        wanted |= {f"{a}/{b}" for a, b in _colon_splits(rest, 2)}
        # a program without a "/" (a track() job) is exported as job namespace "fll"
        wanted |= {b for a, b in _colon_splits(rest, 2) if a == "fll"}
    if not wanted:
        raise BadRequest(f"nodeId {node_id!r} does not name a job namespace and name",
                         "nodeId")
    latest: tuple[int, str, str] | None = None
    for ep in store.datasets():
        for run in store.runs(ep, start, end, "incoming"):
            if run.program in wanted and (latest is None
                                          or (run.start_ms, run.run_id) > latest[:2]):
                latest = (run.start_ms, run.run_id, run.checksum)
    if latest is None:
        raise NotFound(f"nodeId {node_id!r}: no run of this job in the range")
    info = store.operation_set(latest[2])
    return sorted(EndPointField(ep, f) for ep, fields in info.destination_fields().items()
                  for f in fields)


def _field_node_id(f: EndPointField) -> str:
    return f"datasetField:{f.endpoint.namespace}:{f.endpoint.name}:{f.field}"


def _order(f: EndPointField) -> tuple[str, str, str]:
    """EndPointField's own order as plain strings: sorting tens of thousands of
    fields by the dataclass comparison took most of a wide answer's time."""
    return (f.endpoint.namespace, f.endpoint.name, f.field)


def column_lineage(store: LineageStore, node_id: str, depth: int,
                   with_downstream: bool, start: int, end: int,
                   show_indirect: bool = True) -> dict:
    """Marquez's column-lineage graph. As Marquez writes it, every edge listed
    on a node has that node as ``origin``: an inEdge's ``destination`` is the
    upstream field, an outEdge's the downstream one (its web UI walks
    ``inEdges[].destination``). Linear in the fields reached: each (operation
    set, dataset) is composed once for all its fields. A dataset is read under
    every name it has (aliases) and answered under one. With ``show_indirect``
    False an input only INDIRECT (filter, join, group-by, sort…) is neither an
    edge nor an input field, and is not walked past; untagged inputs are kept."""
    if node_id.startswith("job:"):
        roots = job_outputs(store, node_id, start, end)
    else:
        ep, field_name = parse_node_id(store, node_id)
        roots = ([EndPointField(ep, field_name)] if field_name is not None
                 else [EndPointField(ep, f) for f in sorted(
                     {f for e in Names(store).equivalents(ep)
                      for f in known_fields(store, e, start, end)})])

    names = Names(store)
    roots = [names.field(f) for f in roots]
    inputs_memo: dict[EndPointField, dict[EndPointField, list[Transformation]]] = {}

    def inputs_of(f: EndPointField) -> dict[EndPointField, list[Transformation]]:
        if f not in inputs_memo:
            inputs_memo[f] = named_inputs(store, names, f, start, end,
                                          drop_indirect=not show_indirect)
        return inputs_memo[f]

    outgoing = _step(store, names, "outgoing")

    def downstream(f: EndPointField) -> Iterable[EndPointField]:
        found = outgoing(f, start, end)
        if show_indirect:
            return sorted(found, key=_order)
        return sorted((g for g in found if f in inputs_of(g)), key=_order)

    nodes: set[EndPointField] = set(roots)
    edges: set[tuple[EndPointField, EndPointField]] = set()  # (upstream, downstream)
    walks: list[tuple[str, Callable[[EndPointField], Iterable[EndPointField]]]] = [
        ("up", lambda f: inputs_of(f).keys())]
    if with_downstream:
        walks.append(("down", downstream))
    for way, step in walks:
        seen = set(roots)
        frontier = list(roots)
        for _ in range(depth):
            read_hop(store, names, frontier, start, end,
                      "incoming" if way == "up" else "outgoing", also_incoming=not show_indirect)
            nxt = []
            for f in frontier:
                for g in step(f):
                    edges.add((g, f) if way == "up" else (f, g))
                    nodes.add(g)
                    if g not in seen:
                        seen.add(g)
                        nxt.append(g)
            frontier = nxt
            if not frontier:
                break
    # every node's inputs are listed: the datasets only the downstream walk reached
    prefetch(store, {f.endpoint for f in nodes}, start, end, "incoming")
    ins: dict[EndPointField, list[dict]] = {}
    outs: dict[EndPointField, list[dict]] = {}
    for up, down in sorted(edges, key=lambda e: (_order(e[0]), _order(e[1]))):
        ins.setdefault(down, []).append({"origin": _field_node_id(down),
                                         "destination": _field_node_id(up)})
        outs.setdefault(up, []).append({"origin": _field_node_id(up),
                                        "destination": _field_node_id(down)})
    types: dict[EndPoint, dict[str, str | None]] = {}
    prefetch_schemas = getattr(store, "prefetch_schemas", None)
    if prefetch_schemas is not None:
        prefetch_schemas({(f.endpoint.namespace, f.endpoint.name) for f in nodes}, *ALL_TIME)
    graph = []
    for f in sorted(nodes, key=_order):
        if f.endpoint not in types:
            types[f.endpoint] = store.schema(f.endpoint.namespace, f.endpoint.name,
                                             *ALL_TIME) or {}
        graph.append({
            "id": _field_node_id(f), "type": "DATASET_FIELD",
            "data": {"namespace": f.endpoint.namespace, "dataset": f.endpoint.name,
                     "field": f.field,
                     # Marquez answers "" for an unknown type; its Java client needs a string
                     "fieldType": types[f.endpoint].get(f.field) or "",
                     "inputFields": [{"namespace": s.endpoint.namespace,
                                      "dataset": s.endpoint.name, "field": s.field,
                                      "transformations": [_tag_json(t) for t in tags]}
                                     for s, tags in sorted(inputs_of(f).items(),
                                                           key=lambda kv: _order(kv[0]))]},
            "inEdges": ins.get(f, []), "outEdges": outs.get(f, [])})
    return {"graph": graph}


_TAG_JSON: dict[Transformation, dict] = {}


def _tag_json(t: Transformation) -> dict:
    """A tag as JSON, made once per distinct tag (there are few): shared by every
    answer, so never changed."""
    found = _TAG_JSON.get(t)
    if found is None:
        if len(_TAG_JSON) > 4096:
            _TAG_JSON.clear()
        found = _TAG_JSON[t] = t.to_dict()
    return found


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
