"""Column lineage of any PySpark job, read from its analyzed logical plan.

``column_lineage(target)`` returns an OpenLineage ColumnLineageDatasetFacet
for a DataFrame, a SQL query, or an ``INSERT INTO … SELECT`` / ``CREATE
TABLE … AS SELECT`` statement; ``capture(target)`` also gives the
destination and inputs; ``to_operations(...)`` turns either into a
`FieldLineageInfo` for the store; ``with track(spark, store):`` records one
run per write made inside the block (`fll.spark.track`).

Cost: one ``toJSON()`` of the whole plan plus a handful of py4j calls per
relation leaf (see `fll.spark.plan`). Nothing here may execute the plan or
the statement: a write statement is analyzed only, never run.
"""
from __future__ import annotations

from .plan_capture import Capture, capture, column_lineage, to_operations
from .track import TrackedRun, Tracker, track

__all__ = ["column_lineage", "capture", "to_operations", "Capture", "track", "Tracker",
           "TrackedRun"]
