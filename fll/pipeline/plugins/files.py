"""Built-in file sources and sinks: CSV, JSON, Parquet and text (one ``body`` field per line).

A source records one READ of every field it outputs from the dataset its
``path`` names, and a sink one WRITE of every field it receives into it. A
dataset is named by its location, as OpenLineage and `track()` name files
(`fll.names.location_name`: ``file`` + absolute path, ``hdfs://nn:8020`` +
path, ``s3://bucket`` + key, a glob by its directory), so a tracked job that
reads a pipeline's output is linked to it by name alone. ``referenceName``
(default: the stage name) is the dataset's logical name: it is kept in the
endpoint properties and the runner records ``namespace:referenceName`` as an
alias of the location (`reference_names`, OpenLineage's symlink idea).
`check_local_path` refuses a missing local input while the spec is checked.
This module must never write lineage itself: it only records operations.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..api import (FieldReadOperation, FieldWriteOperation, Property, PropertyError, Sink,
                   Source, StageContext, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from ...model import EndPoint

_REFERENCE = Property("referenceName", help="logical name of the dataset, an alias of its "
                      "location (default: stage name)")
_PATH = Property("path", required=True, help="file or directory; relative to the spec file")


def _schema_ddl(schema: Any) -> str | None:
    """A schema given as a DDL string or a list of {name, type} as Spark DDL."""
    if schema is None:
        return None
    if isinstance(schema, str):
        return schema
    parts = []
    for f in schema:
        name = str(f["name"]).replace("`", "``")
        parts.append(f"`{name}` {f.get('type', 'string')}")
    return ", ".join(parts)


def _check_schema(schema: Any) -> None:
    if schema is None or isinstance(schema, str):
        if isinstance(schema, str) and not schema.strip():
            raise PropertyError("schema", "must not be empty")
        return
    if not isinstance(schema, list) or not schema:
        raise PropertyError("schema", "must be a DDL string ('a STRING, b INT') or a list of "
                            "{name, type}")
    for i, f in enumerate(schema):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]:
            raise PropertyError("schema", f"entry #{i + 1} must be {{\"name\": ..., "
                                f"\"type\": ...}}, got {f!r}")


_GLOB = set("*?[{")


def check_local_path(config: Any, base_dir: str | None) -> None:
    """A source's local ``path`` (no scheme, or ``file:``) must exist: found with the
    rest of the spec, not minutes later when Spark reads it. Globs and remote
    paths (hdfs://, s3a://…) are left to Spark; so are relative paths of a spec
    that has no directory (a dict)."""
    import os

    path = str(config.get("path") or "")
    if path.startswith("file:"):
        path = path[5:]
        if path.startswith("//"):
            path = path[2:]
    elif "://" in path:
        return
    if not path or _GLOB & set(path):
        return
    if not os.path.isabs(path):
        if not base_dir:
            return
        path = os.path.normpath(os.path.join(base_dir, path))
    if not os.path.exists(path):
        raise PropertyError("path", f"{path} does not exist")


#: the endpoint property that keeps a file dataset's logical name
REFERENCE_NAME = "referenceName"


def file_endpoint(ctx: StageContext, config: Any, properties: dict[str, Any]) -> "EndPoint":
    """The endpoint of a file source or sink: named by its location, with its
    ``referenceName`` (default: the stage name) among its properties."""
    from ...model import EndPoint
    from ...names import location_name  # the one naming rule, shared with track()

    ns, name = location_name(str(config["path"]), ctx.base_dir)
    reference = config.get("referenceName") or ctx.stage
    props = ctx.endpoint(name, {**properties, REFERENCE_NAME: reference}).properties
    return EndPoint(ns, name, props)


def reference_names(info: Any, namespace: str) -> list[tuple[tuple[str, str],
                                                             tuple[str, str]]]:
    """``((namespace, referenceName), (location namespace, location))`` for every
    file dataset a run read or wrote: the runner records the first as an alias
    of the second, so queries find the dataset under its logical name too."""
    from ...model import ReadOperation, WriteOperation

    found: dict[tuple[tuple[str, str], tuple[str, str]], None] = {}
    for op in info.operations:
        if isinstance(op, ReadOperation):
            ep = op.source
        elif isinstance(op, WriteOperation):
            ep = op.destination
        else:
            continue
        reference = dict(ep.properties).get(REFERENCE_NAME)
        if reference and (namespace, reference) != (ep.namespace, ep.name):
            found[((namespace, reference), (ep.namespace, ep.name))] = None
    return list(found)


class FileSource(Source):
    """Reads files of ``format`` with Spark; records READ of every column."""

    format: ClassVar[str] = ""
    properties: ClassVar[tuple[Property, ...]] = (
        _PATH, _REFERENCE, Property("schema", "any", help="DDL string or list of {name, type}"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        _check_schema(config.get("schema"))

    check_local_input = staticmethod(check_local_path)

    def reader(self, ctx: StageContext):
        assert ctx.spark is not None
        r = ctx.spark.read.format(self.format)
        ddl = _schema_ddl(self.config.get("schema"))
        if ddl:
            r = r.schema(ddl)
        return r

    def endpoint_properties(self) -> dict[str, Any]:
        return {"path": self.config["path"], "format": self.format}

    def read(self, ctx: StageContext) -> "DataFrame":
        df = self.reader(ctx).load(ctx.resolve_path(self.config["path"]))
        ctx.record(FieldReadOperation(
            "READ", f"Read {self.format} file {self.config['path']}.",
            file_endpoint(ctx, self.config, self.endpoint_properties()), tuple(df.columns)))
        return df


@register
class CSVSource(FileSource):
    """CSV files; ``header`` (default true) names the columns, else ``schema``."""

    plugin_name = "csv-source"
    format = "csv"
    properties = FileSource.properties + (
        Property("header", "bool", default=True), Property("delimiter", default=","),
        Property("inferSchema", "bool", default=False))

    def reader(self, ctx: StageContext):
        return (super().reader(ctx).option("header", self.config["header"])
                .option("sep", self.config["delimiter"])
                .option("inferSchema", self.config["inferSchema"]))

    def endpoint_properties(self) -> dict[str, Any]:
        return {**super().endpoint_properties(), "header": self.config["header"],
                "delimiter": self.config["delimiter"]}


@register
class JSONSource(FileSource):
    """JSON lines (or one document per file with ``multiLine``)."""

    plugin_name = "json-source"
    format = "json"
    properties = FileSource.properties + (Property("multiLine", "bool", default=False),)

    def reader(self, ctx: StageContext):
        return super().reader(ctx).option("multiLine", self.config["multiLine"])


@register
class ParquetSource(FileSource):
    """Parquet files (the schema comes from the files)."""

    plugin_name = "parquet-source"
    format = "parquet"


@register
class TextSource(Source):
    """Each line of a text file as one field (``field``, default ``body``), as
    CDAP's File source does for schema-less files."""

    plugin_name = "text-source"
    properties = (_PATH, _REFERENCE, Property("field", default="body"))
    check_local_input = staticmethod(check_local_path)

    def read(self, ctx: StageContext) -> "DataFrame":
        assert ctx.spark is not None
        df = ctx.spark.read.text(ctx.resolve_path(self.config["path"]))
        df = df.withColumnRenamed("value", self.config["field"])
        name = self.config.get("referenceName") or ctx.stage
        ctx.record(FieldReadOperation(
            "READ", f"Read {name}.",
            file_endpoint(ctx, self.config, {"path": self.config["path"], "format": "text"}),
            (self.config["field"],)))
        return df


class FileSink(Sink):
    """Writes with Spark in ``format``; records WRITE of every column."""

    format: ClassVar[str] = ""
    properties: ClassVar[tuple[Property, ...]] = (
        _PATH, _REFERENCE,
        Property("mode", default="overwrite",
                 choices=("overwrite", "append", "ignore", "errorifexists")),
        Property("partitions", "int", help="coalesce to this many files"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        if config.get("partitions") is not None and config["partitions"] < 1:
            raise PropertyError("partitions", "must be at least 1")

    def endpoint_properties(self) -> dict[str, Any]:
        return {"path": self.config["path"], "format": self.format}

    def prepare(self, ctx: StageContext, df: "DataFrame") -> None:
        ctx.record(FieldWriteOperation(
            "WRITE", f"Write {self.format} file {self.config['path']}.",
            file_endpoint(ctx, self.config, self.endpoint_properties()), tuple(df.columns)))

    def writer(self, df: "DataFrame"):
        return df.write.format(self.format).mode(self.config["mode"])

    def write(self, ctx: StageContext, df: "DataFrame") -> int:
        if self.config.get("partitions"):
            df = df.coalesce(self.config["partitions"])
        # count and write the same cached rows: one computation, an exact count
        df = df.persist()
        try:
            rows = df.count()
            self.writer(df).save(ctx.resolve_path(self.config["path"]))
        finally:
            df.unpersist()
        return rows


@register
class CSVSink(FileSink):
    """CSV files, with a header line by default."""

    plugin_name = "csv-sink"
    format = "csv"
    properties = FileSink.properties + (Property("header", "bool", default=True),
                                        Property("delimiter", default=","))

    def writer(self, df: "DataFrame"):
        return (super().writer(df).option("header", self.config["header"])
                .option("sep", self.config["delimiter"]))


@register
class JSONSink(FileSink):
    """JSON lines."""

    plugin_name = "json-sink"
    format = "json"


@register
class ParquetSink(FileSink):
    """Parquet files."""

    plugin_name = "parquet-sink"
    format = "parquet"
