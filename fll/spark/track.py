"""Automatic recording: one lineage run per write made inside ``with track(spark, store):``.

While the block is open, the PySpark ``DataFrameWriter`` save methods
(``save``, ``saveAsTable``, ``insertInto``, ``parquet``, ``csv``, ``json``,
``orc``, ``text``), the ``DataFrameWriterV2`` ones (``df.writeTo(t)`` then
``append``, ``create``, ``replace``, ``createOrReplace``, ``overwrite``,
``overwritePartitions``) and ``SparkSession.sql`` (for ``INSERT …`` and
``CREATE TABLE … AS SELECT``) are wrapped: the lineage of what is about to be written
is captured first (plan analysis only, `fll.spark.capture`), the write runs
unchanged, and only when it returns is one run recorded, with a fresh uuid
run id, the write's start time and the destination the write named (a path
→ its qualified location, e.g. ``("file", "/abs/path")`` as the OpenLineage
Spark integration names it; a table → its location; a V2 table → its
``location`` property, else its name, as the JVM listener names it).

This module must never change what a write does or whether it succeeds: a
write that raises records nothing and its error is re-raised untouched; a
lineage failure never fails the write (it is logged and kept on
``Tracker.errors``, or raised after the write with ``strict=True``). The
wrappers are installed on the classes only while at least one block is open
and are removed on exit, even when the block raises.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import BadRequest, FllError, InvalidLineageError
from ..model import EndPoint
from ..names import dataset_name
from ..opset import FieldLineageInfo
from .facet import build_facet
from .lineage_model import Column, PlanLineage, nothing_read
from .plan_capture import capture, to_operations

__all__ = ["track", "Tracker", "TrackedRun", "WRITER_METHODS", "WRITER_V2_METHODS"]

log = logging.getLogger(__name__)

#: DataFrameWriter methods wrapped inside a ``track`` block
WRITER_METHODS = ("save", "saveAsTable", "insertInto", "parquet", "csv", "json", "orc", "text")
#: DataFrameWriterV2 methods (``df.writeTo(table)...``) wrapped inside a ``track`` block
WRITER_V2_METHODS = ("append", "create", "replace", "createOrReplace", "overwrite",
                     "overwritePartitions")
_PATH_METHODS = frozenset({"save", "parquet", "csv", "json", "orc", "text"})

# SQL that may write: INSERT, CREATE/REPLACE … AS SELECT, or a WITH … INSERT.
# Anything else goes straight to Spark without a second analysis.
_MAYBE_WRITE = re.compile(r"^\s*\(*\s*(INSERT|CREATE|REPLACE|WITH)\b", re.IGNORECASE)
_COMMENTS = re.compile(r"(--[^\n]*\n?|/\*.*?\*/)", re.DOTALL)


@dataclass(frozen=True)
class TrackedRun:
    """One recorded run: its id, start (epoch ms), destination and operations."""

    run_id: str
    start_ms: int
    destination: EndPoint
    info: FieldLineageInfo = field(repr=False)
    method: str = ""
    #: why part of the lineage recorded is unknown (``unknown: built from an RDD
    #: (LogicalRDD)``: those fields lack those inputs), empty when all of it is known
    unknown: tuple[str, ...] = ()


@dataclass
class Tracker:
    """What one ``track`` block did: runs recorded, writes skipped (with why), errors."""

    spark: Any
    store: Any
    program: str | None
    strict: bool = False
    runs: list[TrackedRun] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def _fail(self, what: str, exc: BaseException) -> None:
        self.errors.append(exc)
        log.warning("fll.spark.track: %s: %s", what, exc)


# -- installing the wrappers -------------------------------------------------------

_LOCK = threading.RLock()
_ACTIVE: list[Tracker] = []
_ORIGINALS: dict[tuple[type, str], tuple[Callable[..., Any], bool]] = {}
_LOCAL = threading.local()  # .busy: a wrapped call is running on this thread


def _writer_class() -> type:
    from pyspark.sql.readwriter import DataFrameWriter

    return DataFrameWriter


def _writer_v2_class() -> type | None:
    try:
        from pyspark.sql.readwriter import DataFrameWriterV2
    except ImportError:  # a PySpark without the V2 writer
        return None
    return DataFrameWriterV2


def _patch(cls: type, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    key = (cls, name)
    if key in _ORIGINALS or not hasattr(cls, name):
        return
    own = name in cls.__dict__  # inherited methods are shadowed, then un-shadowed
    original = cls.__dict__[name] if own else getattr(cls, name)
    _ORIGINALS[key] = (original, own)
    setattr(cls, name, wrap(original))


def _install(session_cls: type) -> None:
    writer = _writer_class()
    for name in WRITER_METHODS:
        _patch(writer, name, functools.partial(_wrap_writer, name))
    v2 = _writer_v2_class()
    if v2 is not None:
        # the table a writer was made for is not kept by PySpark: remember it
        _patch(v2, "__init__", _wrap_v2_init)
        for name in WRITER_V2_METHODS:
            _patch(v2, name, functools.partial(_wrap_writer, name, before=_before_writer_v2))
    _patch(session_cls, "sql", _wrap_sql)


def _uninstall() -> None:
    for (cls, name), (original, own) in _ORIGINALS.items():
        if own:
            setattr(cls, name, original)
        else:
            delattr(cls, name)
    _ORIGINALS.clear()


def _tracker_for(session: Any) -> Tracker | None:
    with _LOCK:
        for t in reversed(_ACTIVE):
            if t.spark is session:
                return t
        # another Python wrapper of the same JVM session (DataFrames keep their own)
        jss = getattr(session, "_jsparkSession", None)
        for t in reversed(_ACTIVE):
            if jss is not None and getattr(t.spark, "_jsparkSession", None) is jss:
                return t
    return None


@contextmanager
def _busy() -> Iterator[bool]:
    """True when the caller is the outermost wrapped call on this thread."""
    outer = not getattr(_LOCAL, "busy", False)
    _LOCAL.busy = True
    try:
        yield outer
    finally:
        if outer:
            _LOCAL.busy = False


def _wrap_writer(name: str, original: Callable[..., Any],
                 before: Callable[..., "_Pending | None"] | None = None) -> Callable[..., Any]:
    """A writer method that records its write. ``before`` (tracker, writer, method,
    args, kwargs) says what the write will be: `_before_writer` for a
    DataFrameWriter, `_before_writer_v2` for a DataFrameWriterV2."""
    prepare = before or _before_writer

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _busy() as outer:
            tracker = _tracker_for(getattr(self, "_spark", None)) if outer else None
            if tracker is None:
                return original(self, *args, **kwargs)
            pending = prepare(tracker, self, name, args, kwargs)
            start_ms = int(time.time() * 1000)
            result = original(self, *args, **kwargs)  # a failing write records nothing
            if pending is not None:
                _after(tracker, pending, start_ms)
            return result
    return wrapper


#: the attribute a DataFrameWriterV2 made inside a block keeps its table name in
_V2_TABLE = "_fll_table"


def _wrap_v2_init(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Any, df: Any, table: str, *args: Any, **kwargs: Any) -> None:
        original(self, df, table, *args, **kwargs)
        try:
            setattr(self, _V2_TABLE, table)
        except Exception:  # never fail making a writer
            pass
    return wrapper


def _wrap_sql(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(self: Any, sqlQuery: str, *args: Any, **kwargs: Any) -> Any:
        with _busy() as outer:
            tracker = _tracker_for(self) if outer else None
            if tracker is None or not isinstance(sqlQuery, str) or \
                    not _MAYBE_WRITE.match(_COMMENTS.sub(" ", sqlQuery)):
                return original(self, sqlQuery, *args, **kwargs)
            pending = _before_sql(tracker, sqlQuery, args, kwargs)
            start_ms = int(time.time() * 1000)
            result = original(self, sqlQuery, *args, **kwargs)
            if pending is not None:
                _after(tracker, pending, start_ms)
            return result
    return wrapper


# -- before and after one write ------------------------------------------------------

@dataclass
class _Pending:
    method: str
    capture: Any  # fll.spark.Capture
    destination: tuple[str, str] | None
    resolve: Callable[[], tuple[tuple[str, str], list[str] | None]] | None = None


def _before_writer(tracker: Tracker, writer: Any, method: str, args: tuple,
                   kwargs: dict) -> _Pending | None:

    try:
        cap = capture(writer._df)
        if method in _PATH_METHODS:
            path = args[0] if args else kwargs.get("path")
            if path is None:
                path = _option(writer, "path")
            if not isinstance(path, str) or not path:
                tracker.skipped.append((f"DataFrameWriter.{method}",
                                        "the write names no path (e.g. a JDBC or custom "
                                        "sink): no destination to record"))
                return None
            return _Pending(f"DataFrameWriter.{method}", cap, _qualified(tracker.spark, path))
        table = args[0] if args else kwargs.get("name", kwargs.get("tableName"))
        positional = method == "insertInto"  # insertInto matches columns by position
        return _Pending(f"DataFrameWriter.{method}", cap, None,
                        lambda: _table(tracker.spark, str(table), positional))
    except Exception as exc:  # lineage must never stop the write
        tracker._fail(f"cannot capture the lineage of DataFrameWriter.{method}", exc)
        if tracker.strict:
            raise
        return None


def _before_writer_v2(tracker: Tracker, writer: Any, method: str, args: tuple = (),
                      kwargs: dict | None = None) -> _Pending | None:

    what = f"DataFrameWriterV2.{method}"
    table = getattr(writer, _V2_TABLE, None)
    if not isinstance(table, str):
        tracker.skipped.append((what, "the writer was made (df.writeTo) before the track "
                                      "block opened: its table is not known"))
        return None
    try:
        cap = capture(writer._df)
    except Exception as exc:  # lineage must never stop the write
        tracker._fail(f"cannot capture the lineage of {what}", exc)
        if tracker.strict:
            raise
        return None
    return _Pending(what, cap, None, lambda: (_v2_table(tracker.spark, table), None))


def _before_sql(tracker: Tracker, sql: str, args: tuple, kwargs: dict) -> _Pending | None:

    if args or kwargs:
        # parameters and {df} references are bound by PySpark at run time; the
        # text alone would analyze differently
        tracker.skipped.append(("SparkSession.sql", "a parameterized statement is not "
                                                    "captured"))
        return None
    try:
        cap = capture(sql, tracker.spark)
    except BadRequest:
        return None  # a command (CREATE TABLE without AS, …) or bad SQL: Spark says why
    except Exception as exc:
        tracker._fail("cannot capture the lineage of a SQL statement", exc)
        if tracker.strict:
            raise
        return None
    if cap.destination is None:
        return None  # a query, not a write
    return _Pending("SparkSession.sql", cap, cap.destination)


def _after(tracker: Tracker, pending: _Pending, start_ms: int) -> None:

    try:
        cap, destination = pending.capture, pending.destination
        if pending.resolve is not None:
            destination, names = pending.resolve()
            if names is not None and len(names) == len(cap.lineage.columns):
                cap.facet = build_facet(PlanLineage(
                    [Column(c.expr_id, n, c.lineage)
                     for c, n in zip(cap.lineage.columns, names, strict=True)],
                    cap.lineage.dataset, cap.lineage.unknown))
        assert destination is not None
        if not cap.inputs:
            # an RDD's rows come from somewhere the plan does not say: "unknown: …",
            # not the "reads no dataset" of rows the job made itself
            tracker.skipped.append((pending.method,
                                    f"{nothing_read(cap.lineage)}: nothing to record"))
            return
        info = to_operations(cap, EndPoint(*destination))
        run_id = str(uuid.uuid4())
        tracker.store.record(info, run_id, start_ms, tracker.program)
        unknown = tuple(cap.lineage.unknown)
        if unknown:
            log.warning("fll.spark.track: %s to %s recorded with part of its lineage "
                        "unknown: %s", pending.method, destination, "; ".join(unknown))
        tracker.runs.append(TrackedRun(run_id, start_ms, EndPoint(*destination), info,
                                       pending.method, unknown))
    except Exception as exc:
        tracker._fail(f"cannot record the lineage of {pending.method}", exc)
        if tracker.strict:
            raise


def _option(writer: Any, key: str) -> str | None:
    try:
        opt = writer._jwrite.extraOptions().get(key)
        return str(opt.get()) if opt.isDefined() else None
    except Exception:
        return None


def _qualified(spark: Any, path: str) -> tuple[str, str]:
    """The dataset a path names, qualified the way Hadoop (and so Spark) resolves it."""
    from py4j.java_gateway import JavaClass

    jpath_cls = JavaClass("org.apache.hadoop.fs.Path", spark._jvm._gateway_client)
    jpath = jpath_cls(path)
    fs = jpath.getFileSystem(spark._jsc.hadoopConfiguration())
    return dataset_name(str(fs.makeQualified(jpath).toString()))


def _table(spark: Any, name: str, positional: bool) -> tuple[tuple[str, str], list[str] | None]:
    """A written table's dataset (its location) and, for positional inserts, its columns."""
    import json

    state = spark._jsparkSession.sessionState()
    try:
        ident = state.sqlParser().parseTableIdentifier(name)
        meta = state.catalog().getTableMetadata(ident)
    except Exception:
        # not in the session catalog (a V2 catalog table): named by what the user wrote
        return ("spark", name), None
    names = None
    if positional:
        names = [f["name"] for f in json.loads(meta.schema().json())["fields"]]
    return dataset_name(str(meta.location().toString())), names


def _v2_table(spark: Any, name: str) -> tuple[str, str]:
    """The dataset a table written through ``writeTo`` is, read after the write (a created
    table exists then): what reading it reads, so its location (a session catalog
    table, a V2 table with a ``location`` property) or the V2 table's name, the way
    the listener names the destination of the same write."""

    inputs = capture(spark.table(name)).inputs
    if len(inputs) != 1:
        raise FllError(f"the table {name!r} written by writeTo reads as {len(inputs)} "
                       f"datasets, not one: its destination is not known")
    return inputs[0]


# -- the public entry point ----------------------------------------------------------

@contextmanager
def track(spark: Any, store: Any, program: str | None = None, *,
          strict: bool = False) -> Iterator[Tracker]:
    """Record one lineage run per write made through ``spark`` inside the block.

    ``store``: a `fll.LineageStore` or a store URL (opened here and closed on
    exit). ``program``: recorded with each run (default: the Spark app name).
    ``strict``: raise lineage failures after the write instead of logging them.
    Yields a `Tracker` listing the runs recorded and the writes skipped.
    Writes made by other threads through the same session while the block is
    open are recorded too.
    """
    if getattr(spark, "_jsparkSession", None) is None:
        raise FllError("track needs a classic SparkSession: plan capture reads the JVM plan, "
                       "which a Spark Connect session does not expose")
    own_store = isinstance(store, str)
    if own_store:
        from .. import open_store

        store = open_store(store)
    elif not hasattr(store, "record"):
        raise InvalidLineageError(f"store must be a LineageStore or a store URL, "
                                  f"got {type(store).__name__}")
    if program is None:
        program = str(spark.sparkContext.appName)
    tracker = Tracker(spark, store, program, strict)
    with _LOCK:
        if not _ACTIVE:
            _install(type(spark))
        elif (type(spark), "sql") not in _ORIGINALS:
            _install(type(spark))
        _ACTIVE.append(tracker)
    try:
        yield tracker
    finally:
        with _LOCK:
            _ACTIVE.remove(tracker)
            if not _ACTIVE:
                _uninstall()
        if own_store:
            store.close()
