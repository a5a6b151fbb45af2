"""Recipes: parse a whole recipe, apply it to a DataFrame, turn its labels into lineage.

`Recipe.parse` checks every line before anything runs. `Recipe.compile(df)`
applies the directives as one lazy Spark plan and records, per step, the
label of every column it touched (`StepLabels`). `CompiledRecipe` turns
those labels into CDAP field operations (semantics §4): one transform per
produced column, RENAME as an identity transform, DROP as a transform
without outputs; untouched columns keep pointing at their latest producer.

This module must never run a Spark action itself while compiling (only the
few data-dependent directives do, and they say so; `run_error` runs one small
job, and only after a run failed, to name the failing value) and never write
lineage to a store: callers decide where the operations go.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, Union, cast

from ..errors import RecipeError
from ..model import (EndPoint, InputField, ReadOperation, Transformation, TransformOperation,
                     WriteOperation)
from ..opset import FieldLineageInfo
from .context import Guard, StepContext, quote
from .frame import recipe_frame
from .labels import ADD, DROP, MODIFY, READ, resolve
from .lexer import Statement, split_statements
from .parser import Args, bind
from .registry import DEFAULT_REGISTRY, DirectiveSpec, Outcome, Registry
from .support import ERROR_CODE, ERROR_MESSAGE, FAIL_MARKER, FAIL_ROW
from .variables import visible, without_variables

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["Recipe", "ParsedStep", "StepLabels", "CompiledRecipe", "FieldOperations", "Probe",
           "run_error"]


@dataclass(frozen=True)
class ParsedStep:
    """One statement bound to its directive."""

    statement: Statement
    spec: DirectiveSpec
    args: Args = field(compare=False)


@dataclass(frozen=True)
class StepLabels:
    """What one step did: the label of each column it touched, in column order.

    ``renames`` pairs old → new names; ``declared`` is the declaration as
    written by the directive (shorthands unresolved); ``columns`` are the
    columns after the step; ``actions`` counts data-dependent Spark jobs.
    """

    index: int
    line: int
    directive: str
    text: str
    labels: Mapping[str, str]
    renames: tuple[tuple[str, str], ...] = ()
    declared: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    identity: bool = False
    masking: bool = False
    actions: int = 0
    note: str = ""
    #: columns of the rows this step sends to the error output (empty: none)
    error_columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        body = " ".join(f"{c}={k}" for c, k in self.labels.items()) or "(no columns)"
        return f"line {self.line} `{self.text}`: {body}"


@dataclass(frozen=True)
class FieldOperations:
    """The transforms of one recipe stage and where each output column comes from.

    ``outputs`` maps every column of the result to the `InputField` of its
    latest producer (an operation of ``operations``, or the caller's input
    when the column was never touched) — what a WriteOperation needs.
    """

    operations: tuple[TransformOperation, ...]
    outputs: Mapping[str, InputField]
    #: the error output's columns → their producers; ``error_operations`` are the extra
    #: transforms they need (only to be recorded when the error output is written)
    error_outputs: Mapping[str, InputField] = field(default_factory=dict)
    error_operations: tuple[TransformOperation, ...] = ()


InputsSpec = Union[str, Mapping[str, InputField]]


@dataclass(frozen=True)
class Probe:
    """How a failed run names the value behind a run-time check of one recipe line.

    ``reason`` is the literal reason the check raises inside the job (``directive:
    message``), or None for `fail`, whose reason holds the condition; ``rows`` builds
    the failing rows of the step's input as one text column: the message naming the
    value (for `fail`, the whole row as JSON). Nothing runs until a run failed."""

    reason: "str | None"
    rows: "Callable[[], DataFrame]"


class CompiledRecipe:
    """A recipe applied to one DataFrame: the lazy result plus every step's labels."""

    def __init__(self, dataframe: "DataFrame", steps: Sequence[StepLabels],
                 input_columns: Sequence[str], errors: "DataFrame | None" = None,
                 probes: "Mapping[int, Sequence[Probe]] | None" = None):
        #: the result; its actions (collect, count, show, write…) raise a failure of the
        #: recipe as `run_error` words it (see `fll.directives.frame`)
        self.dataframe = recipe_frame(dataframe, self.run_error)
        self.steps = tuple(steps)
        self.input_columns = tuple(input_columns)
        self.output_columns = tuple(dataframe.columns)
        #: rows sent to the error output by send-to-error* (None: the recipe sends none)
        self.errors = errors
        #: recipe line → how to name the value that made its run-time checks fail
        self.probes = {line: tuple(p) for line, p in (probes or {}).items()}

    def run_error(self, exc: BaseException) -> RecipeError:
        """A failure of a Spark job that ran this recipe, as one line naming the recipe
        line, the directive and the offending value when it can be found (a run-time
        check such as `fail`, or the failing expression of an expression directive),
        without Java internals.

        The checks raise a literal message inside the job (a value-carrying one would
        slow every row down, see `fail_when`): here one more small job reads the first
        row of that step's input that fails the check and names its value (for `fail`,
        the whole row). If that job fails or finds no row, the literal message stays."""
        if isinstance(exc, RecipeError) and exc.line is not None:
            return exc          # already worded (an action on `dataframe` did it)
        err = run_error(exc, self.steps)
        if err.line is None:
            return err
        return RecipeError(_with_value(err.reason, self.probes.get(err.line, ())),
                           line=err.line, directive=err.directive)

    @property
    def actions(self) -> int:
        """Spark jobs started by data-dependent directives while compiling."""
        return sum(s.actions for s in self.steps)

    def explain(self) -> str:
        """One line per step: what each line did to each column."""
        return "\n".join(str(s) for s in self.steps)

    def field_operations(self, stage: str = "recipe", inputs: InputsSpec = "read",
                         filter_dependencies: bool = False) -> FieldOperations:
        """The recipe's labels as CDAP transform operations.

        ``inputs`` is either the name of the operation that produced every input
        column (e.g. a ReadOperation's name) or a mapping column → `InputField`.
        Operation names are ``<stage>.<step>.<directive>.<column>``: unique and
        deterministic. ``filter_dependencies``: off (as CDAP Wrangler), a
        filter only READs its columns and adds no dependency; on, every other
        column present after a READ-only step gets a transform taking the read
        columns as INDIRECT/FILTER inputs.
        """
        if isinstance(inputs, str):
            latest = {c: InputField(inputs, c) for c in self.input_columns}
        else:
            latest = dict(inputs)
            missing = [c for c in self.input_columns if c not in latest]
            if missing:
                raise RecipeError(f"no input field given for column(s) {missing}")
        ops: list[TransformOperation] = []
        err_ops: list[TransformOperation] = []
        err_sources: dict[str, list[InputField]] = {}
        for st in self.steps:
            prefix = f"{stage}.{st.index}.{st.directive}" if stage else \
                f"{st.index}.{st.directive}"
            where = f"line {st.line}: {st.text}"
            # inputs are the step's READ columns, exactly as labelled (a column read into
            # added ones and gone after the step, as parse-as-json's source, is READ)
            reads = [latest[c] for c, k in st.labels.items() if k == READ]
            read_tag = Transformation("DIRECT", "IDENTITY" if st.identity else "TRANSFORMATION",
                                      masking=st.masking)
            nxt = dict(latest)
            for col, kind in st.labels.items():
                if kind == ADD:
                    ops.append(TransformOperation(
                        f"{prefix}.{col}", f"ADD {col} ({where})", reads, (col,),
                        {r: (read_tag,) for r in reads}))
                    nxt[col] = InputField(f"{prefix}.{col}", col)
                elif kind == MODIFY:
                    own = latest[col]
                    tags = {r: (read_tag,) for r in reads}
                    tags[own] = (Transformation("DIRECT", "TRANSFORMATION", masking=st.masking),)
                    ops.append(TransformOperation(
                        f"{prefix}.{col}", f"MODIFY {col} ({where})", reads + [own], (col,),
                        tags))
                    nxt[col] = InputField(f"{prefix}.{col}", col)
                elif kind == DROP:
                    ops.append(TransformOperation(
                        f"{prefix}.{col}", f"DROP {col} ({where})", (latest[col],), ()))
                    nxt.pop(col, None)
            for col, kind in st.labels.items():
                if kind == READ and col not in st.columns:   # consumed by the step
                    nxt.pop(col, None)
            new_names = {n for _, n in st.renames}
            for old, _ in st.renames:
                if old not in new_names:
                    nxt.pop(old, None)
            for old, new in st.renames:
                src = latest[old]
                ops.append(TransformOperation(
                    f"{prefix}.{new}", f"RENAME {old} -> {new} ({where})", (src,), (new,),
                    {src: (Transformation("DIRECT", "IDENTITY"),)}))
                nxt[new] = InputField(f"{prefix}.{new}", new)
            if filter_dependencies and st.labels and set(st.labels.values()) == {READ}:
                for col in st.columns:
                    if col in st.labels:
                        continue
                    own = latest[col]
                    tags = {r: (Transformation("INDIRECT", "FILTER"),) for r in reads}
                    tags[own] = (Transformation("DIRECT", "IDENTITY"),)
                    ops.append(TransformOperation(
                        f"{prefix}.{col}", f"FILTER rows of {col} ({where})", reads + [own],
                        (col,), tags))
                    nxt[col] = InputField(f"{prefix}.{col}", col)
            if st.error_columns:
                for col in st.error_columns:
                    if col in (ERROR_MESSAGE, ERROR_CODE):
                        err_ops.append(TransformOperation(
                            f"{prefix}.{col}", f"ADD {col} of the error output ({where})",
                            reads, (col,), {r: (read_tag,) for r in reads}))
                        err_sources.setdefault(col, []).append(InputField(f"{prefix}.{col}",
                                                                          col))
                    else:
                        err_sources.setdefault(col, []).append(latest[col])
            latest = nxt
        outputs = {c: latest[c] for c in self.output_columns}
        err_out: dict[str, InputField] = {}
        for col, srcs in err_sources.items():
            if len(srcs) == 1:
                err_out[col] = srcs[0]
            else:   # several send-to-error lines feed one error column
                name = f"{stage}.errors.{col}" if stage else f"errors.{col}"
                err_ops.append(TransformOperation(
                    name, f"UNION {col} of the error output", tuple(srcs), (col,),
                    {s: (Transformation("DIRECT", "IDENTITY"),) for s in srcs}))
                err_out[col] = InputField(name, col)
        return FieldOperations(tuple(ops), outputs, err_out, tuple(err_ops))

    def to_lineage(self, source: EndPoint, destination: EndPoint, stage: str = "recipe",
                   filter_dependencies: bool = False) -> FieldLineageInfo:
        """read(source) → this recipe → write(destination) as one FieldLineageInfo."""
        read = ReadOperation("read", f"read {source}", source, self.input_columns)
        fo = self.field_operations(stage, read.name, filter_dependencies)
        write = WriteOperation("write", f"write {destination}", destination,
                               tuple(fo.outputs[c] for c in self.output_columns))
        return FieldLineageInfo([read, *fo.operations, write])


class Recipe:
    """A parsed recipe: every statement checked and bound to its directive."""

    def __init__(self, steps: Sequence[ParsedStep], text: str = "",
                 registry: Registry | None = None):
        self.steps = tuple(steps)
        self.text = text
        self.registry = registry or DEFAULT_REGISTRY

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def sends_errors(self) -> bool:
        """Whether a line can send rows to the error output (send-to-error, or a parser
        whose bad values are Wrangler error rows), so an ``errors`` port can get rows."""
        return any(s.spec.name in ERROR_SENDERS for s in self.steps)

    def __repr__(self) -> str:
        return f"Recipe({len(self.steps)} directives)"

    @classmethod
    def parse(cls, text: str, registry: Registry | None = None) -> "Recipe":
        """Parse and check the whole recipe; the first bad line raises `RecipeError`.

        Every line is checked before the error is raised: the error's
        ``errors`` attribute lists all of them.
        """
        reg = registry or DEFAULT_REGISTRY
        errors: list[RecipeError] = []
        steps: list[ParsedStep] = []
        try:
            statements = split_statements(text)
        except RecipeError as exc:
            exc.errors = [exc]
            raise
        for stmt in statements:
            spec = reg.get(stmt.name)
            if spec is None:
                close = reg.suggest(stmt.name)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                err = RecipeError(f"unknown directive {stmt.name!r}{hint}", line=stmt.line,
                                  column=stmt.column, directive=stmt.text,
                                  expected="a directive name: " + ", ".join(reg.names()))
                err.suggestions = close
                errors.append(err)
                continue
            try:
                steps.append(ParsedStep(stmt, spec, bind(stmt, spec.signature)))
            except RecipeError as exc:
                errors.append(exc)
        if errors:
            first = errors[0]
            if len(errors) > 1:
                first.args = (f"{first.args[0]} (and {len(errors) - 1} more bad "
                              f"line{'s' if len(errors) > 2 else ''})",)
            first.errors = errors
            raise first
        return cls(steps, text, reg)

    # -- applying -------------------------------------------------------------
    def compile(self, df: "DataFrame") -> CompiledRecipe:
        """Apply every step lazily and record its labels. Raises `RecipeError` naming the
        line of the first step that cannot apply (unknown column, bad expression…)."""
        spark = df.sparkSession
        input_columns = list(df.columns)
        if len(set(input_columns)) != len(input_columns):
            raise RecipeError(f"the input has duplicate column names: {input_columns}")
        out: list[StepLabels] = []
        errors: "DataFrame | None" = None
        probes: dict[int, list[Probe]] = {}
        for step in self.steps:
            ctx = StepContext(step.statement, spark, step.spec.usage)
            # set-variable's hidden columns are no fields: never labelled, never output
            before = visible(df.columns)
            try:
                outcome = step.spec.fn(ctx, df, step.args)
            except RecipeError as exc:
                if exc.line is None:
                    raise RecipeError(exc.reason, **ctx.where()) from exc
                raise
            except Exception as exc:  # a Spark or directive failure: name the line
                if FAIL_MARKER in str(exc):   # a check failed in the step's own job
                    probes_here = [Probe(f"{step.statement.name}: {g.message}",
                                         _guard_rows(df, g)) for g in ctx.guards]
                    reason = _with_value(run_error(exc).reason, probes_here)
                    raise RecipeError(reason, **ctx.where()) from exc
                text = str(exc).strip().splitlines()
                raise ctx.error(f"failed: {text[0] if text else type(exc).__name__}") from exc
            if not isinstance(outcome, Outcome):
                raise ctx.error(f"directive returned {type(outcome).__name__}, not an Outcome")
            line_probes = [Probe(f"{step.statement.name}: {g.message}", _guard_rows(df, g))
                           for g in ctx.guards]
            if outcome.probe is not None:
                line_probes.append(Probe(None, _whole_rows(outcome.probe)))
            if line_probes:
                probes.setdefault(step.statement.line, []).extend(line_probes)
            df = outcome.df
            after = visible(df.columns)
            resolved = resolve(outcome.labels, before, after, ctx.where())
            error_columns: tuple[str, ...] = ()
            if outcome.errors is not None:
                error_columns = tuple(visible(outcome.errors.columns))
                errors = outcome.errors if errors is None else _union_errors(errors,
                                                                           outcome.errors)
            out.append(StepLabels(
                step.statement.index, step.statement.line, step.spec.name, step.statement.text,
                resolved.labels, resolved.renames, tuple(str(d) for d in outcome.labels),
                tuple(after), outcome.identity, outcome.masking, ctx.actions, outcome.note,
                error_columns))
        if errors is not None:
            errors = without_variables(errors)
        return CompiledRecipe(without_variables(df), out, input_columns, errors, probes)

    def apply(self, df: "DataFrame") -> "DataFrame":
        """The recipe as one lazy DataFrame (see `compile` for labels)."""
        return self.compile(df).dataframe

    def labels(self, df: "DataFrame") -> tuple[StepLabels, ...]:
        """Per step (line, directive text) the label of each column it touched."""
        return self.compile(df).steps

    def field_operations(self, df: "DataFrame", stage: str = "recipe",
                         inputs: InputsSpec = "read",
                         filter_dependencies: bool = False) -> FieldOperations:
        """`CompiledRecipe.field_operations` of this recipe applied to ``df``."""
        return self.compile(df).field_operations(stage, inputs, filter_dependencies)

    def to_lineage(self, source: EndPoint, destination: EndPoint,
                   input_columns: Union[Sequence[str], "DataFrame"], stage: str = "recipe",
                   filter_dependencies: bool = False) -> FieldLineageInfo:
        """read(source) → recipe → write(destination) as a FieldLineageInfo.

        ``input_columns`` is the input DataFrame, or just its column names: then
        an empty all-string DataFrame stands in for it, which is enough for
        every directive whose output columns do not depend on the data
        (parse-as-csv, parse-as-json, split-to-columns and extract-regex-groups need
        the real data).
        """
        if isinstance(input_columns, (list, tuple)):
            df = _empty_frame(list(input_columns))
        else:  # anything but a list or tuple of names is taken to be the DataFrame
            df = cast("DataFrame", input_columns)
        return self.compile(df).to_lineage(source, destination, stage, filter_dependencies)


#: The built-in directives whose rows can go to the error output.
ERROR_SENDERS = frozenset({
    "send-to-error", "send-to-error-and-continue", "parse-as-json", "parse-as-datetime",
    "parse-as-simple-date", "parse-timestamp", "parse-as-fixed-length", "parse-as-currency",
    "format-as-currency", "format-datetime", "datetime-to-timestamp", "timestamp-to-datetime"})


def _union_errors(a: "DataFrame", b: "DataFrame") -> "DataFrame":
    """Error rows of two lines in one frame. A column whose type changed between the
    lines (set-type, parse-timestamp…) becomes text in both, so the union holds."""
    from pyspark.sql import functions as F

    types_b = {f.name: f.dataType for f in b.schema.fields}
    clash = [f.name for f in a.schema.fields
             if f.name in types_b and types_b[f.name] != f.dataType]

    def text(df: "DataFrame") -> "DataFrame":
        return df.select([F.col(quote(c)).cast("string").alias(c) if c in clash
                          else F.col(quote(c)) for c in df.columns])
    if clash:
        a, b = text(a), text(b)
    return a.unionByName(b, allowMissingColumns=True)


_SQL_FRAGMENT = re.compile(r"== SQL \(line \d+, position \d+\) ==\s*\n(.*?)\n\s*\^")
_ERROR_CLASS = re.compile(r"^\[([A-Z_.]+)\]\s*")


def run_error(exc: BaseException, steps: Sequence[StepLabels] = ()) -> RecipeError:
    """Turn a failure of a Spark job running a recipe into a one-line `RecipeError`.

    `fail` raises a message bracketed by `FAIL_MARKER`, which names its line. Spark
    quotes the SQL fragment that failed (``== SQL … ==``): the step whose text holds
    it is named. Otherwise the first line of Spark's message, without its error class
    boilerplate and JVM stack, is kept.
    """
    text = str(exc)
    if FAIL_MARKER in text:
        inner = text.split(FAIL_MARKER)[1]
        m = re.match(r"line (\d+): (.*)", inner, re.DOTALL)
        if m:
            line = int(m.group(1))
            directive = next((s.text for s in steps if s.line == line), None)
            return RecipeError(m.group(2).strip(), line=line, directive=directive)
        return RecipeError(inner.strip())
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    first = re.sub(r"\s*SQLSTATE: \w+\s*$", "", first)
    clean = _ERROR_CLASS.sub("", first)
    clean = re.sub(r"\s*(If necessary set|Use `try_|To return NULL instead).*$", "", clean)
    frag = _SQL_FRAGMENT.search(text)
    if frag:
        fragment = frag.group(1).strip()
        for st in steps:
            if fragment and fragment in st.text:
                return RecipeError(f"{st.directive}: failed at run time: {clean}",
                                   line=st.line, directive=st.text)
    return RecipeError(f"the recipe failed at run time: {clean}")


def _with_value(reason: str, probes: Sequence[Probe]) -> str:
    """A run-time check's literal reason with the failing value put in by the first
    probe that explains it (one small job), or as it was when none can."""
    for probe in probes:
        if probe.reason is None and FAIL_ROW in reason:
            head = reason[:reason.index(FAIL_ROW) + len(FAIL_ROW)]
        elif probe.reason is not None and probe.reason == reason:
            head = reason[:reason.index(": ") + 2]
        else:
            continue
        try:
            rows = probe.rows().limit(1).collect()
        except Exception:  # the probe failing too: keep the literal message
            continue
        if rows and rows[0][0] is not None:
            return head + str(rows[0][0])
    return reason


def _guard_rows(source: "DataFrame", guard: Guard) -> "Callable[[], DataFrame]":
    """The rows of a step's input that fail one of its checks, as the check's detail."""
    return lambda: source.where(guard.condition).select(guard.detail)


def _whole_rows(rows: "DataFrame") -> "Callable[[], DataFrame]":
    """Rows as one JSON object each (column order kept)."""
    def build() -> "DataFrame":
        from pyspark.sql import functions as F
        return rows.select(F.to_json(F.struct(*[F.col(quote(c)) for c in rows.columns])))
    return build


def _empty_frame(columns: list[str]) -> "DataFrame":
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StringType, StructField, StructType

    spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    schema = StructType([StructField(c, StringType()) for c in columns])
    return spark.createDataFrame([], schema)
