"""Built-in transforms: projection (keep/drop/rename), CSV parser, Python function.

Each records precise field operations: one operation per produced field, so
a field depends only on what it was computed from. This module must never
record all-to-all lineage where it knows better.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...errors import PipelineError
from ..api import (FieldTransformOperation, Property, PropertyError, StageContext, StageField,
                   Transform, load_object, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def _names(config: dict, prop: str) -> list[str]:
    value = config.get(prop)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PropertyError(prop, f"must be a list of field names, got {value!r}")
    return value


def _missing(ctx: StageContext, df: "DataFrame", fields: list[str], prop: str) -> None:
    absent = [f for f in fields if f not in df.columns]
    if absent:
        raise PipelineError(f"stage {ctx.stage!r}, property {prop!r}: field(s) "
                            f"{', '.join(map(repr, absent))} not in the input (fields: "
                            f"{', '.join(df.columns)})")


@register
class Projection(Transform):
    """Keep or drop fields, then rename (CDAP's Projection)."""

    plugin_name = "projection"
    properties = (Property("keep", "list", help="fields to keep (all others are dropped)"),
                  Property("drop", "list", help="fields to drop"),
                  Property("rename", "dict", help="old name -> new name"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        keep, drop = _names(config, "keep"), _names(config, "drop")
        if keep and drop:
            raise PropertyError("drop", "give either 'keep' or 'drop', not both")
        rename = config.get("rename") or {}
        for old, new in rename.items():
            if not isinstance(new, str) or not new:
                raise PropertyError("rename", f"new name for {old!r} must be a non-empty "
                                    f"string, got {new!r}")
        targets = list(rename.values())
        dup = {t for t in targets if targets.count(t) > 1}
        if dup:
            raise PropertyError("rename", f"several fields renamed to {sorted(dup)[0]!r}")
        if not (keep or drop or rename):
            raise PropertyError("keep", "give at least one of 'keep', 'drop' or 'rename'")

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        keep, drop = _names(self.config, "keep"), _names(self.config, "drop")
        rename: dict[str, str] = dict(self.config.get("rename") or {})
        _missing(ctx, df, keep, "keep")
        _missing(ctx, df, drop, "drop")
        dropped = [c for c in df.columns if c not in keep] if keep else drop
        _missing(ctx, df.drop(*dropped), list(rename), "rename")
        if dropped:
            ctx.record(FieldTransformOperation("drop", f"Dropped {', '.join(dropped)}.",
                                               tuple(StageField(f) for f in dropped), ()))
        # StageField inputs: renames apply at once, so swapping a <-> b stays right
        ctx.record(FieldTransformOperation(f"rename.{old}", f"Renamed {old} to {new}.",
                                           (StageField(old),), (new,))
                   for old, new in rename.items())
        out = df.drop(*dropped)
        from pyspark.sql import functions as F

        return out.select(*[F.col(_q(c)).alias(rename.get(c, c)) for c in out.columns])


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@register
class CSVParser(Transform):
    """Parses the CSV text in ``field`` into ``columns`` (all strings), as
    CDAP's CSVParser does; one PARSE operation per produced column."""

    plugin_name = "csv-parser"
    properties = (Property("field", default="body"),
                  Property("columns", "list", required=True, help="names of the parsed fields"),
                  Property("delimiter", default=","),
                  Property("keepField", "bool", default=False,
                           help="keep the parsed field in the output"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        cols = _names(config, "columns")
        if not cols:
            raise PropertyError("columns", "must name at least one field")
        dup = {c for c in cols if cols.count(c) > 1}
        if dup:
            raise PropertyError("columns", f"field {sorted(dup)[0]!r} is listed twice")
        if len(config["delimiter"]) != 1:
            raise PropertyError("delimiter", "must be one character")

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        from pyspark.sql import functions as F

        src, cols = self.config["field"], list(self.config["columns"])
        _missing(ctx, df, [src], "field")
        ddl = ", ".join(f"{_q(c)} STRING" for c in cols)
        parsed = F.from_csv(F.col(_q(src)), ddl, {"sep": self.config["delimiter"]})
        keep = [c for c in df.columns if c not in cols and (c != src or self.config["keepField"])]
        out = df.select(*[F.col(_q(c)) for c in keep], parsed.alias("__fll_parsed"))
        out = out.select(*[F.col(_q(c)) for c in keep],
                         *[F.col("__fll_parsed").getItem(c).alias(c) for c in cols])
        ctx.record(FieldTransformOperation(f"PARSE.{c}", f"Parse the {src} field into {c}.",
                                           (src,), (c,)) for c in cols)
        return out


def _declared_operations(value: Any) -> list[FieldTransformOperation]:
    ops = []
    for i, d in enumerate(value or []):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            raise PropertyError("operations", f"entry #{i + 1} needs a 'name'")
        extra = set(d) - {"name", "description", "inputs", "outputs"}
        if extra:
            raise PropertyError("operations", f"entry {d['name']!r} has unknown key(s) "
                                f"{', '.join(sorted(extra))}")
        for key in ("inputs", "outputs"):
            v = d.get(key, [])
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise PropertyError("operations", f"entry {d['name']!r}: {key!r} must be a "
                                    f"list of field names")
        name: str = d["name"]  # checked above
        ops.append(FieldTransformOperation(name, d.get("description", name),
                                           tuple(d.get("inputs", [])),
                                           tuple(d.get("outputs", []))))
    return ops


def _ship_module(ctx: StageContext, fn: Any) -> None:
    """Send the user's module file to the executors: UDFs it defines are
    pickled by reference, and an executor's Python worker (local or on a
    cluster) only sees installed packages, not the driver's ``sys.path``."""
    import sys

    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py") or os.path.basename(path) == "__init__.py":
        return  # a package: it must be installed where the executors run
    installed = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    fll_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.abspath(path)
    if any(path.startswith(p + os.sep) for p in installed + [fll_dir]):
        return
    if ctx.spark is None:
        return
    sc = ctx.spark.sparkContext
    shipped = _SHIPPED.setdefault(str(sc.applicationId), set())
    if path not in shipped:
        sc.addPyFile(path)
        shipped.add(path)


_SHIPPED: dict[str, set[str]] = {}  # application id -> files sent


@register
class PythonTransform(Transform):
    """Calls ``function`` (``module:name``), a function DataFrame -> DataFrame.

    Lineage: the declared ``operations`` (CDAP field operations on plain
    names) if given; otherwise fields kept by name pass through and every new
    field is recorded as computed from every input field, with a warning.
    """

    plugin_name = "python"
    properties = (Property("function", required=True, help="module:function, df -> df"),
                  Property("operations", "list", help="declared field operations"),
                  Property("arguments", "dict", default={}, help="keyword arguments"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        fn = config["function"]
        if ":" not in fn and "." not in fn:
            raise PropertyError("function", f"must be a dotted path module:function, got {fn!r}")
        _declared_operations(config.get("operations"))

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        fn = load_object(self.config["function"], f"stage {ctx.stage!r}: function")
        if not callable(fn):
            raise PipelineError(f"stage {ctx.stage!r}, property 'function': "
                                f"{self.config['function']!r} is not callable")
        _ship_module(ctx, fn)
        out = fn(df, **(self.config.get("arguments") or {}))
        from pyspark.sql import DataFrame

        if not isinstance(out, DataFrame):
            raise PipelineError(f"stage {ctx.stage!r}: function {self.config['function']!r} "
                                f"returned {type(out).__name__}, not a DataFrame")
        declared = _declared_operations(self.config.get("operations"))
        if declared:
            ctx.record(declared)
            return out
        new = [c for c in out.columns if c not in df.columns]
        if new:
            ctx.warn(f"stage {ctx.stage!r}: no declared operations; recording "
                     f"{', '.join(new)} as computed from every input field")
            ctx.record(FieldTransformOperation(
                f"compute.{c}", f"Computed {c} with {self.config['function']}.",
                tuple(StageField(f) for f in df.columns), (c,)) for c in new)
        return out
