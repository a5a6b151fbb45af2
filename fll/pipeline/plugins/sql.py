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
from ..api import (FieldTransformOperation, Property, PropertyError, StageContext, StageField,
                   Transform, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


@register
class SQLTransform(Transform):
    """``query`` runs over the input registered as the temp view ``view``."""

    plugin_name = "sql"
    properties = (Property("query", required=True, help="Spark SQL SELECT over the view"),
                  Property("view", default="input", help="temp view name of the input"))

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
        ops = []
        for c in out.columns:
            entry = fields.get(c) or {}
            inputs: list[StageField] = []
            tags: dict[str, tuple[Transformation, ...]] = {}
            # dataset-wide INDIRECT dependencies (WHERE, JOIN, GROUP BY keys) are left
            # out, as CDAP leaves them out: only what a value is computed from counts
            for item in entry.get("inputFields") or []:
                if not str(item.get("name", "")).rstrip("/").endswith(
                        os.path.basename(probe_dir)):
                    continue  # another table the query reads: not this stage's input
                name = item.get("field")
                if name not in df.columns:
                    raise PipelineError(f"column lineage names field {name!r}, which is not "
                                        f"an input field")
                if StageField(name) not in inputs:
                    inputs.append(StageField(name))
                tags[name] = tags.get(name, ()) + tuple(
                    Transformation(t.get("type", "DIRECT"), t.get("subtype", ""),
                                   t.get("description", ""), bool(t.get("masking", False)))
                    for t in item.get("transformations") or [])
            ops.append(FieldTransformOperation(
                f"sql.{c}", f"Computed {c} by the stage's SQL query.", tuple(inputs), (c,),
                {k: v for k, v in tags.items() if v}))
        return ops


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
