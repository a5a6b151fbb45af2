"""Capturing one plan's column lineage: `capture`, `column_lineage`,
`to_operations` and the `Capture` they share (re-exported by `fll.spark`).

Cost: one ``toJSON()`` of the whole plan plus a handful of py4j calls per
relation leaf (see `fll.spark.plan`). Nothing here may execute the plan or
the statement: a write statement is analyzed only, never run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import BadRequest
from ..model import EndPoint
from ..opset import FieldLineageInfo
from . import plan as _plan
from .datasets import destination, is_command, resolve_leaves, write_query
from .facet import build_facet, facet_to_operations
from .lineage import walk
from .lineage_model import PlanLineage

__all__ = ["Capture", "capture", "column_lineage", "to_operations", "lineage_and_facet"]


@dataclass
class Capture:
    """The lineage of one plan.

    ``facet``: the ColumnLineageDatasetFacet dict. ``destination``:
    (namespace, name) written by an INSERT/CTAS, else None. ``inputs``:
    every (namespace, name) read. ``jvm_calls``: py4j round trips spent
    (serializing the plan included). ``tojson_seconds``/``seconds``: time
    spent getting the plan's JSON and in the whole capture; ``phases``
    splits the time further.
    """

    facet: dict[str, Any]
    destination: tuple[str, str] | None
    inputs: list[tuple[str, str]]
    lineage: PlanLineage = field(repr=False)
    jvm_calls: int = 0
    tojson_seconds: float = 0.0
    seconds: float = 0.0
    plan_nodes: int = 0
    #: seconds per phase: serialize (JVM → JSON), parse, leaves (py4j), walk (+ facet)
    phases: dict[str, float] = field(default_factory=dict)
    json_bytes: int = 0

    def to_operations(self, destination: EndPoint | tuple[str, str] | None = None,
                      sources: Mapping[tuple[str, str], EndPoint] | None = None
                      ) -> FieldLineageInfo:
        return to_operations(self, destination, sources)


def capture(target: Any, spark: Any = None) -> Capture:
    """Analyze ``target`` (DataFrame or SQL text; never executed) and map its lineage.

    Raises `fll.FllError` for a Spark Connect session or DataFrame (plan
    capture needs a classic session), `fll.BadRequest` for SQL that does not
    analyze or a statement that is neither a query nor a supported write.
    """
    start = time.perf_counter()
    analyzed = _plan.analyze(target, spark)
    root = analyzed.root
    dest = None
    if write_query(root) is not None:
        dest = destination(analyzed)
    elif is_command(analyzed):
        raise BadRequest(f"{root.cls} is a command, not a query, INSERT or CREATE TABLE AS "
                         f"SELECT: it has no column lineage", parameter="target")
    leaves_start = time.perf_counter()
    leaves = resolve_leaves(analyzed)
    walk_start = time.perf_counter()
    result, facet = lineage_and_facet(root, leaves)
    inputs = sorted({ds for found in leaves.values() for ds in found})
    end = time.perf_counter()
    return Capture(facet, dest, inputs, result, analyzed.calls.count,
                   analyzed.tojson_seconds, end - start, len(analyzed.nodes),
                   {"serialize": analyzed.tojson_seconds, "parse": analyzed.parse_seconds,
                    "leaves": walk_start - leaves_start, "walk": end - walk_start},
                   analyzed.tojson_chars)


def lineage_and_facet(root: _plan.PlanNode, leaves: Mapping[int, list[tuple[str, str]]]
             ) -> tuple[PlanLineage, dict[str, Any]]:
    """The walk and the facet of a parsed plan whose leaves are resolved: the one step
    a live capture and a listener event (`fll.spark.events`) share."""
    with _plan.gc_paused():
        result = walk(root, leaves)
        return result, build_facet(result)


def column_lineage(target: Any, spark: Any = None) -> dict[str, Any]:
    """The OpenLineage ColumnLineageDatasetFacet of a DataFrame or SQL statement.

    ``{"fields": {out: {"inputFields": [{"namespace", "name", "field",
    "transformations": [{"type", "subtype", "description", "masking"}]}]}},
    "dataset": [...]}`` plus ``_producer``/``_schemaURL``. Datasets are named
    as the OpenLineage Spark integration names them: namespace from the
    location's scheme (``file``, ``hdfs://nn:8020``, ``s3://bucket``), name
    the path; catalog tables resolve to their location.
    """
    return capture(target, spark).facet


def to_operations(facet_or_target: Any, destination: EndPoint | tuple[str, str] | None = None,
                  sources: Mapping[tuple[str, str], EndPoint] | None = None,
                  spark: Any = None) -> FieldLineageInfo:
    """A `FieldLineageInfo` for a facet, a `Capture`, a DataFrame or a SQL statement.

    Operations: one ``ReadOperation`` per input dataset (the fields read
    from it), one ``TransformOperation`` per output field (its inputs, each
    keeping its OpenLineage transformation tags), one ``WriteOperation`` to
    ``destination`` (default: the INSERT/CTAS destination of a capture).

    Whole-dataset dependencies (``dataset[]``: filters, join keys, grouping
    keys, sort keys) change which rows every output field holds, so each is
    added as an input of *every* output field's transform, tagged with its
    INDIRECT subtype. ``incoming_summary`` therefore lists them for every
    field, as CDAP does for a filter.

    ``sources`` optionally maps (namespace, name) to the `EndPoint` (with
    properties) to use for that input.
    """
    facet: Mapping[str, Any]
    if isinstance(facet_or_target, Capture):
        facet = facet_or_target.facet
        if destination is None and facet_or_target.destination is not None:
            destination = facet_or_target.destination
    elif isinstance(facet_or_target, Mapping):
        facet = facet_or_target
    else:
        cap = capture(facet_or_target, spark)
        facet = cap.facet
        if destination is None:
            destination = cap.destination
    if destination is None:
        raise BadRequest("to_operations needs a destination: pass destination=EndPoint(...) "
                         "(only an INSERT/CTAS names its own)", parameter="destination")
    if isinstance(destination, tuple) and len(destination) == 2:
        destination = EndPoint(destination[0], destination[1])
    return facet_to_operations(facet, destination, sources)
