"""Recipe expressions: JEXL-like values and conditions as Spark Columns.

A set-column expression of plain arithmetic gets JEXL's rules (`jexl_arith`); any
other expression or condition is Spark SQL, with JEXL's ``==``/``!=``/``&&``/``||``
and ``null`` tests rewritten outside quoted text. Used by the column, row and
variable directives; builds Column expressions only, never runs a Spark job.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from ..errors import RecipeError
from .context import StepContext
from .jexl_arith import translate
from .support import fail_when

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["jexl_value", "jexl_to_sql", "condition"]


def jexl_value(step: StepContext, df: "DataFrame", expression: str) -> tuple["Column", list[str]]:
    """A set-column expression as a Column and the columns it reads: plain arithmetic
    gets JEXL's rules (`jexl_arith`), anything else is Spark SQL as written."""
    arithmetic = translate(expression, {f.name: f.dataType.typeName() for f in df.schema.fields})
    sql = arithmetic.sql if arithmetic else expression
    refs = step.references(df, sql)
    value = F.expr(sql)
    for operand in (arithmetic.text_operands if arithmetic else ()):
        # JEXL stops on text that is no number ("Type mismatch"): name the line and value
        text = F.expr(operand)
        value = fail_when(step, text.isNotNull() & (text != "") &
                          text.try_cast("double").isNull(), value,
                          F.concat(F.lit(f"{operand} holds '"), text,
                                   F.lit("', which is not a number")))
    return value, refs


_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


def jexl_to_sql(condition: str) -> str:
    """Rewrite the JEXL operators Wrangler's conditions use into Spark SQL, outside quoted
    text: ``&&`` AND, ``||`` OR, ``!`` NOT, ``== null`` IS NULL, ``!= null`` IS NOT NULL,
    ``a =~ 're'`` / ``a !~ 're'`` a whole-value (NOT) RLIKE, ``a.isEmpty()`` (and the
    send-to-error page's ``a.isEmpty``) ``a = ''``: Java's String.isEmpty, false for a
    null (where JEXL's strict engine stops). Other JEXL method calls and Wrangler's
    function libraries (``date:isDate``) are not translated."""
    text = _outside_quotes(condition, _jexl_ops)
    operand = r"([\w.`]+)\s*(=~|!~)\s*('(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\")"

    def match(m: "re.Match[str]") -> str:
        test = f"{m.group(1)} RLIKE concat('^(?:', {m.group(3)}, ')$')"
        return f"(NOT {test})" if m.group(2) == "!~" else f"({test})"
    return re.sub(operand, match, text)


def _outside_quotes(text: str, fn) -> str:
    parts: list[str] = []
    pos = 0
    for m in _QUOTED.finditer(text):
        parts.append(fn(text[pos:m.start()]))
        parts.append(m.group(0))
        pos = m.end()
    parts.append(fn(text[pos:]))
    return "".join(parts)


def _null_tests(text: str) -> str:
    return re.sub(r"(==|!=|<>|=)\s*null\b", lambda m: " IS NULL" if m.group(1) in ("==", "=")
                  else " IS NOT NULL", text, flags=re.IGNORECASE)


_IS_EMPTY = re.compile(r"(`[^`]+`|\b[A-Za-z_]\w*)\.isEmpty\b(?:\s*\(\s*\))?")


def _jexl_ops(text: str) -> str:
    text = _IS_EMPTY.sub(lambda m: f"({m.group(1)} = '')", text)
    text = _null_tests(text).replace("&&", " AND ").replace("||", " OR ")
    return re.sub(r"!(?![=~])", " NOT ", text)


def condition(step: StepContext, df: "DataFrame", text: str) -> tuple["Column", list[str]]:
    """A Spark SQL condition as a never-null boolean (null counts as false) and the
    columns it reads. A condition Spark cannot read is tried once more with Wrangler's
    JEXL operators rewritten (`jexl_to_sql`)."""
    if not text.strip():
        raise step.error("no condition given")
    # ``x == null`` is never true in SQL, but it is Wrangler's null test: always rewrite it
    text = _outside_quotes(text, _null_tests)
    try:
        refs = step.references(df, text)
    except RecipeError as first:
        translated = jexl_to_sql(text)
        if translated == text:
            raise
        try:
            refs = step.references(df, translated)
        except RecipeError as second:
            # a condition that is not SQL at all is JEXL: its error says more (a name
            # that is not there) than Spark's syntax error at the first ``&&``
            raise (second if "PARSE_SYNTAX_ERROR" in str(first) else first) from None
        text = translated
    return F.coalesce(F.expr(text).cast("boolean"), F.lit(False)), refs
