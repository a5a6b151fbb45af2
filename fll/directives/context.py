"""What a directive sees while it is applied: its statement and Spark helpers.

Directive functions get a `StepContext` to quote columns, check that the
columns they need exist, find which columns a Spark SQL expression reads,
and raise errors that name the recipe line. Helpers here stay lazy: they
may analyze a plan but must never run a Spark job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from ..errors import RecipeError
from .lexer import Statement

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["StepContext", "Guard", "quote", "java_quote"]


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (backticks, inner backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def java_quote(text: str) -> str:
    """A Java regex matching ``text`` literally (like Pattern.quote)."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


@dataclass(frozen=True)
class Guard:
    """A run-time check of one step: the literal ``message`` its job raises, the
    ``condition`` (over the step's input columns) of the rows that raise it, and the
    text Column ``detail`` naming such a row's value, read only after a failed run."""

    message: str
    condition: "Column"
    detail: "Column"


class StepContext:
    """One statement being applied to one DataFrame."""

    def __init__(self, statement: Statement, spark: "SparkSession", usage: str = ""):
        self.statement = statement
        self.spark = spark
        self.usage = usage
        self.actions = 0          # data-dependent Spark actions this step ran
        #: run-time checks of this step whose failing value is named after a failed run
        self.guards: list[Guard] = []

    @property
    def line(self) -> int:
        return self.statement.line

    def where(self) -> dict:
        """Keyword arguments locating an error at this statement."""
        return {"line": self.statement.line, "column": self.statement.column,
                "directive": self.statement.text, "expected": self.usage or None}

    def error(self, message: str) -> RecipeError:
        return RecipeError(f"{self.statement.name}: {message}", **self.where())

    def col(self, name: str) -> "Column":
        from pyspark.sql import functions as F
        return F.col(quote(name))

    def require(self, df: "DataFrame", names: Iterable[str]) -> None:
        """Raise a RecipeError naming the line if a column is missing (names are exact)."""
        cols = df.columns
        for n in names:
            if n not in cols:
                raise self.error(f"unknown column {n!r}; columns here: {', '.join(cols)}")

    def require_new(self, df: "DataFrame", name: str) -> None:
        if name in df.columns:
            raise self.error(f"column {name!r} already exists")

    def references(self, df: "DataFrame", expression: str) -> list[str]:
        """The columns of ``df`` a Spark SQL expression reads, in column order.

        Uses Spark's analyzer (``df.select(expr)``'s analyzed plan references),
        so string literals, function names and aliases are never mistaken for
        columns. Raises a RecipeError naming the line if the expression does
        not analyze. Spark Connect sessions have no analyzed plan to read:
        a careful tokenizer would be needed there; we say so.
        """
        from pyspark.sql import functions as F
        try:
            probe = df.select(F.expr(expression))
        except Exception as exc:  # AnalysisException, ParseException, …
            namespace = _NAMESPACE.search(re.sub(r"'[^']*'|\"[^\"]*\"", "''", expression))
            hint = (f" ({namespace.group(0)}…) is a JEXL function of Wrangler's; write the "
                    f"Spark SQL function instead" if namespace else "")
            raise self.error(f"bad Spark SQL expression {expression!r}: "
                             f"{_first_line(exc)}{hint}") from None
        jdf = getattr(probe, "_jdf", None)
        if jdf is None:
            raise self.error("reading the columns of an expression needs a classic Spark "
                             "session (Spark Connect has no analyzed plan)")
        refs = jdf.queryExecution().analyzed().references()
        it = refs.iterator()
        names: set[str] = set()
        while it.hasNext():
            names.add(it.next().name())
        lower = {n.lower() for n in names}
        # Spark resolves names case-insensitively by default: report the real column name
        return [c for c in df.columns if c in names or c.lower() in lower]

    def check_datetime_pattern(self, pattern: str, parsing: bool = False) -> None:
        """Raise a RecipeError naming the line if Spark refuses a datetime pattern.

        Asks Spark's own TimestampFormatter in the JVM (no job runs), so a pattern
        fails here, at compile time, exactly when it would fail in a job. Spark's
        patterns are close to Java's DateTimeFormatter that Wrangler uses, but it
        refuses week-based letters (Y, w, u, e, c) and a few others (A, n, N, p).
        """
        jvm = getattr(self.spark, "_jvm", None)
        if jvm is None:
            return   # Spark Connect: the job will report it
        try:
            zone = jvm.java.time.ZoneId.of("UTC")
            fmt = jvm.org.apache.spark.sql.catalyst.util.TimestampFormatter.apply(
                pattern, zone, parsing)
            fmt.validatePatternString(True)
            if not parsing:
                fmt.format(0)
        except Exception as exc:
            text = _first_line(exc)
            if "INCONSISTENT_BEHAVIOR_CROSS_VERSION" in text:
                text = "Spark refuses week-based and some Java-only pattern letters " \
                       "(Y, w, u, e, c; E only for formatting)"
            else:
                text = _ERROR_CLASS.sub("", text).split(" SQLSTATE")[0]
            raise self.error(f"Spark cannot use the datetime pattern {pattern!r}: "
                             f"{text}") from None

    def check_zone(self, zone: str) -> str:
        """The zone id if Java knows it (``UTC``, ``US/Eastern``, ``+05:00``, short ids such
        as ``PST``), else a RecipeError naming the line."""
        jvm = getattr(self.spark, "_jvm", None)
        if jvm is not None:
            try:
                zid = jvm.java.time.ZoneId.of(zone, jvm.java.time.ZoneId.SHORT_IDS)
                return str(zid.getId())
            except Exception:
                raise self.error(f"unknown time zone {zone!r}; use a region such as "
                                 f"'America/New_York', 'UTC' or an offset like '+05:00'"
                                 ) from None
        return zone

    def guard(self, condition: "Column", message: str, detail: "Column | None") -> None:
        """Remember a run-time check that raises ``message`` on a row meeting ``condition``,
        so that a failed run can be explained with ``detail`` (see `fail_when`)."""
        # split-url guards each of its seven parts with one check: remember it once
        if detail is not None and all(g.message != message or str(g.condition) != str(condition)
                                      for g in self.guards):
            self.guards.append(Guard(message, condition, detail))

    def action(self) -> None:
        """Count one data-dependent action (the engine reports it per step)."""
        self.actions += 1


_ERROR_CLASS = re.compile(r"^\[[A-Z_.]+\]\s*")


#: A JEXL namespace call (``math:ceil(``, ``arithmetic:add(``), outside quoted text.
_NAMESPACE = re.compile(r"\b[a-z]+:[A-Za-z_]\w*(?=\s*\()")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
