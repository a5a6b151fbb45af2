"""Column lineage facets <-> operation sets.

`_event_lineage` reads the ``columnLineage`` facets of an event's outputs
(destination -> field -> source field -> transformation tags, the facet's
dataset-wide inputs spread over every field of its dataset) and `_build`
turns that into an operation set: per input dataset a READ of the fields the
facets name, per output field one TRANSFORM whose inputs carry the facet's
tags, per output dataset one WRITE. Construction is deterministic (inputs
sorted, names derived from identities), so the same lineage always gives
the same operation set and checksum.

`facet_from_info` goes the other way: per output field the source fields it
derives from, with the transformation tags composed along every path
(semantics §5: INDIRECT beats DIRECT; among DIRECT, AGGREGATION beats
TRANSFORMATION beats IDENTITY). `normal_form`: a set read back through its
own facets, equal to it exactly when OpenLineage ingest built it.

This module must never write to a store, and never half-parse a facet: any
malformed value is a `BadRequest` naming its JSON path.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..errors import BadRequest, InvalidLineageError
from ..graph import compose_tags
from ..model import (EndPoint, EndPointField, InputField, Operation, ReadOperation, Transformation,
                     TransformOperation, WriteOperation)
from ..opset import FieldLineageInfo
from .memo import Memo
from .events import (COLUMN_LINEAGE_SCHEMA_URL, PRODUCER, PROPERTIES_FACET,
                     PROPERTIES_SCHEMA_URL, RUN_EVENT_SCHEMA_URL, _arr, _iso, _list_or_none,
                     _kind, _obj, _opt, _str)

# subtypes that, per OpenLineage, belong in the facet's top-level `dataset` list
_DATASET_WIDE = frozenset({"FILTER", "JOIN", "GROUP_BY", "SORT"})
_LEGACY_TYPES = {"IDENTITY": Transformation("DIRECT", "IDENTITY"),
                 "MASKED": Transformation("DIRECT", "TRANSFORMATION", masking=True)}


# checksum of a set -> checksum of its normal form (a pure function of the
# set); at most `_NORMAL_ENTRIES` pairs of checksums (3 MB), then forgotten
_NORMAL: dict[str, str] = {}
_NORMAL_ENTRIES = 16_384
# checksum of a set `_build` made -> the column lineage and properties it was
# built from (its normal form), so merging a run's next event reads no
# operations; bounded in bytes (`fll.openlineage.ingest.memo_budget`)
_SOURCE_EDGES = 4096  # the widest lineage kept there, in input fields
# bytes of the lineage kept, per input field and per output field (its dicts'
# slots and tuples of tags; the endpoints and fields are the set's, shared)
_EDGE_BYTES, _FIELD_BYTES = 160, 520


def _sizeof_sources(value: tuple[dict, dict]) -> int:
    lineage, props = value
    return sum(_FIELD_BYTES * len(per) + _EDGE_BYTES * sum(len(i) for i in per.values())
               for per in lineage.values()) + 300 * len(props)


_SOURCES = Memo(0, _sizeof_sources)


def _transformation(value: Any, path: str) -> Transformation:
    t = _obj(value, path)
    try:
        return Transformation(
            type=_str(t.get("type"), f"{path}.type"),
            subtype=_opt(t, "subtype", lambda v, p: _str(v, p, empty=True), path, ""),
            description=_opt(t, "description", lambda v, p: _str(v, p, empty=True), path, ""),
            masking=_opt(t, "masking", _bool, path, False))
    except InvalidLineageError as e:
        raise BadRequest(f"{path}: {e}", path) from None


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{path} must be a boolean, got {_kind(value)}", path)
    return value


def _input_ref(value: Any, path: str) -> tuple[EndPointField, tuple[Transformation, ...] | None]:
    d = _obj(value, path)
    ep = _endpoint(d.get("namespace"), d.get("name"), path, {})
    fld = _str(d.get("field"), f"{path}.field")
    tags = None
    if d.get("transformations") is not None:
        tags = tuple(_transformation(t, f"{path}.transformations[{i}]")
                     for i, t in enumerate(_arr(d["transformations"], f"{path}.transformations")))
    return EndPointField(ep, fld), tags


def _endpoint(namespace: Any, name: Any, path: str, properties: Mapping[str, str]) -> EndPoint:
    ns = _str(namespace, f"{path}.namespace")
    nm = _str(name, f"{path}.name")
    return EndPoint(ns, nm, properties)


def _properties(dataset: dict, path: str) -> dict[str, str]:
    facets = dataset.get("facets")
    if not isinstance(facets, dict) or not isinstance(facets.get(PROPERTIES_FACET), dict):
        return {}
    fpath = f"{path}.facets.{PROPERTIES_FACET}.properties"
    props = _obj(facets[PROPERTIES_FACET].get("properties", {}), fpath)
    return {k: _str(v, f"{fpath}.{k}", empty=True) for k, v in props.items()}


def _merge_tags(a: tuple[Transformation, ...], b: tuple[Transformation, ...]
                ) -> tuple[Transformation, ...]:
    if not a and len(b) < 2:
        return b  # the usual first sight of an edge: nothing to merge
    return tuple(dict.fromkeys(a + b))


def _plain_ref(d: Any, endpoints: dict[tuple[str, str], EndPoint],
               tags_seen: dict[tuple, Transformation]
               ) -> tuple[EndPointField, tuple[Transformation, ...] | None] | None:
    """`_input_ref` of a reference whose every value has the type the spec
    says, with the endpoints and tags the event's earlier references made;
    None for any other reference, which `_input_ref` reads (and names what is
    wrong in). A wide facet repeats a few datasets and tags thousands of times."""
    if type(d) is not dict:
        return None
    ns, name, field = d.get("namespace"), d.get("name"), d.get("field")
    if type(ns) is not str or type(name) is not str or type(field) is not str \
            or not ns or not name or not field:
        return None
    ep = endpoints.get((ns, name))
    if ep is None:
        ep = endpoints[(ns, name)] = EndPoint(ns, name, {})
    given = d.get("transformations")
    if given is None:
        return EndPointField(ep, field), None
    if type(given) is not list:
        return None
    tags = []
    for t in given:
        if type(t) is not dict:
            return None
        key = (t.get("type"), t.get("subtype"), t.get("description"), t.get("masking"))
        # exact types only: a key of 1 must not find the tag of True
        if type(key[0]) is not str or not (key[1] is None or type(key[1]) is str) \
                or not (key[2] is None or type(key[2]) is str) \
                or not (key[3] is None or type(key[3]) is bool):
            return None
        tag = tags_seen.get(key)
        if tag is None:
            try:
                tag = Transformation(type=key[0], subtype=key[1] or "",
                                     description=key[2] or "", masking=key[3] or False)
            except InvalidLineageError:
                return None
            tags_seen[key] = tag
        tags.append(tag)
    return EndPointField(ep, field), tuple(tags)


_Lineage = dict[EndPoint, dict[str, dict[EndPointField, tuple[Transformation, ...]]]]


def _event_lineage(ev: dict) -> tuple[_Lineage, dict[EndPoint, dict[str, str]]]:
    """The column lineage an event states: destination -> field -> source -> tags,
    and the properties of every dataset it names."""
    props: dict[EndPoint, dict[str, str]] = {}
    for side in ("inputs", "outputs"):
        for i, ds in enumerate(_list_or_none(ev.get(side), f"$.{side}")):
            p = f"$.{side}[{i}]"
            d = _obj(ds, p)
            ep = _endpoint(d.get("namespace"), d.get("name"), p, {})
            props.setdefault(ep, {}).update(_properties(d, p))

    lineage: _Lineage = {}
    endpoints: dict[tuple[str, str], EndPoint] = {}  # what `_plain_ref` made so far
    tags_seen: dict[tuple, Transformation] = {}
    for i, ds in enumerate(_list_or_none(ev.get("outputs"), "$.outputs")):
        p = f"$.outputs[{i}]"
        d = _obj(ds, p)
        facets = d.get("facets")
        if facets is None:
            continue
        facets = _obj(facets, f"{p}.facets")
        if facets.get("columnLineage") is None:
            continue
        fp = f"{p}.facets.columnLineage"
        facet = _obj(facets["columnLineage"], fp)
        dest = _endpoint(d.get("namespace"), d.get("name"), p, {})
        fields = _obj(facet.get("fields"), f"{fp}.fields")
        wide: dict[EndPointField, tuple[Transformation, ...]] = {}
        for j, ref in enumerate(_list_or_none(facet.get("dataset"), f"{fp}.dataset")):
            src, tags = _input_ref(ref, f"{fp}.dataset[{j}]")
            wide[src] = _merge_tags(wide.get(src, ()), tags or ())
        per_field = lineage.setdefault(dest, {})
        for out_name, spec in fields.items():
            sp = f"{fp}.fields.{out_name}"
            spec = _obj(spec, sp)
            legacy: tuple[Transformation, ...] = ()
            if spec.get("transformationType") is not None:
                legacy_type = _str(spec["transformationType"], f"{sp}.transformationType")
                if legacy_type.upper() in _LEGACY_TYPES:
                    legacy = (_LEGACY_TYPES[legacy_type.upper()],)
            inputs = per_field.setdefault(out_name, {})
            for k, ref in enumerate(_arr(spec.get("inputFields"), f"{sp}.inputFields")):
                plain = _plain_ref(ref, endpoints, tags_seen)
                src, tags = plain if plain is not None else \
                    _input_ref(ref, f"{sp}.inputFields[{k}]")
                inputs[src] = _merge_tags(inputs.get(src, ()),
                                          tags if tags is not None else legacy)
            for src, tags in wide.items():
                inputs[src] = _merge_tags(inputs.get(src, ()), tags)
    return lineage, props


def _build(lineage: dict[EndPoint, dict[str, dict[EndPointField, tuple[Transformation, ...]]]],
           props: dict[EndPoint, dict[str, str]]) -> FieldLineageInfo:
    reads: dict[EndPoint, set[str]] = {}
    for per_field in lineage.values():
        for inputs in per_field.values():
            for src in inputs:
                reads.setdefault(src.endpoint, set()).add(src.field)
    ops: list[Operation] = []
    read_name = {ep: f"read:{ep.namespace}:{ep.name}" for ep in reads}
    for ep in sorted(reads):
        ops.append(ReadOperation(read_name[ep], f"read {ep.namespace}:{ep.name}",
                                 EndPoint(ep.namespace, ep.name, props.get(ep)),
                                 tuple(sorted(reads[ep]))))
    # one InputField per source field, however many outputs read it
    refs: dict[EndPointField, InputField] = {}

    def ref(s: EndPointField) -> InputField:
        found = refs.get(s)
        if found is None:
            found = refs[s] = InputField(read_name[s.endpoint], s.field)
        return found
    for dest in sorted(lineage):
        writes: list[InputField] = []
        for out_name in sorted(lineage[dest]):
            inputs = lineage[dest][out_name]
            name = f"transform:{dest.namespace}:{dest.name}:{out_name}"
            order = sorted(inputs)
            # tags in input order, as TransformOperation keeps them
            tags = {ref(s): inputs[s] for s in order if inputs[s]}
            ops.append(TransformOperation.checked(name, f"columnLineage of {out_name}",
                                                  tuple(ref(s) for s in order), (out_name,),
                                                  tags))
            writes.append(InputField(name, out_name))
        ops.append(WriteOperation(f"write:{dest.namespace}:{dest.name}",
                                  f"write {dest.namespace}:{dest.name}",
                                  EndPoint(dest.namespace, dest.name, props.get(dest)),
                                  tuple(writes)))
    info = FieldLineageInfo(ops)
    if sum(len(i) for per in lineage.values() for i in per.values()) <= _SOURCE_EDGES:
        # (a wide set is merged the slow way: it would push many others out)
        _SOURCES.keep(info.checksum, (lineage, props))  # never changed after: copied to merge
    _NORMAL[info.checksum] = info.checksum  # built from facets: its own normal form
    return info


# -- transformation tags of one operation set, composed from its operations ----
#
# What export and `fll.testing` need from the operations themselves; a reader
# answers from the tags stored with each set (`fll.summaries.Summaries`), composed
# by the same rule (`fll.graph.compose_tags`).

def input_transformations(info: FieldLineageInfo, destination: EndPointField
                          ) -> dict[EndPointField, list[Transformation]]:
    """Per source field of ``destination`` (in this operation set), the distinct
    transformation tags composed along every path from its READ; ``[]`` when no
    step on any path was tagged. Linear in the graph: one pass over the field's operations."""
    return _input_transformations(info, info.incoming_operations(destination),
                                  destination.endpoint, {destination.field}
                                  ).get(destination.field, {})


def dataset_input_transformations(info: FieldLineageInfo, endpoint: EndPoint
                                  ) -> dict[str, dict[EndPointField, list[Transformation]]]:
    """`input_transformations` of every field this set writes to ``endpoint``, in
    one pass over the set: linear in its size, however wide the dataset."""
    written = info.destination_fields().get(endpoint, frozenset())
    return _input_transformations(info, info.operations, endpoint, set(written))


def _input_transformations(info: FieldLineageInfo, operations: Iterable[Operation],
                           endpoint: EndPoint, fields: set[str]
                           ) -> dict[str, dict[EndPointField, list[Transformation]]]:
    """`input_transformations` of several fields of ``endpoint`` in one pass over
    ``operations`` (topological order, every producer of the fields included), so a
    facet of n fields costs one pass, not n."""
    by_name = {op.name: op for op in info.operations}
    # operations come in topological order, so one forward pass sees every
    # producer before its consumers (no recursion, no path listing)
    per_op: dict[str, dict[EndPointField, set[tuple[Transformation, ...]]]] = {}

    def of_input(inp: InputField) -> dict[EndPointField, set[tuple[Transformation, ...]]]:
        origin = by_name[inp.origin]
        if isinstance(origin, ReadOperation):
            return {EndPointField(EndPoint(origin.source.namespace, origin.source.name),
                                  inp.name): {()}}
        return per_op.get(inp.origin, {})

    result: dict[str, dict[EndPointField, set[tuple[Transformation, ...]]]] = {}
    for op in operations:
        if isinstance(op, TransformOperation):
            acc: dict[EndPointField, set[tuple[Transformation, ...]]] = {}
            for inp in op.inputs:
                step = op.transformations.get(inp, ())
                for src, paths in of_input(inp).items():
                    acc.setdefault(src, set()).update(compose_tags(p, step) for p in paths)
            per_op[op.name] = acc
        elif isinstance(op, WriteOperation) and op.destination == endpoint:
            for inp in op.inputs:
                if inp.name in fields:
                    into = result.setdefault(inp.name, {})
                    for src, paths in of_input(inp).items():
                        into.setdefault(src, set()).update(paths)
    return {name: {src: _flatten(paths) for src, paths in per.items()}
            for name, per in result.items()}


def _flatten(paths: Iterable[tuple[Transformation, ...]]) -> list[Transformation]:
    tags: dict[Transformation, None] = {}
    for p in sorted(paths, key=lambda p: [(t.type, t.subtype, t.description, t.masking)
                                          for t in p]):
        tags.update(dict.fromkeys(p))
    return list(tags)


# -- facets from an operation set ------------------------------------------------

def _input_field_json(src: EndPointField, tags: list[Transformation]) -> dict:
    return {"namespace": src.endpoint.namespace, "name": src.endpoint.name, "field": src.field,
            "transformations": [t.to_dict() for t in tags]}


def facet_from_info(info: FieldLineageInfo, destination: EndPoint) -> dict:
    """The `ColumnLineageDatasetFacet` (1-2-0) of ``destination`` in this operation set.

    An input every output field depends on with the same tags, all of them
    dataset-wide (FILTER, JOIN, GROUP_BY, SORT), goes to the facet's `dataset`
    list, as OpenLineage puts it; ingest spreads it back over every field.
    """
    written = info.destination_fields().get(destination)
    if written is None:
        raise InvalidLineageError(f"the operation set does not write {destination}")
    # one pass for every field (per-field passes made a wide set's export quadratic)
    found = _input_transformations(info, info.operations, destination, set(written))
    per_field = {name: found.get(name, {}) for name in sorted(written)}
    wide: dict[EndPointField, list[Transformation]] = {}
    if per_field:
        first = next(iter(per_field.values()))
        for src, tags in first.items():
            if tags and all(t.type == "INDIRECT" and t.subtype in _DATASET_WIDE for t in tags) \
                    and all(f.get(src) == tags for f in per_field.values()):
                wide[src] = tags
    fields = {}
    for name, inputs in per_field.items():
        fields[name] = {"inputFields": [_input_field_json(s, inputs[s])
                                        for s in sorted(inputs) if s not in wide]}
    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": COLUMN_LINEAGE_SCHEMA_URL,
                             "fields": fields}
    if wide:
        facet["dataset"] = [_input_field_json(s, wide[s]) for s in sorted(wide)]
    return facet


def _dataset_json(ep: EndPoint, facets: dict | None = None) -> dict:
    out: dict[str, Any] = {"namespace": ep.namespace, "name": ep.name}
    all_facets = dict(facets or {})
    if ep.properties:
        all_facets[PROPERTIES_FACET] = {"_producer": PRODUCER, "_schemaURL": PROPERTIES_SCHEMA_URL,
                                        "properties": dict(ep.properties)}
    if all_facets:
        out["facets"] = all_facets
    return out


def _plain_event(info: FieldLineageInfo, start_ms: int) -> dict:
    """The event of ``info`` without run and job: what its lineage reads as."""
    return {
        "eventType": "COMPLETE",
        "eventTime": _iso(start_ms),
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA_URL,
        "inputs": [_dataset_json(ep) for ep in sorted(info.sources)],
        "outputs": [_dataset_json(ep, {"columnLineage": facet_from_info(info, ep)})
                    for ep in sorted(info.destinations)],
    }


def normal_form(info: FieldLineageInfo) -> FieldLineageInfo:
    """The operation set ingest builds from ``info``'s own column-lineage facets:
    equal to ``info`` exactly when ``info`` came from OpenLineage facets."""
    lineage, props = _info_lineage(info)
    return _build(lineage, props)


def _info_lineage(info: FieldLineageInfo) -> tuple[_Lineage, dict[EndPoint, dict[str, str]]]:
    return _event_lineage(_plain_event(info, 0))
