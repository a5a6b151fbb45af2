"""Runs a pipeline spec on Spark and records the run's field lineage.

Order of work, so that a failure never leaves half a story behind:
1. load and validate the spec (no Spark yet);
2. start (or take) a SparkSession and build every stage's DataFrame, in
   topological order; each plugin records its field operations;
3. sinks record their WRITE; the processor turns all stage operations into
   one `FieldLineageInfo` (invalid lineage fails here, before any data is
   written);
4. sinks write and report their row counts;
5. only then is the run recorded in the store (run id, start time, program
   = pipeline name).
A stage that fails raises `PipelineError` naming it, and nothing is recorded.
This module must never record lineage for a run that did not succeed.
"""
from __future__ import annotations

import os
import secrets
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import FllError, PipelineError
from ..model import EndPoint, EndPointField, Operation
from ..opset import FieldLineageInfo
from .api import Joiner, Sink, Source, StageContext, Transform
from .processor import StageLineage, process
from .spec import PipelineSpec, load_spec, parse_spec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["RunResult", "run_pipeline", "uuid7", "format_lineage"]


@dataclass
class RunResult:
    """What a successful run did."""

    pipeline: str
    run_id: str
    start_time_ms: int
    info: FieldLineageInfo
    rows_written: dict[str, int]  # sink stage -> rows
    store_url: str | None
    recorded: bool
    seconds: float
    sink_endpoints: dict[str, EndPoint] = field(default_factory=dict)

    def incoming(self, dataset: str, field_name: str,
                 namespace: str | None = None) -> frozenset[EndPointField]:
        """Source fields of ``dataset.field_name`` in this run's lineage; ``dataset``
        is a dataset's name or, for a file, its ``referenceName``."""
        for ef, srcs in self.info.incoming_summary().items():
            if dataset in (ef.endpoint.name, label(ef.endpoint)) and ef.field == field_name and (
                    namespace is None or ef.endpoint.namespace == namespace):
                return srcs
        return frozenset()


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 version 7): 48-bit ms timestamp, then random."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC variant
    return str(uuid.UUID(int=value))


def start_spark(name: str, master: str | None) -> "tuple[SparkSession, bool]":
    """A SparkSession for a run without ``spark=``, and whether we started it
    (a session already active in this process is reused and left running)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = (SparkSession.builder.master(master or "local[*]").appName(f"fll {name}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4"))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, True


def run_pipeline(spec_or_path: PipelineSpec | Mapping[str, Any] | str | os.PathLike,
                 store_url: str | None = None, run_id: str | None = None,
                 master: str | None = None, spark: "SparkSession | None" = None,
                 echo: Callable[[str], None] | None = print, *,
                 record: bool = True) -> RunResult:
    """Run the pipeline and (when ``record``) store its lineage at ``store_url``
    (default `fll.store.default_url()`). Raises `PipelineError` naming the failed
    stage, `InvalidLineageError` for lineage that does not add up; either way
    nothing is recorded."""
    say = echo or (lambda _m: None)
    if isinstance(spec_or_path, PipelineSpec):
        spec = spec_or_path
    elif isinstance(spec_or_path, Mapping):
        spec = parse_spec(spec_or_path)
    else:
        spec = load_spec(spec_or_path)
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        raise PipelineError(f"run id must be a non-empty string, got {run_id!r}")
    run_id = run_id or uuid7()
    start_ms = int(time.time() * 1000)
    t0 = time.monotonic()

    if spark is not None:
        session, own_session = spark, False
    else:
        session, own_session = start_spark(spec.name, master)
    try:
        say(f"pipeline {spec.name!r} (run {run_id}) on {session.sparkContext.master}")
        frames: dict[str, DataFrame] = {}
        contexts: dict[str, StageContext] = {}
        plugins: dict[str, Any] = {}
        total = len(spec.stages)
        for n, st in enumerate(spec.stages, 1):
            started = time.monotonic()
            ctx = StageContext(stage=st.name, plugin=st.plugin, namespace=spec.namespace,
                               pipeline=spec.name, spark=session, input_stages=st.inputs,
                               input_fields={u: tuple(frames[u].columns) for u in st.inputs},
                               base_dir=spec.base_dir, warn=lambda m: say(f"  warning: {m}"))
            contexts[st.name] = ctx
            plugin = st.plugin_class(st.properties)
            plugins[st.name] = plugin
            try:
                if isinstance(plugin, Source):
                    frames[st.name] = plugin.read(ctx)
                elif isinstance(plugin, Joiner):
                    frames[st.name] = plugin.join(ctx, {u: frames[u] for u in st.inputs})
                elif isinstance(plugin, Transform):
                    frames[st.name] = plugin.transform(ctx, _union(st.inputs, frames))
                elif isinstance(plugin, Sink):
                    frames[st.name] = _union(st.inputs, frames)
                    plugin.prepare(ctx, frames[st.name])
                else:  # pragma: no cover - spec validation rules this out
                    raise PipelineError(f"plugin {st.plugin!r} has unknown kind {st.kind!r}")
            except FllError as e:
                raise _stage_error(st.name, e) from e
            except Exception as e:
                raise PipelineError(f"stage {st.name!r} ({st.plugin}) failed: "
                                    f"{_first_line(e)}") from e
            say(f"[{n}/{total}] {st.kind:<9} {st.name} ({st.plugin}) "
                f"{len(ctx.operations)} operation(s), {time.monotonic() - started:.1f}s")

        lineage = [StageLineage(st.name, st.kind, st.inputs, tuple(contexts[st.name].operations),
                                None if st.kind == "sink" else tuple(frames[st.name].columns))
                   for st in spec.stages]
        info = process(lineage)  # before any sink writes: bad lineage writes nothing

        rows: dict[str, int] = {}
        endpoints: dict[str, EndPoint] = {}
        for st in spec.sinks:
            started = time.monotonic()
            try:
                rows[st.name] = plugins[st.name].write(contexts[st.name], frames[st.name])
            except FllError as e:
                raise _stage_error(st.name, e) from e
            except Exception as e:
                # a recipe line (fail, a failing expression) may be why the job failed
                why = next((w for w in (getattr(p, "explain_failure", lambda _e: None)(e)
                                        for p in plugins.values()) if w), None)
                raise PipelineError(f"stage {st.name!r} ({st.plugin}) failed while writing: "
                                    f"{why or _first_line(e)}") from e
            for op in contexts[st.name].operations:
                if hasattr(op, "sink"):
                    endpoints[st.name] = op.sink
            say(f"wrote {rows[st.name]} row(s) to {st.name} "
                f"in {time.monotonic() - started:.1f}s")
    finally:
        if own_session:
            session.stop()

    url = None
    recorded = False
    if record:
        from ..store import default_url, open_store

        url = store_url or default_url()
        from .plugins.files import reference_names

        with open_store(url) as store:
            prior = store.run(run_id)
            if prior is not None and prior.checksum == legacy_info(info, spec.namespace).checksum:
                # the same run recorded before file datasets were named by location:
                # its operation set stands (the aliases below join the two names)
                recorded = False
            else:
                recorded = store.record(info, run_id, start_ms, program=spec.name)
            for (ns, reference), (loc_ns, loc) in reference_names(info, spec.namespace):
                store.record_alias(ns, reference, loc_ns, loc)
    result = RunResult(spec.name, run_id, start_ms, info, rows, url, recorded,
                       time.monotonic() - t0, endpoints)
    say(summary(result))
    return result


def legacy_info(info: FieldLineageInfo, namespace: str) -> FieldLineageInfo:
    """``info`` as releases before location names recorded it: each file dataset
    named ``namespace:referenceName`` (no ``referenceName`` property). Only to
    recognise a run recorded then when it is recorded again."""
    from dataclasses import replace

    from ..model import ReadOperation, WriteOperation
    from .plugins.files import REFERENCE_NAME

    def old(ep: EndPoint, namespace: str) -> EndPoint:
        props = dict(ep.properties)
        reference = props.pop(REFERENCE_NAME, None)
        return EndPoint(namespace, reference, props) if reference else ep

    ops: list[Operation] = []
    changed = False
    for op in info.operations:
        if isinstance(op, ReadOperation) and REFERENCE_NAME in op.source.properties:
            op, changed = replace(op, source=old(op.source, namespace)), True
        elif isinstance(op, WriteOperation) and REFERENCE_NAME in op.destination.properties:
            op, changed = replace(op, destination=old(op.destination, namespace)), True
        ops.append(op)
    return FieldLineageInfo(ops) if changed else info


def _union(inputs: tuple[str, ...], frames: Mapping[str, "DataFrame"]) -> "DataFrame":
    df = frames[inputs[0]]
    for u in inputs[1:]:
        df = df.unionByName(frames[u], allowMissingColumns=True)
    return df


def _stage_error(stage: str, e: FllError) -> FllError:
    if f"stage {stage!r}" in str(e):
        return e
    return PipelineError(f"stage {stage!r}: {e}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text.splitlines()[0]}"


def format_lineage(info: FieldLineageInfo, endpoint: EndPoint | None = None, *,
                   operations: bool = False) -> list[str]:
    """Lines ``Dataset.field <- Source.field, ...`` per destination field
    (optionally followed by the field's operations)."""
    lines = []
    incoming = info.incoming_summary()
    for ef in sorted(incoming, key=lambda e: (e.endpoint.namespace, e.endpoint.name, e.field)):
        if endpoint is not None and ef.endpoint != endpoint:
            continue
        srcs = ", ".join(f"{label(s.endpoint)}.{s.field}" for s in sorted(
            incoming[ef], key=lambda s: (label(s.endpoint), s.field)))
        lines.append(f"{label(ef.endpoint)}.{ef.field} <- {srcs}")
        if operations:
            lines.extend(f"    {describe_operation(op)}" for op in info.incoming_operations(ef))
    return lines


def label(ep: EndPoint) -> str:
    """A dataset as a person names it: its ``referenceName`` when it has one (a
    file dataset, named by its location), else its name."""
    return dict(ep.properties).get("referenceName") or ep.name


def describe_operation(op: Operation) -> str:
    """One line: ``name: inputs -> outputs (description)``."""
    from ..model import ReadOperation, WriteOperation

    if isinstance(op, ReadOperation):
        flow = f"{label(op.source)} -> {', '.join(op.outputs)}"
    elif isinstance(op, WriteOperation):
        flow = f"{_inputs(op.inputs)} -> {label(op.destination)}"
    else:
        flow = f"{_inputs(op.inputs)} -> {', '.join(op.outputs) or '(dropped)'}"
    return f"{op.name}: {flow}  ({op.description})"


def summary(result: RunResult) -> str:
    """The end-of-run report: rows per sink and each sink field's lineage."""
    lines = [f"run {result.run_id} of {result.pipeline!r} succeeded in {result.seconds:.1f}s"]
    if result.store_url:
        from ..store import redact

        lines.append(f"lineage {'recorded' if result.recorded else 'already recorded'} in "
                     f"{redact(result.store_url)} (operation set {result.info.checksum})")
    for sink, n in result.rows_written.items():
        ep = result.sink_endpoints.get(sink)
        lines.append(f"sink {sink}: {n} row(s) written"
                     + (f" to {ep.namespace}:{ep.name}" if ep else "")
                     + (f" ({label(ep)})" if ep and label(ep) != ep.name else ""))
        if ep is not None:
            lines.extend(f"  {line}" for line in format_lineage(result.info, ep))
    return "\n".join(lines)


def _inputs(inputs) -> str:
    names = [i.name for i in inputs]
    # the same name from two origins (a join) is told apart by its origin
    return ", ".join(f"{i.name} (from {i.origin})" if names.count(i.name) > 1 else i.name
                     for i in inputs)
