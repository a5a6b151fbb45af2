"""Small Spark helpers shared by the directive families (`fll.directives.families`).

They place a column (in place or appended), turn a bad value into a run-time
error that names the recipe line, and ask the session's JVM whether a Java
zone id or date pattern is valid, so those are refused before anything runs.
Helpers here build Column expressions only: they must never run a Spark job.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from pyspark.sql import functions as F

from . import labels as L
from .context import StepContext, quote
from .registry import Outcome

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["put", "put_all", "append_all", "modify", "fail_when", "error_rows", "check_zone",
           "check_datetime_pattern", "is_type", "is_string", "as_text", "java_split",
           "require_string", "string_of", "null_value", "session_zone", "java_message",
           "parse_check", "FAIL_MARKER", "FAIL_ROW", "FAIL_ROW_UNREAD", "ERROR_MESSAGE",
           "ERROR_CODE"]


def parse_check(parse: Callable[[str], object]) -> Callable[[str], str | None]:
    """A parse-time argument check made from the parser the directive runs with:
    the parser's ``ValueError`` message, or None when the argument parses."""
    def check(value: str) -> str | None:
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None
    return check


def put(df: "DataFrame", name: str, value: "Column") -> "DataFrame":
    """Set column ``name`` to ``value`` in place (keeps its position), or append it."""
    if name in df.columns:
        return df.select([value.alias(c) if c == name else F.col(quote(c)) for c in df.columns])
    return df.select([F.col(quote(c)) for c in df.columns] + [value.alias(name)])


def put_all(df: "DataFrame", new: list[tuple[str, "Column"]]) -> "DataFrame":
    """Set several columns: existing ones in place, new ones appended in the given order."""
    values = dict(new)
    kept = [values.pop(c).alias(c) if c in values else F.col(quote(c)) for c in df.columns]
    return df.select(kept + [v.alias(n) for n, v in new if n in values])


def fail_when(step: StepContext, condition: "Column", value: "Column",
              message: "str | Column", detail: "Column | None" = None) -> "Column":
    """``value``, except that a row meeting ``condition`` stops the run with one line
    naming the recipe line, the directive and ``message``.

    The message raised inside the job is a literal: an expression that builds it from
    the row's values lands in every row's generated code and, past a few such guards,
    pushes the fused stage's method beyond the 8,000 bytes HotSpot compiles, so the
    whole stage runs interpreted. ``detail``, a text Column naming the failing value
    (the message as the user should read it), is never evaluated in the job: after a
    run failed, `CompiledRecipe.run_error` evaluates it on the first row of the step's
    input that meets ``condition`` (one small job) and puts it in the error. A Column
    ``message`` is taken as the ``detail`` of a generic literal."""
    if not isinstance(message, str):
        detail, message = message, "a value stops the run"
    step.guard(condition, message, detail)
    text = F.lit(f"{FAIL_MARKER}line {step.line}: {step.statement.name}: {message}{FAIL_MARKER}")
    return F.when(condition, F.raise_error(text)).otherwise(value)


def null_value(column: str, kinds: str = "'String'") -> str:
    """Wrangler's message for a null value a directive cannot take (the text its
    directives throw as a DirectiveExecutionException)."""
    return f"Column '{column}' has null value. It should be a non-null {kinds}."


def string_of(value: "Column") -> "Column":
    """A value as text for an error message (null shows as ``null``)."""
    return F.coalesce(value.cast("string"), F.lit("null"))


def is_type(df: "DataFrame", name: str, *type_names: str) -> bool:
    return df.schema[name].dataType.typeName() in type_names


def _jvm(step: StepContext):
    return getattr(step.spark, "_jvm", None)


def check_zone(step: StepContext, zone: str) -> str:
    """The zone id if Java's ZoneId accepts it (Wrangler's rule), else a RecipeError."""
    jvm = _jvm(step)
    if jvm is None:                      # Spark Connect: fall back to the IANA list
        import zoneinfo
        if zone in zoneinfo.available_timezones() or re.fullmatch(
                r"(UTC|GMT|UT)?([+-]\d{1,2}(:?\d{2})?)?|Z", zone):
            return zone
        raise step.error(f"zone {zone!r} is invalid")
    try:
        jvm.java.time.ZoneId.of(zone)
    except Exception:
        raise step.error(f"zone {zone!r} is invalid") from None
    return zone


# Spark 3+ refuses week-based letters and a few others in its datetime patterns
# (DateTimeFormatterHelper); Java accepts them, so both rules are applied.
_SPARK_REFUSED = set("YWwuec") | set("AnNp")


def check_datetime_pattern(step: StepContext, pattern: str) -> str:
    """Refuse a pattern Java's DateTimeFormatter or Spark's datetime parser refuses."""
    if not pattern:
        raise step.error("the datetime pattern is empty")
    letters = set(re.sub(r"'[^']*'", "", pattern))
    refused = sorted(letters & _SPARK_REFUSED)
    if refused:
        raise step.error(f"datetime pattern {pattern!r}: Spark does not support the "
                         f"letter(s) {''.join(refused)}")
    jvm = _jvm(step)
    if jvm is not None:
        try:
            jvm.java.time.format.DateTimeFormatter.ofPattern(pattern)
        except Exception as exc:
            reason = java_message(exc)
            raise step.error(f"datetime pattern {pattern!r} is invalid: {reason}") from None
    return pattern


def java_message(exc: BaseException) -> str:
    """The Java exception's own message (no Py4J wrapping or stack trace)."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.getMessage())
        except Exception:  # the gateway may be gone; fall back to the text
            pass
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


#: Brackets a run-time failure message inside Spark's exception text so the recipe
#: runner can find the recipe line again (the same marker the `fail` directive uses).
FAIL_MARKER = "\u2983fll\u2984"

#: Column names of the recipe's error output (as Wrangler's error collector has them).
ERROR_MESSAGE, ERROR_CODE = "errMsg", "errCode"


def error_rows(step: StepContext, df: "DataFrame", bad: "Column", message: "Column | str",
               code: int) -> tuple["DataFrame", dict]:
    """Take the rows where ``bad`` holds out of ``df``, as Wrangler's ErrorRowException
    sends them to the error collector: errMsg is ``<message> (ecode: <code>, directive:
    <name>)`` and errCode ``code``, so ``message`` and ``code`` should be the ones the
    directive's Wrangler class throws (its text, capitals and all).

    Returns the kept rows and the keyword arguments for `Outcome`: the rows go to the
    recipe's error output (``Outcome.errors``) with errMsg and errCode. The message may
    carry the row's values: the error rows are a plan of their own, read only when the
    error output is written, so it costs the main output nothing.
    """
    bad = F.coalesce(bad, F.lit(False))
    msg = F.lit(message) if isinstance(message, str) else message
    # ErrorRowException(directive, message, code) words it "message (ecode: code,
    # directive: name)", and that is the errMsg Wrangler's error collector gets
    suffix = F.lit(f" (ecode: {code}, directive: {step.statement.name})")
    errors = df.where(bad).select(*[F.col(quote(c)) for c in df.columns],
                                  F.concat(msg, suffix).alias(ERROR_MESSAGE),
                                  F.lit(code).alias(ERROR_CODE))
    return df.where(~bad), {"errors": errors}


def session_zone(step: StepContext) -> str:
    return str(step.spark.conf.get("spark.sql.session.timeZone"))


def append_all(df: "DataFrame", new: list[tuple[str, "Column"]]) -> "DataFrame":
    """Set several columns, all at the end: existing ones move there, in the given order."""
    names = [n for n, _ in new]
    keep = [F.col(quote(c)) for c in df.columns if c not in names]
    return df.select(keep + [v.alias(n) for n, v in new])


def is_string(df: "DataFrame", name: str) -> bool:
    return df.schema[name].dataType.typeName() == "string"


def as_text(df: "DataFrame", name: str, value: "Column") -> "Column":
    """A column's values as text (Wrangler's toString of a value)."""
    return value if is_string(df, name) else value.cast("string")


def java_split(value: "Column", regex: str) -> "Column":
    """Java's ``String.split(regex)``: like Spark's split, but trailing empty pieces are
    removed (``"a,b,,"`` gives ``[a, b]``)."""
    return F.split(F.regexp_replace(value, "(?:" + regex + ")+$", ""), regex)


def modify(step: StepContext, df: "DataFrame", column: str, value: "Column",
           masking: bool = False) -> Outcome:
    """Set ``column`` to ``value`` in place: the step's outcome, labelled MODIFY column."""
    return Outcome(put(df, column, value), L.modify(column), masking=masking)


#: What separates `fail`'s condition from the failing row's values in its message.
FAIL_ROW = " is true for row "
#: What stands for the row inside the job; `run_error` puts the row's values there.
FAIL_ROW_UNREAD = "\u2026"


def require_string(step: StepContext, df: "DataFrame", column: str) -> None:
    step.require(df, [column])
    kind = df.schema[column].dataType.typeName()
    if kind != "string":
        raise step.error(f"column {column!r} has type {kind}; it should be of type string")
