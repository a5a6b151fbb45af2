"""Row directives: split-to-rows, flatten, the filters (filter-row-if-matched,
filter-row-if-not-matched, filter-by-regex, filter-row-if-true/false, filter-row,
filter-rows-on, filter-empty-or-null), send-to-error, send-to-error-and-continue
and fail.

Conditions are Spark SQL with Wrangler's JEXL operators understood
(`fll.directives.expressions`). Rows sent to the error output leave the main
output; `fail` stops the run naming the line and the first failing row. Nothing
here runs a Spark action.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from .. import labels as L
from ..context import StepContext, quote
from ..expressions import condition
from ..parser import Args, check_regex
from ..registry import Outcome, register_directive
from ..support import (FAIL_MARKER, FAIL_ROW, FAIL_ROW_UNREAD, ERROR_CODE, ERROR_MESSAGE,
                       as_text, fail_when, java_split, null_value, put, put_all)
from ..variables import conceal, expose, reads_through, visible

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


@register_directive("split-to-rows <column:column> <regex:regex>")
def split_to_rows(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """One row per regex-separated piece of ``column`` (Java's ``String.split``: trailing
    empty pieces dropped). Wrangler fails on a null value; fll keeps the row with null.

    Labels: MODIFY column (other columns' values are repeated, not changed).
    """
    step.require(df, [a.column])
    value = F.explode_outer(java_split(step.col(a.column).cast("string"), a.regex))
    return Outcome(put(df, a.column, value), L.modify(a.column))


# -- flatten -------------------------------------------------------------------

_POS = "__fll_flatten_pos"


@register_directive("flatten <columns:columns>")
def flatten(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """One row per array position across the listed columns: row k holds element k of
    each array column (null past its end) and repeats every other value.

    The number of rows is the longest array among them (a null or non-array value
    counts as one); when every array is empty one row with nulls remains, as in
    Wrangler. Labels: MODIFY each listed column (the rest are repeated, not changed).
    """
    step.require(df, a.columns)
    names = list(dict.fromkeys(a.columns))
    arrays = [c for c in names if df.schema[c].dataType.typeName() == "array"]
    if not arrays:    # nothing to spread: every value counts as one row
        return Outcome(df, L.modify(*names))
    sizes = [F.when(step.col(c).isNull(), F.lit(1)).otherwise(F.size(step.col(c)))
             for c in arrays]
    longest = sizes[0] if len(sizes) == 1 else F.greatest(*sizes)
    positions = F.sequence(F.lit(0), F.greatest(longest, F.lit(1)) - 1)
    exploded = df.select("*", F.explode(positions).alias(_POS))
    new = [(c, F.get(step.col(c), F.col(_POS))) for c in arrays]
    out = put_all(exploded, new).drop(_POS)
    return Outcome(out, L.modify(*names))


def _whole_match(c: "Column", regex: str) -> "Column":
    """Java's ``Matcher.matches()``: the regex must match the whole value."""
    return c.rlike("\\A(?:" + regex + ")\\z")


def _regex_or_null(regex: str) -> str | None:
    # Wrangler compiles the pattern when the recipe is read, unless it is null or empty
    if regex == "" or regex.lower() == "null":
        return None
    reason = check_regex(regex)
    return f"bad regex {regex!r}: {reason}" if reason else None


_NUMBER_TYPES = ("byte", "short", "integer", "long", "float", "double", "decimal")


def _regex_filter(step, df, column: str, regex: str, remove_matching: bool) -> Outcome:
    """Wrangler's filter-by-regex, which filter-row-if-matched, filter-row-if-not-matched
    and filter-rows-on regex-(not-)match all become: ``null`` or an empty regex keeps
    every row, a row without the column is kept, a text or number value is matched as
    a whole (Java's ``Matcher.matches()`` on its text), and a null value stops the run."""
    if regex == "" or regex.lower() == "null":
        return Outcome(df, L.read(column) if column in df.columns else [])
    reason = check_regex(regex)
    if reason:
        raise step.error(f"bad regex {regex!r}: {reason}")
    if column not in df.columns:
        return Outcome(df, [])
    kind = df.schema[column].dataType.typeName()
    if kind != "string" and kind not in _NUMBER_TYPES:
        raise step.error(f"column {column!r} has type {kind}; it should be text or a number")
    c = as_text(df, column, step.col(column))
    hit = _whole_match(c, regex)
    keep = fail_when(step, c.isNull(), ~hit if remove_matching else hit,
                     null_value(column, "'String', 'JSONObject' or 'Number'"))
    return Outcome(df.where(keep), L.read(column))


@register_directive("filter-row-if-matched <column:column> <regex:text>",
                    checks={"regex": _regex_or_null})
def filter_row_if_matched(step, df, a):
    """Remove the rows whose ``column`` matches ``regex`` as a whole (Java's
    ``Matcher.matches()``, as Wrangler: ``'^drop'`` does not remove ``drop-me``, ``'drop.*'``
    does). Wrangler runs it as ``filter-by-regex if-matched``, and so does fll: a null
    value stops the run, ``null`` as the regex keeps every row.

    Labels: READ column — it decides which rows every other column keeps.
    """
    return _regex_filter(step, df, a.column, a.regex, True)


@register_directive("filter-row-if-not-matched <column:column> <regex:text>",
                    checks={"regex": _regex_or_null})
def filter_row_if_not_matched(step, df, a):
    """Remove the rows whose ``column`` does not match ``regex`` as a whole (Wrangler's
    ``filter-by-regex if-not-matched``: a null value stops the run). Labels: READ column.
    """
    return _regex_filter(step, df, a.column, a.regex, False)


@register_directive("filter-by-regex <match:if-matched|if-not-matched> <column:column> "
                    "<regex:text>", checks={"regex": _regex_or_null})
def filter_by_regex(step, df, a):
    """Wrangler's own name for the two regex filters: ``if-matched`` removes the rows
    whose value matches as a whole, ``if-not-matched`` those that do not. An empty regex
    or ``null`` keeps every row, as does a column that is not there; a null value stops
    the run and a column neither text nor number is refused, as in Wrangler.
    Labels: READ column."""
    return _regex_filter(step, df, a.column, a.regex, a.match == "if-matched")


def _filter(step, df, text: str, remove_when: bool) -> Outcome:
    exposed, shown = expose(step, df)      # set-variable's variables, read by name
    cond, refs = condition(step, exposed, text)
    return Outcome(conceal(exposed.where(~cond if remove_when else cond), shown),
                   L.read(*reads_through(refs, shown, df.columns)))


@register_directive("filter-row-if-true <condition:expr>")
def filter_row_if_true(step, df, a):
    """Remove the rows for which a Spark SQL condition is true (null counts as false).

    Wrangler uses JEXL; we use Spark SQL. Labels: READ each column the condition reads.
    """
    return _filter(step, df, a.condition, True)


@register_directive("filter-row-if-false <condition:expr>")
def filter_row_if_false(step, df, a):
    """Remove the rows for which a Spark SQL condition is false (null counts as false,
    so those rows go too). Labels: READ each column the condition reads."""
    return _filter(step, df, a.condition, False)


@register_directive("filter-row <condition:expr> [<remove_when:bool>]")
def filter_row(step, df, a):
    """Wrangler's own form of the condition filters, ``filter-row exp:{cond} true``:
    remove the rows where the condition equals ``remove_when`` (default true).

    Labels: READ each column the condition reads.
    """
    return _filter(step, df, a.condition, a.remove_when is not False)


_FILTER_ON = ("condition-true", "condition-false", "empty-or-null-columns", "regex-match",
              "regex-not-match")


@register_directive("filter-rows-on <command:condition-true|condition-false|"
                    "empty-or-null-columns|regex-match|regex-not-match> <rest:expr>")
def filter_rows_on(step, df, a):
    """The older combined filter: ``condition-true <cond>`` / ``condition-false <cond>``
    (as filter-row-if-true / -false), ``empty-or-null-columns <c>[,<c>…]`` (as
    filter-empty-or-null), ``regex-match <column> <regex>`` /
    ``regex-not-match <column> <regex>`` (as filter-row-if-matched / -not-matched,
    whole-value match). Labels: READ each column the filter reads."""
    if a.command == "condition-true":
        return _filter(step, df, a.rest, True)
    if a.command == "condition-false":
        return _filter(step, df, a.rest, False)
    if a.command == "empty-or-null-columns":
        cols = [c.strip().lstrip(":") for c in a.rest.split(",") if c.strip()]
        return _empty_or_null(step, df, cols)
    column, _, regex = a.rest.partition(" ")
    column, regex = column.lstrip(":"), regex.strip()
    if len(regex) > 1 and regex[0] in "'\"" and regex[-1] == regex[0]:
        regex = regex[1:-1]
    if not column or not regex:
        raise step.error(f"{a.command} needs a column and a regex")
    return _regex_filter(step, df, column, regex, a.command == "regex-match")


def _empty_or_null(step, df, columns: list[str]) -> Outcome:
    # Wrangler's code keeps a row as soon as one listed column holds a non-null value,
    # and keeps rows that lack a listed column altogether.
    present = [c for c in dict.fromkeys(columns) if c in df.columns]
    if len(present) < len(set(columns)):
        return Outcome(df, L.read(*present))
    keep = F.lit(False)
    for c in present:
        keep = keep | step.col(c).isNotNull()
    return Outcome(df.where(keep), L.read(*present))


@register_directive("filter-empty-or-null <columns:columns>")
def filter_empty_or_null(step, df, a):
    """Remove the rows in which every listed column is null, as Wrangler's code does (its
    name says empty too, but an empty text is a value and the row stays). A listed column
    that is not there keeps every row, once: Wrangler's code adds such a row to its
    output once per missing column (and once more when a listed value is not null),
    duplicating rows, which fll does not copy. Labels: READ each listed column."""
    return _empty_or_null(step, df, list(a.columns))


def _to_error(step, df, a, suffix: str) -> Outcome:
    exposed, shown = expose(step, df)
    cond, refs = condition(step, exposed, a.condition)
    for c in (ERROR_MESSAGE, ERROR_CODE):
        if c in df.columns:
            raise step.error(f"column {c!r} is reserved for the error output")
    message = (a.message if a.message is not None else a.condition) + suffix
    errors = exposed.where(cond).select(*[F.col(quote(c)) for c in visible(df.columns)],
                                        F.lit(message).alias(ERROR_MESSAGE),
                                        F.lit(1).alias(ERROR_CODE))
    return Outcome(conceal(exposed.where(~cond), shown),
                   L.read(*reads_through(refs, shown, df.columns)), errors=errors,
                   note=f"rows where {a.condition} go to the error output")


@register_directive("send-to-error <condition:expr> [<metric:identifier>] [<message:text>]")
def send_to_error(step, df, a):
    """Send the rows for which a Spark SQL condition is true to the recipe's error output
    (`CompiledRecipe.errors`: the row as it is at this line plus ``errMsg`` = the message,
    or the condition, in Wrangler's ErrorRowException form ``<message> (ecode: 1,
    directive: send-to-error)``, and ``errCode`` = 1); they leave the main output. Use
    ``exp:{…}`` to give a metric name and a message after the condition. Metrics are not
    counted (Spark has no per-directive metric). Labels: READ each column the
    condition reads."""
    return _to_error(step, df, a, " (ecode: 1, directive: send-to-error)")


@register_directive("send-to-error-and-continue <condition:expr> [<metric:identifier>] "
                    "[<message:text>]")
def send_to_error_and_continue(step, df, a):
    """As `send-to-error`, with Wrangler's message form ``<message> (ecode: 1)``. Wrangler's
    code (not its doc page) takes the row out of the main output as send-to-error does,
    and so does fll; its dq_total/dq_failure counters are not kept.
    Labels: READ each column the condition reads."""
    return _to_error(step, df, a, " (ecode: 1)")


@register_directive("fail <condition:expr>")
def fail(step, df, a):
    """Stop the run when a Spark SQL condition is true for any row. The check runs with
    the job that reads the result (it stays lazy); the error names the recipe line and
    the first failing row's values. Labels: READ each column the condition reads."""
    exposed, shown = expose(step, df)
    cond, refs = condition(step, exposed, a.condition)
    # The check inside the job names only the columns the condition reads: a filter
    # that referenced every column could not be pushed below the projections, and would
    # keep alive columns the recipe later drops (the cost that put the benchmark at 1.5).
    # `CompiledRecipe.run_error` reads the whole row from ``probe`` once a run failed.
    row = F.lit(FAIL_ROW_UNREAD)   # and no value at all: see support.fail_when
    marker = F.concat(F.lit(f"{FAIL_MARKER}line {step.line}: fail: condition "
                            f"'{a.condition}'{FAIL_ROW}"), row, F.lit(FAIL_MARKER))
    checked = conceal(exposed.where(F.when(cond, F.raise_error(marker))
                                    .otherwise(F.lit(True))), shown)
    probe = exposed.where(cond).select([F.col(quote(c)) for c in visible(df.columns)])
    return Outcome(checked, L.read(*reads_through(refs, shown, df.columns)), probe=probe)
