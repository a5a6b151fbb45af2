"""Column directives: copy, rename, swap, drop, keep, set-column, merge,
split-to-columns, columns-replace, change-column-case, cleanse-column-names,
set-headers and generate-uuid.

Each follows CDAP Wrangler's behaviour; where Spark makes fll differ the
docstring says so. split-to-columns is the one directive here that runs a Spark
action (to count the pieces, hence the new columns).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from .. import labels as L
from ..context import StepContext, quote
from ..expressions import jexl_value
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (append_all, as_text, java_message,
                       java_split, put)
from ..variables import conceal, expose, is_variable, reads_through, visible

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def _renamed(step: StepContext, df: "DataFrame", mapping: dict[str, str]) -> Outcome:
    new_names = [mapping.get(c, c) for c in df.columns]
    seen: set[str] = set()
    for n in new_names:
        if n in seen:
            raise step.error(f"renaming would give two columns named {n!r}")
        if not n:
            raise step.error("renaming would give a column an empty name")
        seen.add(n)
    pairs = [(c, mapping[c]) for c in df.columns if c in mapping]
    return Outcome(df.toDF(*new_names), L.rename(*pairs), identity=True)


# -- column operations -------------------------------------------------------

@register_directive("copy <source:column> <destination:column> [<force:bool>]")
def copy(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Copy ``source`` into ``destination`` (appended); an existing destination needs force=true.

    Labels: READ source, ADD destination.
    """
    step.require(df, [a.source])
    if a.source == a.destination:   # Wrangler skips the row: nothing changes
        return Outcome(df, L.read(a.source), identity=True)
    if a.destination in df.columns and not a.force:
        raise step.error(f"destination {a.destination!r} exists; add true to overwrite it")
    out = put(df, a.destination, step.col(a.source))
    return Outcome(out, L.read(a.source) + L.add(a.destination), identity=True)


@register_directive("rename <old:column> <new:column>")
def rename(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Rename ``old`` to ``new`` in place. As Wrangler's ColumnConverter, an absent
    ``old`` is left alone (the step does nothing), and ``new`` must not name another
    column in any case (``rename C1 c1`` is allowed, ``rename C1 c4`` beside ``C4`` is
    not). Labels: RENAME old, new."""
    if a.old not in df.columns:
        return Outcome(df, note=f"column {a.old!r} is not there: nothing renamed")
    clash = [c for c in df.columns if c.lower() == a.new.lower() and c != a.old]
    if clash:
        raise step.error(f"column {clash[0]!r} already exists; drop it before renaming "
                         f"{a.old!r} to {a.new!r}")
    return _renamed(step, df, {a.old: a.new})


@register_directive("swap <first:column> <second:column>")
def swap(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Swap the names of two columns. Labels: RENAME both."""
    step.require(df, [a.first, a.second])
    if a.first == a.second:
        raise step.error("swap needs two different columns")
    return _renamed(step, df, {a.first: a.second, a.second: a.first})


@register_directive("drop <columns:columns>")
def drop(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Drop the listed columns (``drop a,b`` or ``drop :a, :b``; names separated by spaces
    only are refused, as Wrangler's grammar refuses them); a listed column that is not
    there is ignored, as in Wrangler. Labels: DROP each dropped column."""
    names = [c for c in dict.fromkeys(a.columns) if c in df.columns]
    out = df.select([F.col(quote(c)) for c in df.columns if c not in names])
    return Outcome(out, L.drop(*names))


@register_directive("keep <columns:columns>")
def keep(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Keep only the listed columns, in their current order (listed columns that are not
    there are ignored, as in Wrangler). Labels: DROP every other column."""
    kept = set(a.columns)
    out = df.select([F.col(quote(c)) for c in df.columns if c in kept or is_variable(c)])
    return Outcome(out, L.drop(*[c for c in visible(df.columns) if c not in kept]))


@register_directive("set-column <column:column> <expression:expr>")
def set_column(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Set ``column`` to a Spark SQL expression (Wrangler uses JEXL; we use Spark SQL).

    So JEXL's ``c ? a : b`` is ``if(c, a, b)`` and namespaces such as
    ``string:upperCase`` are Spark functions (``upper``). An expression of plain
    arithmetic (names, numbers, quoted text, ``+ - * / %``, parentheses) follows JEXL's
    rules instead of Spark's (`jexl_arith`): ``+`` with text concatenates, text is read
    as a number (``'11.79' * 40`` is 471.6), whole numbers divide to a whole number and
    ``%`` never gives a negative; text that is no number stops the run naming the line.
    Where JEXL's type depends on each value, the column is a double; a null operand gives
    null where JEXL's strict arithmetic stops; whole-number overflow follows Spark (int
    stays int) where JEXL widens to long; ``%`` by a negative whole number gives a value
    where JEXL stops. Labels: READ every column the expression reads (found by Spark's
    analyzer), the target MODIFY if the expression reads it, else ADD (new or replaced).
    A variable of set-variable is read by its name; the step then reads the variable's
    columns.
    """
    exposed, shown = expose(step, df)
    if a.column.lower() in {v.lower() for v in shown}:
        raise step.error(f"column {a.column!r} would have the name of a variable; rename "
                         f"one of them, an expression could not tell which it reads")
    value, refs = jexl_value(step, exposed, a.expression)
    out = conceal(put(exposed, a.column, value), shown)
    reads = [c for c in reads_through(refs, shown, df.columns) if c != a.column]
    target = L.modify(a.column) if a.column in refs else L.add(a.column)
    return Outcome(out, L.read(*reads) + target)


@register_directive("merge <first:column> <second:column> <destination:column> "
                    "<delimiter:text>")
def merge(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Join two columns' values with ``delimiter`` (required, as in Wrangler; Java escapes
    such as ``'\\u000A'`` understood) into a new column. As in Wrangler a null value is
    written as the text ``null``, and when either column is not there the rows are left
    as they are. An existing destination is overwritten in place: Wrangler's code appends
    a second column of that name, which a DataFrame cannot hold.
    Labels: READ first, READ second, ADD destination.
    """
    if a.first not in df.columns or a.second not in df.columns:
        return Outcome(df, [])
    if a.destination in (a.first, a.second):
        raise step.error("the destination must differ from the merged columns")

    def text(c: str) -> "Column":
        return F.coalesce(as_text(df, c, step.col(c)), F.lit("null"))
    value = F.concat(text(a.first), F.lit(a.delimiter or ""), text(a.second))
    return Outcome(put(df, a.destination, value),
                   L.read(a.first, a.second) + L.add(a.destination))


def _max_pieces(step: StepContext, df: "DataFrame", column: str, regex: str) -> int:
    step.action()
    row = df.select(F.max(F.size(java_split(step.col(column).cast("string"), regex)))).first()
    return int(row[0] or 0) if row is not None else 0


@register_directive("split-to-columns <column:column> <regex:regex>")
def split_to_columns(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Split ``column`` on a regex into ``column_1`` … ``column_n`` (appended; source kept).

    Pieces are Java's ``String.split`` (trailing empty pieces dropped). n is data
    dependent: one aggregation job computes the largest number of pieces over all
    rows; shorter rows get nulls. Wrangler fails on a null value; fll gives nulls.
    Labels: READ column, ADD all columns formatted column_%d.
    """
    step.require(df, [a.column])
    n = _max_pieces(step, df, a.column, a.regex)
    parts = java_split(step.col(a.column).cast("string"), a.regex)
    new = [(f"{a.column}_{i}", F.try_element_at(parts, F.lit(i))) for i in range(1, n + 1)]
    return Outcome(append_all(df, new),
                   L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d")),
                   note=f"one job counted {n} pieces")


# -- column names (RENAME) ---------------------------------------------------

def _java_rename(step: StepContext, sed, names: list[str]) -> dict[str, str] | None:
    """Each name through the sed expression with the JVM's own regex engine (Wrangler
    runs unix4j's sed, which is Java's Pattern); None without a JVM (Spark Connect)."""
    jvm = getattr(step.spark, "_jvm", None)
    if jvm is None:
        return None
    flags = 2 if sed.ignore_case else 0          # Pattern.CASE_INSENSITIVE
    rx = jvm.java.util.regex.Pattern.compile(sed.pattern, flags)
    out = {}
    for c in names:
        m = rx.matcher(c)
        try:
            out[c] = str(m.replaceAll(sed.replacement) if sed.global_
                         else m.replaceFirst(sed.replacement))
        except Exception as exc:   # a group the pattern does not have, say
            raise step.error(f"bad replacement {sed.replacement!r}: "
                             f"{java_message(exc)}") from None
    return out


@register_directive("columns-replace <sed:sed>")
def columns_replace(step, df, a):
    """Rename every column through ``s/regex/replacement/[g][i]``: Java regex and
    replacement rules (``\\1``, ``$1`` and ``&`` as sed has them), run by the session's
    JVM as Wrangler's sed does. Two columns ending with one name, or an empty name, are
    refused (a DataFrame cannot hold them). Labels: RENAME each changed column."""
    mapping = _java_rename(step, a.sed, visible(df.columns))
    if mapping is not None:
        return _renamed(step, df, mapping)
    flags = re.IGNORECASE if a.sed.ignore_case else 0
    try:
        rx = re.compile(a.sed.pattern, flags)
    except re.error as exc:
        raise step.error(f"bad regex {a.sed.pattern!r} for column names: {exc}") from None
    repl = re.sub(r"\$(\d+)", r"\\g<\1>", a.sed.replacement)
    mapping = {}
    for c in visible(df.columns):
        try:
            mapping[c] = rx.sub(repl, c, count=0 if a.sed.global_ else 1)
        except (re.error, IndexError) as exc:
            raise step.error(f"bad replacement {a.sed.replacement!r}: {exc}") from None
    return _renamed(step, df, mapping)


def _identifier(value: str) -> str | None:
    # Wrangler's grammar reads the case as an Identifier token
    if re.fullmatch(r"[A-Za-z_-][A-Za-z0-9_-]*", value):
        return None
    return f"{value!r} is not a word (lower or upper)"


@register_directive("change-column-case [<case:text>]", checks={"case": _identifier})
def change_column_case(step, df, a):
    """Change every column name to upper case for ``upper``/``uppercase`` (any case), and
    to lower case otherwise: as Wrangler's code and doc say, a missing or unknown word
    means lower. Labels: RENAME each changed name.
    """
    f = str.upper if (a.case or "").lower() in ("upper", "uppercase") else str.lower
    return _renamed(step, df, {c: f(c) for c in visible(df.columns)})


def cleanse_name(name: str) -> str:
    """Wrangler's cleansing rule: trim, lower-case, then every character other than
    a-z, 0-9 and _ becomes _ (one _ per character: ``"a  b"`` gives ``a__b``)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name.strip().lower())


@register_directive("cleanse-column-names")
def cleanse_column_names(step, df, a):
    """Sanitize every column name with `cleanse_name`. Labels: RENAME each changed name."""
    return _renamed(step, df, {c: cleanse_name(c) for c in visible(df.columns)})


@register_directive("set-headers <columns:columns>")
def set_headers(step, df, a):
    """Rename columns by position (the first k columns for k names; names are trimmed
    and names beyond the last column are ignored, as in Wrangler).

    Labels: RENAME each changed name.
    """
    names = [n.strip() for n in a.columns]
    return _renamed(step, df, dict(zip(visible(df.columns), names, strict=False)))


@register_directive("generate-uuid <column:column>")
def generate_uuid(step, df, a):
    """Set ``column`` to a random UUID per row (Spark uuid(); replaces an existing
    column). Labels: ADD column (its old values, if any, are not read)."""
    return Outcome(put(df, a.column, F.expr("uuid()")), L.add(a.column))
