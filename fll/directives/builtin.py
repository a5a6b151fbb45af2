"""The built-in directives, each with its lineage labels.

Each function turns one statement into lazy DataFrame transformations and
declares its labels (semantics §4). Behaviour follows the CDAP Wrangler
documentation; every place where Spark makes us differ is said in the
directive's docstring. Directives here must never run a Spark action except
the few that must learn data-dependent column names, which say so and run
exactly one small action.
"""
from __future__ import annotations

import csv
import json
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Callable

from pyspark.sql import functions as F

from ..errors import RecipeError
from . import labels as L
from .context import StepContext, java_quote, quote
from .jexl_arith import translate
from .parser import Args, check_regex
from .builtin_support import error_rows, fail_when, java_message, null_value
from .registry import Outcome, register_directive
from .variables import conceal, expose, is_variable, reads_through, visible

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def _replace(df: "DataFrame", name: str, value: "Column") -> "DataFrame":
    """Replace column ``name`` in place (keeps position), or append it if new."""
    if name in df.columns:
        return df.select([value.alias(c) if c == name else F.col(quote(c)) for c in df.columns])
    return df.select([F.col(quote(c)) for c in df.columns] + [value.alias(name)])


def _add_all(df: "DataFrame", new: list[tuple[str, "Column"]]) -> "DataFrame":
    names = [n for n, _ in new]
    keep = [F.col(quote(c)) for c in df.columns if c not in names]
    return df.select(keep + [v.alias(n) for n, v in new])


def _is_string(df: "DataFrame", name: str) -> bool:
    return df.schema[name].dataType.typeName() == "string"


def _as_text(df: "DataFrame", name: str, value: "Column") -> "Column":
    """A column's values as text (Wrangler's toString of a value)."""
    return value if _is_string(df, name) else value.cast("string")


def _java_split(value: "Column", regex: str) -> "Column":
    """Java's ``String.split(regex)``: like Spark's split, but trailing empty pieces are
    removed (``"a,b,,"`` gives ``[a, b]``)."""
    return F.split(F.regexp_replace(value, "(?:" + regex + ")+$", ""), regex)


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
    out = _replace(df, a.destination, step.col(a.source))
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
    out = conceal(_replace(exposed, a.column, value), shown)
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
        return F.coalesce(_as_text(df, c, step.col(c)), F.lit("null"))
    value = F.concat(text(a.first), F.lit(a.delimiter or ""), text(a.second))
    return Outcome(_replace(df, a.destination, value),
                   L.read(a.first, a.second) + L.add(a.destination))


def _max_pieces(step: StepContext, df: "DataFrame", column: str, regex: str) -> int:
    step.action()
    row = df.select(F.max(F.size(_java_split(step.col(column).cast("string"), regex)))).first()
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
    parts = _java_split(step.col(a.column).cast("string"), a.regex)
    new = [(f"{a.column}_{i}", F.try_element_at(parts, F.lit(i))) for i in range(1, n + 1)]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d")),
                   note=f"one job counted {n} pieces")


@register_directive("split-to-rows <column:column> <regex:regex>")
def split_to_rows(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """One row per regex-separated piece of ``column`` (Java's ``String.split``: trailing
    empty pieces dropped). Wrangler fails on a null value; fll keeps the row with null.

    Labels: MODIFY column (other columns' values are repeated, not changed).
    """
    step.require(df, [a.column])
    value = F.explode_outer(_java_split(step.col(a.column).cast("string"), a.regex))
    return Outcome(_replace(df, a.column, value), L.modify(a.column))


def _csv_header(values: list[str]) -> bool:
    """Wrangler's test that a first record is a header: every value is non-empty text
    (not a number or boolean) and no value repeats."""
    seen: set[str] = set()
    for v in values:
        t = v.strip()
        if not t or v in seen or t.lower() in ("true", "false") or \
                re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[LlFfDd]?", t):
            return False
        seen.add(v)
    return True


@register_directive("parse-as-csv <column:column> [<delimiter:text>] [<header:bool>]")
def parse_as_csv(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse ``column`` as one CSV record per row into new columns (source kept).

    The delimiter is one character (Wrangler uses the first one given; Java
    escapes such as ``\\t`` or ``\\u0001`` work quoted or not). Without header the
    columns are ``column_1`` … ``column_n``; n is the largest number of fields
    (one aggregation job that honours quotes). With header=true the first
    non-empty value (one ``limit(1)`` job) is the header when Wrangler would take
    it as one (every field non-empty text, not a number, no repeats): names are
    trimmed and runs of white space become ``_``; every row equal to it is
    removed (Wrangler drops only the first). Otherwise the columns are numbered.
    Fields are read as Commons CSV's DEFAULT format reads them: ``""`` inside quotes
    is one quote, a backslash is itself, an empty field is empty text (a trailing one
    too) and the spaces around a field are kept; a row with fewer fields gets nulls,
    and a null or empty value gives nulls. Labels: READ column, ADD all columns minus
    <the columns before>.
    """
    step.require(df, [a.column])
    delim = (a.delimiter if a.delimiter is not None else ",")[:1]
    if not delim:
        raise step.error("the delimiter is empty")
    src = _as_text(df, a.column, step.col(a.column))
    names: list[str] = []
    note = ""
    if a.header:
        step.action()
        first = df.select(src).where(src.isNotNull() & (src != "")).limit(1).collect()
        if first:
            header_line = first[0][0]
            fields = next(csv.reader([header_line], delimiter=delim), [])
            if _csv_header(fields):
                names = [re.sub(r"\s+", "_", n.strip()) for n in fields]
                df = df.where(src.isNull() | (src != F.lit(header_line)))
                note = "one job read the header"
    # split only on delimiters outside double quotes, so "x,y" counts as one field; a
    # trailing empty field counts (Commons CSV keeps it, unlike String.split)
    outside = java_quote(delim) + '(?=(?:[^"]*"[^"]*")*[^"]*$)'
    field_count = F.when(src != F.lit(""), F.size(F.split(src, outside, -1)))
    if not names:
        step.action()
        row = df.select(F.max(field_count)).first()
        pieces = int(row[0] or 0) if row is not None else 0
        names = [f"{a.column}_{i}" for i in range(1, pieces + 1)]
        note = (note + "; " if note else "") + f"one job counted {pieces} fields"
    for n in names:
        if n in df.columns:
            raise step.error(f"parsed column {n!r} already exists")
    if len(set(names)) != len(names):
        raise step.error(f"the header repeats a column name: {names}")
    before = list(df.columns)
    if names:
        schema = ", ".join(f"{quote(n)} STRING" for n in names)
        # Commons CSV's DEFAULT format: "" inside quotes is one quote, a backslash is
        # itself, and an empty field is empty text; Spark reads an empty field as null,
        # so a field the record has is turned back into "" (a field it lacks stays null)
        parsed = F.from_csv(src, schema, {"sep": delim, "escape": '"'})
        new = [(n, F.when(field_count >= F.lit(i), F.coalesce(parsed.getField(n), F.lit(""))))
               for i, n in enumerate(names, start=1)]
        df = _add_all(df, new)
    return Outcome(df, L.read(a.column) + L.add(L.all_columns_minus(*before)), note=note)


_JSON_SAMPLE = 1000


def _json_type(value) -> str:
    """The Spark type of one JSON leaf; objects and arrays stay JSON text, as Wrangler
    keeps them as JsonObject / JsonArray."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    return "string"


def _merge_type(old: str | None, new: str) -> str:
    if old is None or old == new:
        return new
    if {old, new} == {"bigint", "double"}:
        return "double"
    return "string"


def _json_leaves(doc: dict, depth: int, leaves: dict[tuple[str, ...], str | None],
                 path: tuple[str, ...] = ()) -> None:
    """Wrangler's jsonFlatten: keys in document order, objects opened down to ``depth``."""
    for key, value in doc.items():
        here = path + (key,)
        if isinstance(value, dict) and len(here) < depth:
            _json_leaves(value, depth, leaves, here)
        elif value is None:
            leaves.setdefault(here, None)
        else:
            leaves[here] = _merge_type(leaves.get(here), _json_type(value))


class _JsonNode:
    """One key of the sampled JSON: its leaf type (a value that is no object to open, in
    some row) and the keys below it (an object to open, in some row)."""

    def __init__(self) -> None:
        self.leaf: str | None = None
        self.is_leaf = False
        self.children: dict[str, "_JsonNode"] = {}

    @property
    def mixed(self) -> bool:
        """An object in some rows and another value (an array, text…) in others."""
        return self.is_leaf and bool(self.children)


def _json_tree(leaves: dict[tuple[str, ...], str | None]) -> dict[str, _JsonNode]:
    tree: dict[str, _JsonNode] = {}
    for path, kind in leaves.items():
        nodes = tree
        node = None
        for part in path:
            node = nodes.setdefault(part, _JsonNode())
            nodes = node.children
        assert node is not None
        node.is_leaf, node.leaf = True, kind or "string"
    return tree


def _json_schema(tree: dict[str, _JsonNode]) -> str:
    def kind(node: _JsonNode) -> str:
        if node.mixed:          # read as its JSON text, opened per row (`_json_values`)
            return "string"
        if node.children:
            return f"STRUCT<{fields(node.children)}>"
        return node.leaf or "string"

    def fields(nodes: dict[str, _JsonNode]) -> str:
        return ", ".join(f"{quote(k)}: {kind(v)}" for k, v in nodes.items())
    return f"STRUCT<{fields(tree)}>"


def _json_values(parsed: "Column", tree: dict[str, _JsonNode],
                 path: tuple[str, ...] = ()) -> dict[tuple[str, ...], "Column"]:
    """Each leaf path's value. A key that is an object in some rows and another value in
    others (a repeated XML element, an array) gives, per row, the value as JSON text
    where it is no object, and its keys' columns where it is one, as Wrangler's
    jsonFlatten does row by row."""
    out: dict[tuple[str, ...], "Column"] = {}
    for key, node in tree.items():
        here, value = path + (key,), parsed.getField(key)
        if node.mixed:
            is_object = F.ltrim(value).startswith("{")
            leaf = F.when(~is_object, value)
            out[here] = leaf if node.leaf == "string" else leaf.cast(node.leaf or "string")
            opened = F.from_json(F.when(is_object, value), _json_schema(node.children))
            out.update(_json_values(opened, node.children, here))
        elif node.children:
            out.update(_json_values(value, node.children, here))
        else:
            out[here] = value
    return out


@register_directive("parse-as-json <column:column> [<depth:int>]")
def parse_as_json(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse JSON text per row as Wrangler does: an object becomes ``column_key`` columns
    in document key order, nested objects opened down to ``depth`` (default: all the
    way) and deeper objects and arrays kept as JSON text; the source column is removed
    and rows whose value is null or a JSON primitive are dropped, as in Wrangler's code.
    A column of arrays becomes one row per element instead (the column holds the
    element; an empty array keeps its row with null).

    The keys and their types are data dependent: one job reads the first 1000 non-null
    values (keys seen only later are not found). A value that is not JSON (Spark's
    strict parser; Wrangler's Gson is lenient and also takes unquoted names) goes to the
    recipe's error output with ``errCode`` 1, as Wrangler's error row. Labels: READ
    column (read into the new columns, then gone), ADD all columns minus <the columns
    before>; DROP column when no key was found; arrays: MODIFY column.
    """
    step.require(df, [a.column])
    src = _as_text(df, a.column, step.col(a.column))
    # Text that is not JSON is an error row, as Wrangler's ErrorRowException: it goes to
    # the recipe's error output (the stage's errors port), never a row of nulls.
    bad = src.isNotNull() & F.try_parse_json(src).isNull()
    kept, to_error = error_rows(step, df.where(src.isNotNull()), bad, F.concat(
        F.lit(f"malformed JSON in column '{a.column}': "), src), 1)
    return flatten_json(step, kept, a.column, src, a.depth, to_error)


def flatten_json(step: StepContext, df: "DataFrame", column: str, src: "Column",
                 depth: int | None, extra: dict | None = None) -> Outcome:
    """Replace ``column`` by the keys of the JSON text ``src`` (parse-as-json's
    flattening, shared with parse-xml-to-json); one job samples the keys."""
    extra = extra or {}
    depth = 2 ** 31 - 1 if depth is None else depth
    if depth < 1:
        raise step.error("depth must be at least 1")
    step.action()
    sample = [r[0] for r in df.select(src).where(src.isNotNull()).limit(_JSON_SAMPLE).collect()]
    docs = []
    for text in sample:
        try:
            docs.append(json.loads(text))
        except ValueError:
            continue
    # Wrangler adds a JSON primitive's row to no output (the row is dropped)
    kept = df.where(src.rlike(r"^\s*[\[{]"))
    containers = [d for d in docs if isinstance(d, (list, dict))]
    if containers and all(isinstance(d, list) for d in containers):
        # an empty array keeps its row, without the column's value
        value = F.explode_outer(F.from_json(src, "ARRAY<STRING>"))
        return Outcome(_replace(kept, column, value), L.modify(column),
                       note="one job found arrays: one row per element", **extra)
    leaves: dict[tuple[str, ...], str | None] = {}
    for d in docs:
        if isinstance(d, dict):
            _json_leaves(d, depth, leaves)
    names = {path: "_".join((column,) + path) for path in leaves}
    before = [c for c in df.columns if c != column]
    for n in names.values():
        if n in before:
            raise step.error(f"parsed column {n!r} already exists")
    if len(set(names.values())) != len(names):
        raise step.error("two JSON keys give the same column name")
    tree = _json_tree(leaves)
    values = _json_values(F.from_json(src, _json_schema(tree)), tree) if leaves else {}
    new: list[tuple[str, "Column"]] = [(name, values[path]) for path, name in names.items()]
    out = kept.select([F.col(quote(c)) for c in before] + [v.alias(n) for n, v in new])
    # the source is READ into the new columns and gone after the step (Wrangler removes
    # it); only when no key was found is it simply dropped
    labels = L.read(column) + L.add(L.all_columns_minus(*before)) if new else L.drop(column)
    return Outcome(out, labels, note=f"one job found {len(leaves)} keys", **extra)


# -- value transformations (MODIFY) -------------------------------------------

def _modify(step: StepContext, df: "DataFrame", column: str, value: "Column",
            masking: bool = False) -> Outcome:
    return Outcome(_replace(df, column, value), L.modify(column), masking=masking)


def _string_only(df: "DataFrame", column: str, value: "Column", original: "Column") -> "Column":
    """Wrangler changes only String values; other types pass through unchanged."""
    return value if _is_string(df, column) else original


@register_directive("lowercase <column:column>")
def lowercase(step, df, a):
    """Lower-case the text values of ``column`` (other types unchanged). Labels: MODIFY."""
    step.require(df, [a.column])
    c = step.col(a.column)
    return _modify(step, df, a.column, _string_only(df, a.column, F.lower(c), c))


@register_directive("uppercase <column:column>")
def uppercase(step, df, a):
    """Upper-case the text values of ``column`` (other types unchanged). Labels: MODIFY."""
    step.require(df, [a.column])
    c = step.col(a.column)
    return _modify(step, df, a.column, _string_only(df, a.column, F.upper(c), c))


# Wrangler's Trimmer: the Unicode white space set, Java's trim() characters and NEL.
_WHITESPACE = ("\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{180E}\\x{2000}-\\x{200A}"
               "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}")


def _trimmed(step, df, column: str, left: bool, right: bool) -> Outcome:
    step.require(df, [column])
    c = step.col(column)
    pattern = "|".join(([f"^[{_WHITESPACE}]+"] if left else []) +
                       ([f"[{_WHITESPACE}]+$"] if right else []))
    return _modify(step, df, column, _string_only(df, column, F.regexp_replace(c, pattern, ""), c))


@register_directive("trim <column:column>")
def trim(step, df, a):
    """Remove leading and trailing white space as Wrangler does: space, tab, line breaks,
    form feed, no-break and the other Unicode spaces. Labels: MODIFY column."""
    return _trimmed(step, df, a.column, True, True)


@register_directive("ltrim <column:column>")
def ltrim(step, df, a):
    """Remove leading white space (the set `trim` removes). Labels: MODIFY column."""
    return _trimmed(step, df, a.column, True, False)


@register_directive("rtrim <column:column>")
def rtrim(step, df, a):
    """Remove trailing white space (the set `trim` removes). Labels: MODIFY column."""
    return _trimmed(step, df, a.column, False, True)


@register_directive("titlecase <column:column>")
def titlecase(step, df, a):
    """Title-case each word as Wrangler's WordUtils.capitalizeFully: first letter up, the
    rest lower, words split on any Java white space (tab and line breaks too, not the
    no-break spaces). Labels: MODIFY column."""
    step.require(df, [a.column])
    c = step.col(a.column)
    # initcap splits on spaces only: cut after each white space first, so every piece
    # starts a word, and title-case the pieces
    pieces = F.split(c, r"(?<=[\s\x1C-\x1F\u1680\u2000-\u2006\u2008-\u200A\u2028\u2029"
                        r"\u205F\u3000])")
    value = F.array_join(F.transform(pieces, F.initcap), "")
    return _modify(step, df, a.column, _string_only(df, a.column, value, c))


def _not_empty(value: str) -> str | None:
    return "the fill value cannot be empty" if value == "" else None


def _fits_type(value: str, kind: str) -> bool:
    """Whether Spark's cast turns ``value`` into a ``kind`` value (numbers and booleans)."""
    if kind in ("byte", "short", "integer", "long"):
        return re.fullmatch(r"\s*[+-]?\d+\s*", value) is not None
    if kind in ("float", "double", "decimal"):
        return re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", value) is not None
    if kind == "boolean":
        return value.strip().lower() in ("true", "false")
    return False


@register_directive("fill-null-or-empty <column:column> <value:text>",
                    checks={"value": _not_empty})
def fill_null_or_empty(step, df, a):
    """Replace null (and, for strings, empty) values with ``value``. A column that is not
    there is added holding ``value``, as in Wrangler. Wrangler puts the text itself into
    a column of any type; a Spark column has one type, so a number or boolean column
    keeps its type when ``value`` reads as one (``0`` into an int column) and otherwise
    becomes text holding its values' text and ``value`` (``N/A`` into an int column),
    never a silent null. Labels: MODIFY column (ADD when added)."""
    if a.column not in df.columns:
        return Outcome(_replace(df, a.column, F.lit(a.value)), L.add(a.column))
    c = step.col(a.column)
    kind = df.schema[a.column].dataType.typeName()
    if kind == "string":
        return _modify(step, df, a.column, F.when(c.isNull() | (c == F.lit("")), F.lit(a.value))
                       .otherwise(c))
    if _fits_type(a.value, kind):
        dtype = df.schema[a.column].dataType.simpleString()
        fill = F.expr(f"try_cast({_sql_str(a.value)} AS {dtype})")
        return _modify(step, df, a.column, F.when(c.isNull(), fill).otherwise(c))
    return _modify(step, df, a.column, F.when(c.isNull(), F.lit(a.value))
                   .otherwise(c.cast("string")))


def _sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sed_value(c: "Column", sed) -> "Column":
    pattern = ("(?i)" if sed.ignore_case else "") + sed.pattern
    if sed.global_:
        return F.regexp_replace(c, pattern, sed.replacement)
    # Spark only replaces every match; for the first one only, match the shortest
    # prefix plus the pattern and shift the replacement's group references by one.
    shifted = re.sub(r"\$(\d+)", lambda m: "$" + str(int(m.group(1)) + 1), sed.replacement)
    return F.regexp_replace(c, "(?s)^(.*?)(?:" + pattern + ")", "$1" + shifted)


@register_directive("find-and-replace <columns:columns> <sed:sed>")
def find_and_replace(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Apply ``s/regex/replacement/[g][i]`` to the values of each listed column.

    The replacement uses Java syntax (``$1`` for a group). Without ``g`` only the
    first match is replaced. As in Wrangler only text values change: a column of
    another type is left as it is, and a listed column that is not there is skipped.
    Sed's occurrence flags (``s/a/b/2``) are refused: Spark replaces all or the first.
    Labels: MODIFY each text column.
    """
    names = [c for c in dict.fromkeys(a.columns) if c in df.columns and _is_string(df, c)]
    out = df
    for c in names:
        out = _replace(out, c, _sed_value(step.col(c), a.sed))
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
    c = _as_text(df, column, step.col(column))
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


_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


def jexl_to_sql(condition: str) -> str:
    """Rewrite the JEXL operators Wrangler's conditions use into Spark SQL, outside quoted
    text: ``&&`` AND, ``||`` OR, ``!`` NOT, ``== null`` IS NULL, ``!= null`` IS NOT NULL,
    ``a =~ 're'`` / ``a !~ 're'`` a whole-value (NOT) RLIKE. JEXL method calls
    (``Age.isEmpty()``) and Wrangler's function libraries are not translated."""
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


def _jexl_ops(text: str) -> str:
    text = _null_tests(text).replace("&&", " AND ").replace("||", " OR ")
    return re.sub(r"!(?![=~])", " NOT ", text)


def _condition(step: StepContext, df: "DataFrame", condition: str) -> tuple["Column", list[str]]:
    """A Spark SQL condition as a never-null boolean (null counts as false) and the
    columns it reads. A condition Spark cannot read is tried once more with Wrangler's
    JEXL operators rewritten (`jexl_to_sql`)."""
    if not condition.strip():
        raise step.error("no condition given")
    # ``x == null`` is never true in SQL, but it is Wrangler's null test: always rewrite it
    condition = _outside_quotes(condition, _null_tests)
    try:
        refs = step.references(df, condition)
    except RecipeError as first:
        translated = jexl_to_sql(condition)
        if translated == condition:
            raise
        try:
            refs = step.references(df, translated)
        except RecipeError as second:
            # a condition that is not SQL at all is JEXL: its error says more (a name
            # that is not there) than Spark's syntax error at the first ``&&``
            raise (second if "PARSE_SYNTAX_ERROR" in str(first) else first) from None
        condition = translated
    return F.coalesce(F.expr(condition).cast("boolean"), F.lit(False)), refs


def _filter(step, df, condition: str, remove_when: bool) -> Outcome:
    exposed, shown = expose(step, df)      # set-variable's variables, read by name
    cond, refs = _condition(step, exposed, condition)
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


# -- rows to the error output, and failing the run ----------------------------------

ERROR_MESSAGE, ERROR_CODE = "errMsg", "errCode"


def _to_error(step, df, a, suffix: str) -> Outcome:
    exposed, shown = expose(step, df)
    cond, refs = _condition(step, exposed, a.condition)
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
    cond, refs = _condition(step, exposed, a.condition)
    # The check inside the job names only the columns the condition reads: a filter
    # that referenced every column could not be pushed below the projections, and would
    # keep alive columns the recipe later drops (the cost that put the benchmark at 1.5).
    # `CompiledRecipe.run_error` reads the whole row from ``probe`` once a run failed.
    row = F.lit(FAIL_ROW_UNREAD)   # and no value at all: see builtin_support.fail_when
    marker = F.concat(F.lit(f"{FAIL_MARKER}line {step.line}: fail: condition "
                            f"'{a.condition}'{FAIL_ROW}"), row, F.lit(FAIL_MARKER))
    checked = conceal(exposed.where(F.when(cond, F.raise_error(marker))
                                    .otherwise(F.lit(True))), shown)
    probe = exposed.where(cond).select([F.col(quote(c)) for c in visible(df.columns)])
    return Outcome(checked, L.read(*reads_through(refs, shown, df.columns)), probe=probe)


#: Brackets the message `fail` raises inside Spark, so `run_errors` can find it again.
FAIL_MARKER = "\u2983fll\u2984"
#: What separates `fail`'s condition from the failing row's values in its message.
FAIL_ROW = " is true for row "
#: What stands for the row inside the job; `run_error` puts the row's values there.
FAIL_ROW_UNREAD = "\u2026"


@register_directive("mask-number <column:column> <pattern:text>")
def mask_number(step, df, a):
    """Mask a value with a pattern, as Wrangler walks it: ``#`` copies the value's next
    character, ``x``/``X`` writes ``x`` over it, any other pattern character is written
    and skips the value's next character only when they are equal (``xxx-xx-####`` on
    ``123-45-6789`` and on ``123456789`` both give ``xxx-xx-6789``). Non-text values are
    masked as text; null stays null. A column that is not there is added holding empty
    text, as Wrangler's code does. Labels: MODIFY column (ADD when added).
    """
    if a.column not in df.columns:
        return Outcome(_replace(df, a.column, F.lit("")), L.add(a.column))
    v = _as_text(df, a.column, step.col(a.column))
    if not a.pattern:
        return _modify(step, df, a.column, F.when(v.isNotNull(), F.lit("")), masking=True)
    chars = F.array(*[F.lit(ch) for ch in a.pattern])
    n = F.length(v)

    def walk(acc: "Column", m: "Column") -> "Column":
        i, out = acc["i"], acc["o"]
        here = F.substring(v, i, 1)
        hashed = F.when(i > n, acc).otherwise(F.struct((i + 1).alias("i"),
                                                       F.concat(out, here).alias("o")))
        crossed = F.struct((i + 1).alias("i"), F.concat(out, F.lit("x")).alias("o"))
        literal = F.struct(F.when((i <= n) & (here == m), i + 1).otherwise(i).alias("i"),
                           F.concat(out, m).alias("o"))
        return F.when(m == "#", hashed).when((m == "x") | (m == "X"), crossed) \
            .otherwise(literal)
    start = F.struct(F.lit(1).alias("i"), F.lit("").alias("o"))
    value = F.when(v.isNotNull(), F.aggregate(chars, start, walk, lambda acc: acc["o"]))
    return _modify(step, df, a.column, value, masking=True)


# Wrangler's algorithm names (exact spelling) that Spark computes natively.
_HASHES = {"MD5": None, "SHA": None, "SHA-1": None, "SHA-224": 224, "SHA-256": 256,
           "SHA-384": 384, "SHA-512": 512}
# Wrangler's other algorithms that Python's hashlib computes (through a Python UDF).
_PY_HASHES = {"SHA3-224": ("sha3_224", None), "SHA3-256": ("sha3_256", None),
              "SHA3-384": ("sha3_384", None), "SHA3-512": ("sha3_512", None),
              "SHA-512/224": ("sha512_224", None), "SHA-512/256": ("sha512_256", None),
              "BLAKE2B-160": ("blake2b", 20), "BLAKE2B-256": ("blake2b", 32),
              "BLAKE2B-384": ("blake2b", 48), "BLAKE2B-512": ("blake2b", 64),
              "RIPEMD160": ("ripemd160", None), "SM3": ("sm3", None), "MD4": ("md4", None)}


def _py_hash_available(name: str) -> bool:
    import hashlib
    try:
        hashlib.new(name)
        return True
    except (ValueError, TypeError):
        return False


_PY_HASHES = {k: v for k, v in _PY_HASHES.items() if _py_hash_available(v[0])}
# Wrangler knows these too (Bouncy Castle); neither Spark nor hashlib has them.
# Spelled exactly as MessageHash's list (its check is case sensitive: Tiger and TIGER).
_WRANGLER_ONLY_HASHES = ("GOST3411-2012-256", "GOST3411-2012-512", "GOST3411", "KECCAK-224",
                         "KECCAK-256", "KECCAK-288", "KECCAK-384", "KECCAK-512", "MD2", "MD4",
                         "RIPEMD128", "RIPEMD160", "RIPEMD256", "RIPEMD320", "Skein-1024-1024",
                         "Skein-1024-384", "Skein-1024-512", "Skein-256-128", "Skein-256-160",
                         "Skein-256-224", "Skein-256-256", "Skein-512-128", "Skein-512-160",
                         "Skein-512-224", "Skein-512-256", "Skein-512-384", "Skein-512-512",
                         "SM3", "Tiger", "TIGER", "WHIRLPOOL")


def _hash_check(value: str) -> str | None:
    if value in _HASHES or value in _PY_HASHES:
        return None
    known = ", ".join(list(_HASHES) + list(_PY_HASHES))
    if value in _WRANGLER_ONLY_HASHES:
        return f"algorithm {value!r} is not available here; use one of {known}"
    hint = f" (names are case sensitive: {value.upper()!r})" if value.upper() in _HASHES \
        or value.upper() in _PY_HASHES else ""
    return f"unknown algorithm {value!r}{hint}; known: {known}"


def _py_digest(algorithm: str) -> Callable[["Column"], "Column"]:
    import hashlib

    from pyspark.sql.types import BinaryType
    name, size = _PY_HASHES[algorithm]

    def digest(value):
        if value is None:
            return None
        data = bytes(value) if isinstance(value, (bytes, bytearray)) else value.encode("utf-8")
        h = hashlib.blake2b(data, digest_size=size) if size else hashlib.new(name, data)
        return h.digest()
    return F.udf(digest, BinaryType())


@register_directive("hash <column:column> <algorithm:text> [<encode:bool>]",
                    checks={"algorithm": _hash_check})
def hash_(step, df, a):
    """Replace values with their message digest. MD5, SHA/SHA-1 and SHA-224/256/384/512
    run as Spark functions; SHA3-*, SHA-512/224, SHA-512/256, BLAKE2B-* (and RIPEMD160,
    SM3 where Python's OpenSSL has them) run as a Python UDF, slower; Wrangler's other
    Bouncy Castle algorithms (KECCAK, GOST, SKEIN, TIGER, WHIRLPOOL…) are refused.
    encode=true, the default as Wrangler documents it (hash.md: "By default, <encode> is
    set to true", and its example gives hex without the argument), gives lower-case hex
    left-padded with zeros to at least 64 digits, as Wrangler formats it (``%064x`` of
    the digest as a number: an MD5 gets 32 leading zeros); encode=false the raw digest
    bytes (binary). Wrangler's code defaults to false; fll follows the documentation.
    As in Wrangler a null value stops the run and a column that is neither text nor
    binary is refused. Labels: MODIFY column (masking)."""
    step.require(df, [a.column])
    kind = df.schema[a.column].dataType.typeName()
    if kind not in ("string", "binary"):
        raise step.error(f"column {a.column!r} has type {kind}; it should be string or binary")
    c = step.col(a.column)
    encode = a.encode is not False
    if a.algorithm in _PY_HASHES:
        raw = _py_digest(a.algorithm)(c)
        value = _wrangler_hex(F.lower(F.hex(raw))) if encode else raw
    else:
        bits = _HASHES[a.algorithm]
        hexed = (F.md5(c) if a.algorithm == "MD5" else F.sha1(c) if bits is None
                 else F.sha2(c, bits))
        # up to 256 bits %064x is a plain left-pad of Spark's lower-case hex
        value = (F.unhex(hexed) if not encode else F.lpad(hexed, 64, "0")
                 if (bits or 0) <= 256 else _wrangler_hex(hexed))
    value = fail_when(step, c.isNull(), value,
                      null_value(a.column, "'String' or 'byte array'"))
    return _modify(step, df, a.column, value, masking=True)


def _wrangler_hex(hexed: "Column") -> "Column":
    """``String.format("%064x", new BigInteger(1, digest))`` of a digest in lower-case
    hex: as a number its leading zero digits go, then it is left-padded with zeros to 64
    digits (a 512-bit digest starting with a zero digit comes out 127 digits long)."""
    hexed = F.regexp_replace(hexed, "^0+(?=.)", "")
    return F.when(F.length(hexed) < 64, F.lpad(hexed, 64, "0")).otherwise(hexed)


# Wrangler's type names (ColumnConverter) and the Spark type each becomes.
_TYPES = {"int": "int", "integer": "int", "i64": "int", "short": "smallint", "i32": "smallint",
          "long": "bigint", "float": "float", "double": "double", "string": "string",
          "boolean": "boolean", "bool": "boolean", "bytes": "binary", "decimal": "decimal",
          "date": "date", "timestamp": "timestamp"}
_INT_BYTES = {"byte": 1, "short": 2, "integer": 4, "long": 8}
_ROUNDING = ("UP", "DOWN", "CEILING", "FLOOR", "HALF_UP", "HALF_DOWN", "HALF_EVEN",
             "UNNECESSARY")


def _type_check(value: str) -> str | None:
    if value.lower() in _TYPES:
        return None
    return f"unsupported type {value!r}; supported: int, short, long, float, double, " \
           f"decimal, boolean, string, bytes (and date, timestamp)"


def _rounding_check(value: str) -> str | None:
    return None if value in _ROUNDING else \
        f"{value!r} is not a Java rounding mode; known: {', '.join(_ROUNDING)}"


@register_directive("set-type <column:column> <type:text> [<scale:int>] "
                    "[<rounding_mode:text>] [<precision:props>]",
                    checks={"type": _type_check, "rounding_mode": _rounding_check})
def set_type(step, df, a):
    """Convert ``column`` to int, short, long, float, double, decimal, boolean, string or
    bytes (plus date and timestamp), with Wrangler's conversions: boolean of a number is
    ``value > 0`` and of text ``value equals 'true'`` ignoring case; bytes of text are its
    UTF-8 bytes and of an integer its big-endian bytes; decimal takes an optional scale,
    a Java rounding mode (default HALF_EVEN once a scale or precision is given) and
    ``prop:{precision=p}``; a negative scale rounds to tens, hundreds… (held with scale
    0) and a precision without scale rounds to p significant digits, as BigDecimal.round
    (held as decimal(38,p), since a Spark column has one scale where Wrangler keeps
    each value's own; for the same reason decimal without either holds 18 places). Spark: a value that does not convert becomes null instead of
    failing the record. Labels: MODIFY column.
    """
    step.require(df, [a.column])
    kind = _TYPES[a.type.lower()]
    c = step.col(a.column)
    src = df.schema[a.column].dataType.typeName()
    numeric = src in ("byte", "short", "integer", "long", "float", "double", "decimal")
    precision = (a.precision or {}).get("precision")
    if kind != "decimal" and (a.scale is not None or a.rounding_mode or a.precision):
        raise step.error("scale, rounding mode and precision apply to decimal only")
    if kind == "boolean":
        value = (c > 0) if numeric else \
            F.when(c.isNotNull(), F.lower(c.cast("string")) == "true") if src != "boolean" else c
    elif kind == "binary" and src in ("float", "double", "decimal"):
        raise step.error(f"bytes of a {src} value are not supported on Spark")
    elif kind == "binary" and src in _INT_BYTES:   # big-endian two's complement, as Bytes.toBytes
        digits = _INT_BYTES[src] * 2
        value = F.unhex(F.expr(f"right(lpad(hex({quote(a.column)}), 16, '0'), {digits})"))
    elif kind == "decimal":
        value = _to_decimal(step, c, a.scale, precision, a.rounding_mode)
    else:
        value = F.expr(f"try_cast({quote(a.column)} AS {kind})")
    return Outcome(_replace(df, a.column, value), L.modify(a.column))


def _to_decimal(step, c: "Column", scale, precision, mode) -> "Column":
    if precision is not None and (not isinstance(precision, int) or precision < 1):
        raise step.error("precision cannot be less than 1")
    if precision is not None and precision > 38:
        raise step.error("Spark decimals hold at most 38 digits (precision 38)")
    if scale is None and precision is None and mode:
        raise step.error("'rounding-mode' can only be specified when a 'scale' or "
                         "'precision' is set")
    if scale is not None and not -38 <= scale <= 38:
        raise step.error("scale must be between -38 and 38")
    mode = mode or "HALF_EVEN"
    if scale is None and precision is not None:
        return _significant(c, precision, mode)
    if scale is not None and scale < 0:
        # BigDecimal.setScale(-k) rounds to a multiple of 10^k; Spark decimals have no
        # negative scale, so the rounded value is held with scale 0
        unit = F.lit(Decimal(10) ** -scale).cast(f"decimal({1 - scale},0)")
        exact = c.cast("string").cast("decimal(38,10)")
        rounded = _round(exact / unit, 0, mode) * unit
        return rounded.cast(f"decimal({precision or 38},0)")
    p = precision if precision is not None else 38
    s = scale if scale is not None else min(18, p - 1 if p > 1 else 0)
    if s >= p and precision is not None:
        raise step.error(f"scale {s} needs a precision above it, got {p}")
    exact = c.cast("string").cast(f"decimal(38,{min(s + 10, 38)})")
    rounded = _round(exact, s, mode)
    if mode == "UNNECESSARY":
        # BigDecimal.setScale(s, UNNECESSARY) throws "Rounding necessary"; a null stays
        rounded = fail_when(step, rounded != exact, rounded,
                            "rounding necessary (rounding mode UNNECESSARY)",
                            F.concat(F.lit("rounding necessary (rounding mode UNNECESSARY): "),
                                     c.cast("string"), F.lit(f" at scale {s}")))
    return rounded.cast(f"decimal({p},{s})")


def _significant(c: "Column", p: int, mode: str) -> "Column":
    """BigDecimal.round(new MathContext(p, mode)): ``p`` significant digits. The number
    of places depends on the value's integer digits, so each count gets its branch; the
    result is held as decimal(38, p) (at most 38 - p integer digits)."""
    exact = c.cast("string").cast("decimal(38,18)")
    size = F.abs(exact)
    held = f"decimal(38,{p})"   # every branch in one type: a CASE over different decimal
    value: "Column" = _round(exact, p, mode).cast(held)   # types would drop their scale
    # |x| < 1 above: p places (an approximation of p significant digits)
    for digits in range(1, min(38 - p, 20) + 1):       # 10^(d-1) <= |x|: the largest d wins
        low = F.lit(Decimal(10) ** (digits - 1)).cast("decimal(38,0)")
        places = p - digits
        branch = _round(exact, places, mode) if places >= 0 else \
            _round(exact / F.lit(Decimal(10) ** -places).cast("decimal(38,0)"), 0, mode) \
            * F.lit(Decimal(10) ** -places).cast("decimal(38,0)")
        value = F.when(size >= low, branch.cast(held)).otherwise(value)
    return value


def _round(x: "Column", s: int, mode: str) -> "Column":
    """Round decimal ``x`` to ``s`` places with a Java RoundingMode."""
    if mode == "HALF_UP":
        return F.round(x, s)
    if mode == "HALF_EVEN":
        return F.bround(x, s)
    if mode in ("UNNECESSARY",):
        return F.bround(x, s)
    unit = F.lit(10 ** s).cast("decimal(38,0)")
    a = F.abs(x) * unit
    if mode == "FLOOR":
        return F.floor(x * unit) / unit
    if mode == "CEILING":
        return F.ceil(x * unit) / unit
    if mode == "DOWN":
        return F.signum(x).cast("int") * F.floor(a) / unit
    if mode == "UP":
        return F.signum(x).cast("int") * F.ceil(a) / unit
    # HALF_DOWN: away from zero only when strictly above the half
    return F.signum(x).cast("int") * F.ceil(a - F.lit(0.5).cast("decimal(2,1)")) / unit


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


# -- parsing and generating (READ + ADD) -------------------------------------

_SKIPPABLE = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]|\(\?|(\||\?|\*|\{0\b)")


def _may_skip_groups(regex: str) -> bool:
    """Whether a capture group of ``regex`` can take no part in a match: it has an
    alternation or a quantifier that allows zero (outside escapes and classes)."""
    return any(m.group(1) for m in _SKIPPABLE.finditer(regex))


def _python_groups(regex: str) -> "Callable[[Column], Column] | None":
    """A UDF giving every match's groups (None for a group that took no part), or None
    when Python's ``re`` cannot read the Java regex."""
    import warnings

    from pyspark.sql.types import ArrayType, StringType
    translated = re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", regex)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            compiled = re.compile(translated, re.ASCII)
    except (re.error, OverflowError, RecursionError, ValueError):
        return None

    def groups(value):
        if value is None:
            return []
        return [list(m.groups()) for m in compiled.finditer(value)]
    return F.udf(groups, ArrayType(ArrayType(StringType())), useArrow=False)


@register_directive("extract-regex-groups <column:column> <regex:regex>")
def extract_regex_groups(step, df, a):
    """For every match of ``regex`` in ``column`` (Java ``Matcher.find()`` in turn), put
    each capture group into ``column_<match>_<group>``, as Wrangler does.

    The number of matches is data dependent: one aggregation job finds the
    largest over all rows; rows with fewer matches get nulls in the extra
    columns. A group that took no part in a match is null, as Java's ``group(i)``
    gives it to Wrangler. Spark's regexp_extract_all cannot tell such a group from an
    empty match, so a regex where a group can be skipped (``|``, ``?``, ``*`` or
    ``{0,…}``) is run by one Python UDF (Python's ``re`` with Java's ASCII classes and
    named groups); a regex Python cannot read stays on Spark, skipped groups empty. A
    column that is not text gets no columns, as Wrangler matches only String values.
    Labels: READ column, ADD all columns formatted column_%d_%d.
    """
    step.require(df, [a.column])
    try:
        groups = int(step.spark._jvm.java.util.regex.Pattern.compile(a.regex)
                     .matcher("").groupCount())
    except Exception as exc:
        raise step.error(f"bad regex {a.regex!r}: {str(exc).splitlines()[0]}") from None
    c = step.col(a.column)
    # Wrangler adds no column for a regex without groups, nor for values that are not text
    if groups == 0 or not _is_string(df, a.column):
        return Outcome(df, L.read(a.column))
    step.action()
    python = _python_groups(a.regex) if _may_skip_groups(a.regex) else None
    if python is not None:
        found_all = python(c)
        row = df.select(F.max(F.size(found_all))).first()
        matches = int(row[0] or 0) if row is not None else 0
        new = [(f"{a.column}_{m}_{g}", F.try_element_at(F.try_element_at(found_all, F.lit(m)),
                                                         F.lit(g)))
               for m in range(1, matches + 1) for g in range(1, groups + 1)]
        return Outcome(_add_all(df, new),
                       L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d_%d")),
                       note=f"one job counted {matches} matches")
    row = df.select(F.max(F.size(F.regexp_extract_all(c, F.lit(a.regex), 0)))).first()
    matches = int(row[0] or 0) if row is not None else 0
    found = [F.regexp_extract_all(c, F.lit(a.regex), g) for g in range(1, groups + 1)]
    new = [(f"{a.column}_{m}_{g}", F.try_element_at(found[g - 1], F.lit(m)))
           for m in range(1, matches + 1) for g in range(1, groups + 1)]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d_%d")),
                   note=f"one job counted {matches} matches")


# Wrangler: the address is between the last '<' and the last '>' when there is a '<';
# the account is everything before the last '@', the domain everything after it.
_BRACKETED = r"(?s)^.*<(.*)>[^>]*$"
_AT = r"(?s)^(.*)@([^@]*)$"


@register_directive("split-email <column:column>")
def split_email(step, df, a):
    """Split an email address into ``column_account`` and ``column_domain`` as Wrangler
    does: ``Name <addr@host>`` uses the part in angle brackets, the split is at the last
    ``@``, and a value without ``@`` (or an unclosed ``<``) gives nulls. Wrangler fails
    on a value that is not text (SplitEmailTest testBadType), so a column of another type
    is refused before anything runs. Labels: READ column, ADD both."""
    step.require(df, [a.column])
    if not _is_string(df, a.column):
        kind = df.schema[a.column].dataType.typeName()
        raise step.error(f"Column '{a.column}' has invalid type '{kind}'. It should be of "
                         f"type 'String'.")
    c = step.col(a.column)
    address = F.when(F.instr(c, "<") == 0, c).when(c.rlike(_BRACKETED), F.regexp_extract(c, _BRACKETED, 1))
    ok = address.rlike(_AT)
    new = [(f"{a.column}_account", F.when(ok, F.regexp_extract(address, _AT, 1))),
           (f"{a.column}_domain", F.when(ok, F.regexp_extract(address, _AT, 2)))]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(f"{a.column}_account", f"{a.column}_domain"))


@register_directive("generate-uuid <column:column>")
def generate_uuid(step, df, a):
    """Set ``column`` to a random UUID per row (Spark uuid(); replaces an existing
    column). Labels: ADD column (its old values, if any, are not read)."""
    return Outcome(_replace(df, a.column, F.expr("uuid()")), L.add(a.column))


@register_directive("format-date <column:column> <format:text>")
def format_date(step, df, a):
    """Format a date/timestamp column as text with a datetime pattern (Java's
    DateTimeFormatter letters as Wrangler; Spark refuses week-based letters, checked when
    the recipe compiles). Wrangler fails on a value that is not a date, so fll refuses a
    column of another type (text included) before anything runs; a date is formatted
    at the start of its day. Labels: MODIFY column."""
    step.require(df, [a.column])
    step.check_datetime_pattern(a.format)
    kind = df.schema[a.column].dataType.typeName()
    if kind not in ("date", "timestamp", "timestamp_ntz"):
        raise step.error(f"column {a.column!r} has type {kind}; it should be a date (parse it "
                         f"first with parse-as-date or parse-as-simple-date)")
    return _modify(step, df, a.column, F.date_format(step.col(a.column), a.format))


#: What parse-as-date reads besides ISO-like text (Spark's own timestamp syntax), tried in
#: turn: natty's US month-first numeric dates and written-out month names.
_NATURAL_PATTERNS = ("M/d/yyyy h:mm a", "M/d/yyyy h:mm:ss a", "M/d/yyyy H:mm", "M/d/yyyy H:mm:ss",
                     "M/d/yyyy", "M/d/yy", "MMMM d yyyy", "MMMM d, yyyy", "MMM d yyyy",
                     "MMM d, yyyy", "d MMMM yyyy", "d MMM yyyy", "MMMM d yyyy h:mm a")


@register_directive("parse-as-date <column:column> [<timezone:text>]")
def parse_as_date(step, df, a):
    """Parse the date in ``column`` into a new timestamp column ``column_1``, as Wrangler
    names natty's first date group (the source stays). Wrangler reads natural language
    with natty; Spark has none, so fll reads a fixed set of forms: Spark's ISO-like
    timestamps (``2016-12-10``, ``2016-12-10 06:45:11``, ``…T06:45:11.111Z``), natty's
    US numeric dates (``12/10/2016``, ``12/10/2016 06:45 AM``, ``12/10/16``), month names
    (``september 7th 2016``, ``Sep 7, 2016``, ``7 September 2016``, any case, ordinal
    suffixes dropped) and ``now``/``today`` (the query's clock); relative phrases
    (``the day before next thursday``), alternatives and dates inside longer text are
    not found (null), a date without a time is midnight where natty takes the current
    time of day, and fll never makes ``column_2``. The text is local time in the zone
    (default UTC, as Wrangler); a bad zone fails at compile time. fll also takes a Spark
    datetime pattern instead of a zone (``'dd/MM/yyyy'``). As in Wrangler a null value
    gives no date (null) and a timestamp column is left alone (no column added); a
    column of another type is refused up front (Wrangler sends each row to its error
    collector). Labels: READ column, ADD column_1."""
    step.require(df, [a.column])
    kind = df.schema[a.column].dataType.typeName()
    if kind in ("timestamp", "timestamp_ntz"):
        return Outcome(df, note=f"column {a.column!r} already holds dates: nothing added")
    if kind != "string":
        raise step.error(f"column {a.column!r} has type {kind}; it should be text")
    target = f"{a.column}_1"
    c = F.trim(step.col(a.column))
    zone, pattern = "UTC", None
    if a.timezone:
        try:
            zone = step.check_zone(a.timezone)
        except RecipeError:
            # a pattern is runs of one repeated letter (dd/MM/yyyy); a zone name is not
            runs = re.findall(r"[A-Za-z]+", re.sub(r"'[^']*'", "", a.timezone))
            if not runs or any(len(set(r)) > 1 for r in runs):
                raise
            pattern = a.timezone   # fll's extension: a datetime pattern instead of a zone
            step.check_datetime_pattern(pattern, parsing=True)
    if pattern:
        local = F.try_to_timestamp(c, F.lit(pattern))
    else:
        plain = F.regexp_replace(c, r"(?i)(\d)(st|nd|rd|th)\b", "$1")
        local = F.coalesce(F.try_to_timestamp(plain),
                           *[F.try_to_timestamp(plain, F.lit(p)) for p in _NATURAL_PATTERNS])
    session_zone = step.spark.conf.get("spark.sql.session.timeZone") or "UTC"
    value = F.from_utc_timestamp(F.to_utc_timestamp(local, zone), session_zone)
    if not pattern:
        value = F.when(F.lower(c).isin("now", "today"), F.current_timestamp()).otherwise(value)
    return Outcome(_replace(df, target, value), L.read(a.column) + L.add(target))
