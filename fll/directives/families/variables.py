"""set-variable and increment-variable: Wrangler's transient variables, per row.

Wrangler's plugin resets its transient store (both scopes) before every input
record (Wrangler.transform), so a variable holds one value per row, read by
name by the expressions of the lines after it. fll keeps it in a hidden column
(`fll.directives.variables`); it never reaches the result, the error output or
the lineage as a field. The expressions are read as set-column's (Spark SQL, with
JEXL's rules for plain arithmetic). This module must never run a Spark action.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from .. import labels as L
from ..expressions import condition, jexl_value
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive
from ..variables import VARIABLE_PREFIX, conceal, expose, reads_through, store_variable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def _identifier(value: str) -> str | None:
    # Wrangler's grammar reads the variable as an Identifier token (no ':' prefix)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        return None
    return (f"{value!r} is not a variable name (a letter or _, then letters, digits "
            f"or _)")


def _refuse_column_token(step: StepContext) -> None:
    first = step.statement.tokens[0]
    if first.kind != "word":
        raise step.error(f"the variable must be a plain name, got {first.raw!r} (Wrangler "
                         f"reads it as an identifier, not a column or text)")


@register_directive("set-variable <variable:text> <expression:expr>",
                    checks={"variable": _identifier})
def set_variable(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Set ``variable`` to a Spark SQL expression on every row; the expressions of later
    lines (set-column, the condition filters, send-to-error*, fail, set-variable,
    increment-variable) read it by its name, as Wrangler's JEXL reads its transient store.

    The variable lives for one row, as in Wrangler's plugin, which resets the store for
    every record; the expression may read the variable itself (null before it is set,
    as JEXL reads an unknown name). A row that split-to-rows or parse-as-json turns into
    several keeps the value per row, where Wrangler's store keeps the last row's. A
    variable named like a column is refused (Wrangler's expression would read the
    variable; Spark SQL could not tell them apart). Labels: READ the columns the
    expression reads (through other variables too); a later line reading the variable
    reads those columns.
    """
    _refuse_column_token(step)
    if a.variable.lower() in {c.lower() for c in df.columns}:
        raise step.error(f"variable {a.variable!r} has the name of a column; rename one "
                         f"of them, an expression could not tell which it reads")
    exposed, shown = expose(step, df, unset=a.variable)
    value, refs = jexl_value(step, exposed, a.expression)
    reads = reads_through(refs, shown, df.columns)
    out = conceal(store_variable(exposed, a.variable, value, reads), shown)
    return Outcome(out, L.read(*reads))


@register_directive("increment-variable <variable:text> <value:number> <condition:expr>",
                    checks={"variable": _identifier})
def increment_variable(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Add ``value`` (a long; a decimal value is cut to its whole part, as Wrangler's
    ``longValue()``) to ``variable`` on every row where a Spark SQL condition is true;
    an unset variable counts from 0, and where the condition is false (or null) the
    variable keeps its value (null while unset). The value is per row, as set-variable's.

    Wrangler's store casts the old value to Long: a variable set-variable made of
    another type fails there on each row; fll refuses it when the recipe compiles
    (``cast(… AS bigint)`` makes it one). Labels: READ the columns the condition reads.
    """
    _refuse_column_token(step)
    exposed, shown = expose(step, df, unset=a.variable)
    hidden = VARIABLE_PREFIX + a.variable
    if hidden in df.columns:
        kind = df.schema[hidden].dataType.typeName()
        if kind not in ("long", "null"):
            raise step.error(f"variable {a.variable!r} holds {kind} values; only a long "
                             f"(bigint) variable can be incremented")
    cond, refs = condition(step, exposed, a.condition)
    old = F.col(a.variable).cast("bigint")
    value = F.when(cond, F.coalesce(old, F.lit(0).cast("bigint")) + F.lit(int(a.value))) \
        .otherwise(old)
    reads = reads_through(refs, shown, df.columns)
    # the variable's own history stays part of what it was computed from
    earlier = shown.get(a.variable, [])
    out = conceal(store_variable(exposed, a.variable, value, earlier + reads), shown)
    return Outcome(out, L.read(*reads))
