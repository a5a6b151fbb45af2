"""The built-in SQL transform: Spark SQL over the stage's input as a temp view.

Lineage comes from the Spark plan through `fll.spark.column_lineage` when
that module is present and works: the query is analysed a second time over an
empty relation with the input's schema, so every input field the plan names
is a field of this stage's input (not of some file further up). Otherwise
every output is recorded as computed from every input field, with a warning.
This module must never record lineage it did not get from the plan or the
fallback.
"""
from __future__ import annotations

import importlib
import os
import re
import tempfile
from typing import TYPE_CHECKING, Any

from ...errors import PipelineError
from ...model import Transformation
from ..api import (FieldTransformOperation, OperationField, Property, PropertyError,
                   StageContext, StageField, Transform, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


@register
class SQLTransform(Transform):
    """``query`` runs over the input registered as the temp view ``view``."""

    plugin_name = "sql"
    properties = (Property("query", required=True, help="Spark SQL SELECT over the view"),
                  Property("view", default="input", help="temp view name of the input"),
                  Property("indirectDependencies", "bool", default=True,
                           help="record WHERE/JOIN/GROUP BY/ORDER BY columns as INDIRECT "
                                "inputs of every output field (tagged, so readers can hide "
                                "them); false keeps only what values are computed from"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", config["view"]):
            raise PropertyError("view", f"must be a plain identifier, got {config['view']!r}")

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        assert ctx.spark is not None
        view = self.config["view"]
        df.createOrReplaceTempView(view)
        try:
            try:
                out = ctx.spark.sql(self.config["query"])
            except Exception as e:  # AnalysisException and parse errors: name the stage
                raise PipelineError(f"stage {ctx.stage!r}, property 'query': "
                                    f"{_first_line(e)}") from e
            ops = self._plan_lineage(ctx, df, out)
        finally:
            ctx.spark.catalog.dropTempView(view)
        ctx.record(ops)
        return out

    def _plan_lineage(self, ctx: StageContext, df: "DataFrame",
                      out: "DataFrame") -> list[FieldTransformOperation]:
        reason = "fll.spark.column_lineage is not available"
        try:
            module = importlib.import_module("fll.spark")
            column_lineage = module.column_lineage
        except (ImportError, AttributeError):
            column_lineage = None
        if column_lineage is not None:
            try:
                return self._from_facet(ctx, df, out, column_lineage)
            except Exception as e:  # the plan capture is optional: fall back, loudly
                reason = f"plan lineage failed ({_first_line(e)})"
        ctx.warn(f"stage {ctx.stage!r}: {reason}; recording every output field as computed "
                 f"from every input field")
        inputs = tuple(StageField(f) for f in df.columns)
        return [FieldTransformOperation(f"sql.{c}", f"Computed {c} by the stage's SQL query.",
                                        inputs, (c,)) for c in out.columns]

    def _from_facet(self, ctx: StageContext, df: "DataFrame", out: "DataFrame",
                    column_lineage: Any) -> list[FieldTransformOperation]:
        assert ctx.spark is not None
        view = self.config["view"]
        # an empty directory read with the input's schema is a relation leaf the
        # plan capture names; an in-memory relation would be anonymous
        with tempfile.TemporaryDirectory(prefix="fll-sql-probe-") as probe_dir:
            probe = ctx.spark.read.schema(df.schema).json(probe_dir)
            probe.createOrReplaceTempView(view)
            try:
                facet = column_lineage(ctx.spark.sql(self.config["query"]))
            finally:
                df.createOrReplaceTempView(view)
        fields = facet.get("fields") or {}
        mine = os.path.basename(probe_dir)

        def tagged_inputs(items: list) -> dict[str, tuple[Transformation, ...]]:
            found: dict[str, tuple[Transformation, ...]] = {}
            for item in items:
                if not str(item.get("name", "")).rstrip("/").endswith(mine):
                    continue  # another table the query reads: not this stage's input
                name = item.get("field")
                if name not in df.columns:
                    raise PipelineError(f"column lineage names field {name!r}, which is not "
                                        f"an input field")
                new = tuple(
                    Transformation(t.get("type", "DIRECT"), t.get("subtype", ""),
                                   t.get("description", ""), bool(t.get("masking", False)))
                    for t in item.get("transformations") or [])
                have = found.get(name, ())
                found[name] = have + tuple(t for t in new if t not in have)
            return found

        # dataset-wide dependencies (WHERE, JOIN, GROUP BY keys, ORDER BY) shape every
        # output field: recorded on each, INDIRECT, unless the stage turns them off
        shared: dict[str, tuple[Transformation, ...]] = {}
        if self.config["indirectDependencies"]:
            shared = {name: tuple(Transformation("INDIRECT", t.subtype, t.description,
                                                 t.masking) for t in tags)
                      or (Transformation("INDIRECT"),)
                      for name, tags in tagged_inputs(facet.get("dataset") or []).items()}
        ops = []
        for c in out.columns:
            direct = tagged_inputs(entry_inputs(fields.get(c)))
            for name, extra in shared.items():
                # the output's own column: one input, so its tags go on the one step
                if name == c and name in direct:
                    direct[name] += tuple(t for t in extra if t not in direct[name])
            ops.append(FieldTransformOperation(
                f"sql.{c}", f"Computed {c} by the stage's SQL query.",
                tuple(StageField(n) for n in direct), (c,),
                {k: v for k, v in direct.items() if v}))
            rows = {n: t for n, t in shared.items() if not (n == c and n in direct)}
            if rows:
                # a second step, so a column that is both computed from and filtered by
                # stays DIRECT on one path and INDIRECT on the other (tags on one step
                # would read as one path, and INDIRECT would win)
                row_tags = {c: (Transformation("DIRECT", "IDENTITY"),), **rows}
                ops.append(FieldTransformOperation(
                    f"sql.{c}.rows", f"Rows of {c} chosen, grouped or ordered by "
                    f"{', '.join(sorted(rows))}.",
                    (OperationField(f"sql.{c}", c), *(StageField(n) for n in rows)), (c,),
                    row_tags))
        return ops


def entry_inputs(entry: Any) -> list:
    return list((entry or {}).get("inputFields") or [])


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
