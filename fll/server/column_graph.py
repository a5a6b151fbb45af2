"""Marquez's column-lineage graph (``GET /api/v1/column-lineage``) and the
node ids it is asked with.

A node id names a dataset field (``datasetField:<ns>:<dataset>:<field>``), a
dataset (``dataset:<ns>:<name>``) or a job (``job:<ns>:<name>``), perhaps
with Marquez's ``#<version>``; namespaces may hold colons, so every split is
tried against what the store knows. The graph walks a field's inputs
(`fll.server.field_inputs`) up, and its readers down when asked.

This module must never write to the store and never raise anything but fll
errors for what a caller can get wrong.
"""
from __future__ import annotations

import uuid
from typing import Callable, Iterable

from ..errors import BadRequest, NotFound
from ..model import EndPoint, EndPointField, Transformation
from ..render import Names, prefetch, read_hop
from ..store.lineage import LineageStore
from .field_inputs import field_step, named_inputs
from .views import ALL_TIME, dataset_known, known_fields


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


def parse_node_id(store: LineageStore, node_id: str, walk: tuple[int, int] | None = None
                  ) -> tuple[EndPoint, str | None]:
    """``datasetField:<ns>:<dataset>:<field>`` or ``dataset:<ns>:<name>``, either
    perhaps with ``#<version>`` (`unversioned`).

    Every split at colons is tried and the one naming a known dataset wins.
    ``walk``: the range of the upstream walk that follows, read with the names
    where the store can (`ReadView.prefetch_names`).
    """
    candidates = unversioned(node_id or "")
    for candidate in candidates[:-1]:
        try:
            return _parse_node_id(store, candidate, walk)
        except NotFound:
            continue
    return _parse_node_id(store, candidates[-1], walk)


def _parse_node_id(store: LineageStore, node_id: str, walk: tuple[int, int] | None = None
                   ) -> tuple[EndPoint, str | None]:
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
    prefetch_names = getattr(store, "prefetch_names", None)
    if prefetch_names is not None:  # every name the id may mean, read at once
        asked = {(ep.namespace, ep.name) for ep, _ in candidates}
        prefetch_names(asked, *ALL_TIME, **({"walk": walk} if walk else {}),
                       exists=kind == "dataset")
        # and their schemas (a dataset known only by one; a field of it)
        prefetch_schemas = getattr(store, "prefetch_schemas", None)
        if prefetch_schemas is not None:
            prefetch_schemas(asked, *ALL_TIME)
    names = Names(store)
    if kind == "datasetField":
        # the first name holding the field wins, and only a known name holds
        # one: the names before it are not asked whether they exist
        for ep, fld in candidates:
            found = _with_field(store, names, ep, str(fld))
            if found is not None:
                return found
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


def _with_field(store: LineageStore, names: Names, ep: EndPoint, fld: str
                ) -> tuple[EndPoint, str] | None:
    """The dataset a ``datasetField`` name stands for when it holds the field,
    as `_parse_node_id` picks it (the alias's target when that is known, else
    the name when known), asking whether a dataset exists only when its sets
    and schema (`known_fields`) do not settle it."""
    target = names.canonical(ep)
    if target != ep and _known(store, target):
        return (target, fld) if fld in known_fields(store, target, *ALL_TIME) else None
    if fld in known_fields(store, ep, *ALL_TIME) and _known(store, ep):
        return ep, fld
    return None


def _known(store: LineageStore, ep: EndPoint) -> bool:
    """`dataset_known`, its schema asked first (read with the names)."""
    return store.schema(ep.namespace, ep.name, *ALL_TIME) is not None or store.exists(ep)


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
    along = getattr(store, "schemas_along", None)
    if along is not None:  # every node's type is answered: schemas read with the walk
        along()
    if node_id.startswith("job:"):
        roots = job_outputs(store, node_id, start, end)
    else:
        ep, field_name = parse_node_id(store, node_id, (start, end) if depth else None)
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

    outgoing = field_step(store, names, "outgoing")

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
        for hop in range(1, depth + 1):
            read_hop(store, names, frontier, start, end,
                     "incoming" if way == "up" else "outgoing", also_incoming=not show_indirect,
                     further=hop < depth)
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
