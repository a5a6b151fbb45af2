"""OpenLineage ``ColumnLineageDatasetFacet`` dicts and their CDAP operations.

Builds the facet (spec 1-2-0: ``fields.<out>.inputFields[]`` and the
top-level ``dataset[]``) from a `PlanLineage`, and turns a facet into a
`FieldLineageInfo` with one transform per output field so Spark-captured
lineage lands in the same store as every other producer.

This module must never call Spark; its output must be deterministic (sorted
fields, inputs and tags) so the same plan always gives the same checksum.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..errors import BadRequest, InvalidLineageError
from ..model import (EndPoint, InputField, ReadOperation, Transformation, TransformOperation,
                     WriteOperation)
from ..openlineage import PRODUCER
from ..opset import FieldLineageInfo
from .lineage_model import UNKNOWN, PlanLineage, Source, Tag, unknown_reasons

__all__ = ["PRODUCER", "SCHEMA_URL", "build_facet", "facet_to_operations"]

SCHEMA_URL = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"

_TYPE_ORDER = {"DIRECT": 0, "INDIRECT": 1}
_SUBTYPE_ORDER = {s: i for i, s in enumerate(Transformation.SUBTYPES)}


def _tag_key(tag: Tag) -> tuple:
    return (_TYPE_ORDER.get(tag[0], 9), _SUBTYPE_ORDER.get(tag[1], 99), tag[1], tag[2])


def _tag_dict(tag: Tag) -> dict[str, Any]:
    return {"type": tag[0], "subtype": tag[1], "description": "", "masking": tag[2]}


def _input_fields(lineage: Mapping[Source, Iterable[Tag]]) -> list[dict[str, Any]]:
    return [{"namespace": ns, "name": name, "field": fld,
             "transformations": [_tag_dict(t) for t in sorted(tags, key=_tag_key)]}
            for (ns, name, fld), tags in sorted(lineage.items())]


def build_facet(result: PlanLineage) -> dict[str, Any]:
    """The ColumnLineageDatasetFacet of one plan. Output columns that share a
    name (``SELECT a.id, b.id``) are merged, as the facet is keyed by name.

    A field whose lineage is partly unknown (built from an RDD, through a plan
    node fll does not understand) gets a ``reason`` string next to its
    ``inputFields`` (the facet's fields allow extra properties): ``"unknown: built
    from an RDD (LogicalRDD)"``, several joined by ``"; "``. An unknown
    whole-dataset dependency shapes every field's rows, so every field says so.
    """
    by_name: dict[str, dict[Source, set[Tag]]] = {}
    for col in result.columns:
        acc = by_name.setdefault(col.name, {})
        for src, tags in col.lineage.items():
            acc.setdefault(src, set()).update(tags)
    if not result.unknown:
        return {
            "_producer": PRODUCER,
            "_schemaURL": SCHEMA_URL,
            "fields": {name: {"inputFields": _input_fields(lineage)}
                       for name, lineage in by_name.items()},
            "dataset": _input_fields(result.dataset),
        }
    everywhere = unknown_reasons(result.dataset)
    fields: dict[str, Any] = {}
    for name, lineage in by_name.items():
        reasons = sorted(set(unknown_reasons(lineage)).union(everywhere))
        spec: dict[str, Any] = {"inputFields": _input_fields(
            {src: tags for src, tags in lineage.items() if src[0] != UNKNOWN})}
        if reasons:
            spec["reason"] = "; ".join(reasons)
        fields[name] = spec
    return {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_URL,
        "fields": fields,
        "dataset": _input_fields({src: tags for src, tags in result.dataset.items()
                                  if src[0] != UNKNOWN}),
    }


# ---------------------------------------------------------------------------
# facet → FieldLineageInfo
# ---------------------------------------------------------------------------

def _tags(raw: Any, where: str) -> tuple[Transformation, ...]:
    out = []
    for t in raw or []:
        if not isinstance(t, Mapping) or "type" not in t:
            raise InvalidLineageError(f"{where}: a transformation needs a 'type'")
        out.append(Transformation(str(t["type"]), str(t.get("subtype") or ""),
                                  str(t.get("description") or ""), bool(t.get("masking", False))))
    return tuple(out)


def _check_input(item: Any, where: str) -> tuple[str, str, str]:
    if not isinstance(item, Mapping) or not all(
            isinstance(item.get(k), str) and item.get(k) for k in ("namespace", "name", "field")):
        raise InvalidLineageError(f"{where}: an input field needs non-empty 'namespace', "
                                  f"'name' and 'field' strings, got {item!r}")
    return item["namespace"], item["name"], item["field"]


def facet_to_operations(facet: Mapping[str, Any], destination: EndPoint,
                        sources: Mapping[tuple[str, str], EndPoint] | None = None
                        ) -> FieldLineageInfo:
    """See `fll.spark.to_operations`."""
    if not isinstance(destination, EndPoint):
        raise BadRequest("destination must be an EndPoint or a (namespace, name) pair",
                         parameter="destination")
    fields = facet.get("fields") if isinstance(facet, Mapping) else None
    if not isinstance(fields, Mapping):
        raise InvalidLineageError("the facet has no 'fields' object")
    sources = dict(sources or {})

    # per output field: its inputs (source column → tags), dataset deps folded in
    per_field: dict[str, dict[tuple[str, str, str], list[Transformation]]] = {}
    for out, spec in fields.items():
        where = f"facet field {out!r}"
        inputs = spec.get("inputFields") if isinstance(spec, Mapping) else None
        if not isinstance(inputs, list):
            raise InvalidLineageError(f"{where}: 'inputFields' must be a list")
        acc = per_field.setdefault(str(out), {})
        for item in inputs:
            key = _check_input(item, where)
            acc.setdefault(key, []).extend(_tags(item.get("transformations"), where))
    shared: dict[tuple[str, str, str], list[Transformation]] = {}
    for item in facet.get("dataset") or []:
        key = _check_input(item, "facet dataset")
        tags = [t for t in _tags(item.get("transformations"), "facet dataset")]
        # a whole-dataset dependency is INDIRECT by nature, whatever it was tagged
        shared.setdefault(key, []).extend(
            tags or [Transformation("INDIRECT", "FILTER")])
    for acc in per_field.values():
        for key, tags in shared.items():
            acc.setdefault(key, []).extend(tags)

    read_fields: dict[tuple[str, str], set[str]] = {}
    for acc in per_field.values():
        for ns, name, fld in acc:
            read_fields.setdefault((ns, name), set()).add(fld)
    read_names = {ds: f"spark.read {ds[0]}:{ds[1]}" for ds in read_fields}
    ops: list = []
    for ds in sorted(read_fields):
        source = sources.get(ds) or EndPoint(ds[0], ds[1])
        ops.append(ReadOperation(read_names[ds], f"read {ds[0]}:{ds[1]}", source,
                                 tuple(sorted(read_fields[ds]))))
    written = []
    for out in sorted(per_field):
        acc = per_field[out]
        inputs = [InputField(read_names[(ns, name)], fld) for ns, name, fld in sorted(acc)]
        op_tags = {InputField(read_names[(ns, name)], fld): tuple(dict.fromkeys(ts))
                   for (ns, name, fld), ts in acc.items()}
        op_name = f"spark.transform {out}"
        ops.append(TransformOperation(op_name, f"compute {out}", tuple(inputs), (out,), op_tags))
        written.append(InputField(op_name, out))
    ops.append(WriteOperation("spark.write", f"write {destination}", destination,
                              tuple(written)))
    return FieldLineageInfo(ops)
