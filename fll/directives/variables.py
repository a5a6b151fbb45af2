"""Wrangler's transient variables (set-variable, increment-variable) as hidden columns.

Wrangler's plugin empties its transient store before every input record, so a
variable is a per-row value that the expressions of later lines read by name
(set-column, the condition filters, send-to-error*, fail and the two variable
directives themselves). fll keeps each variable in a hidden column of the
DataFrame (its name starts with `VARIABLE_PREFIX`, a text no recipe can spell),
shows it under its own name to those expressions only, and the recipe engine
leaves hidden columns out of every label, the lineage, the error output and the
result. A variable is not a field: lineage runs through it, from the columns its
expression read to the columns a later expression writes.

This module builds lazy DataFrame projections only: it must never run a Spark job.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from pyspark.sql import functions as F

from .context import StepContext, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["VARIABLE_PREFIX", "is_variable", "visible", "without_variables", "variables",
           "store_variable", "expose", "conceal", "reads_through"]

#: Start of a hidden variable column's name (brackets no recipe token can hold).
VARIABLE_PREFIX = "\u2983var\u2984"
#: Column metadata key: the columns the variable's value was computed from.
_READS = "fll.variable.reads"


def is_variable(name: str) -> bool:
    return name.startswith(VARIABLE_PREFIX)


def visible(columns: Iterable[str]) -> list[str]:
    """The columns a recipe shows: every column but the hidden variables."""
    return [c for c in columns if not is_variable(c)]


def without_variables(df: "DataFrame") -> "DataFrame":
    """``df`` without its hidden variable columns (``df`` itself when it has none)."""
    if not any(is_variable(c) for c in df.columns):
        return df
    return df.select([F.col(quote(c)) for c in visible(df.columns)])


def variables(df: "DataFrame") -> dict[str, list[str]]:
    """Each variable of ``df`` (by its recipe name) and the columns it was computed from."""
    out: dict[str, list[str]] = {}
    for f in df.schema.fields:
        if is_variable(f.name):
            out[f.name[len(VARIABLE_PREFIX):]] = list(f.metadata.get(_READS, []))
    return out


def store_variable(df: "DataFrame", name: str, value: "Column",
                   reads: Sequence[str]) -> "DataFrame":
    """Set variable ``name`` to ``value`` on every row (in place, or appended hidden)."""
    hidden = VARIABLE_PREFIX + name
    column = value.alias(hidden, metadata={_READS: list(dict.fromkeys(reads))})
    if hidden in df.columns:
        return df.select([column if c == hidden else F.col(quote(c)) for c in df.columns])
    return df.select([F.col(quote(c)) for c in df.columns] + [column])


def expose(step: StepContext, df: "DataFrame",
           unset: str | None = None) -> tuple["DataFrame", dict[str, list[str]]]:
    """``df`` with every variable also shown under its own name, for an expression to
    read, and the variables shown (name → the columns it was computed from).

    ``unset`` names a variable to show as null when it has no value yet (Wrangler's
    expressions read an unknown name as null; ``set-variable n n + 1`` reads its own
    variable). Undo with `conceal` before returning the DataFrame. A variable whose
    name is also a column's is refused: Wrangler's expression would read the
    variable, a Spark SQL expression cannot tell the two apart.
    """
    found = variables(df)
    extra: list[tuple[str, "Column"]] = []
    if unset is not None and unset not in found:
        extra.append((unset, F.lit(None)))
        found[unset] = []
    if not found:
        return df, {}
    shown = {c.lower(): c for c in visible(df.columns)}
    for name in found:
        if name.lower() in shown:
            raise step.error(f"variable {name!r} has the name of column "
                             f"{shown[name.lower()]!r}; rename one of them, an expression "
                             f"could not tell which it reads")
    cols = [F.col(quote(c)) for c in df.columns]
    cols += [F.col(quote(VARIABLE_PREFIX + n)).alias(n) for n in found
             if all(n != e for e, _ in extra)]
    cols += [v.alias(n) for n, v in extra]
    return df.select(cols), found


def conceal(df: "DataFrame", shown: dict[str, list[str]]) -> "DataFrame":
    """Undo `expose`: drop the columns that showed the variables under their names."""
    if not shown:
        return df
    return df.select([F.col(quote(c)) for c in df.columns if c not in shown])


def reads_through(refs: Iterable[str], shown: dict[str, list[str]],
                  columns: Sequence[str]) -> list[str]:
    """The columns an expression reads, with each variable it reads replaced by the
    columns the variable was computed from (those still in ``columns``)."""
    out: list[str] = []
    for r in refs:
        if r in shown:
            out.extend(c for c in shown[r] if c in columns)
        elif not is_variable(r):
            out.append(r)
    return list(dict.fromkeys(out))
