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
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from . import labels as L
from .context import StepContext, java_quote, quote
from .parser import Args
from .registry import Outcome, register_directive

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
    if a.destination in df.columns and not a.force:
        raise step.error(f"destination {a.destination!r} exists; add true to overwrite it")
    if a.source == a.destination:
        raise step.error("source and destination are the same column")
    out = _replace(df, a.destination, step.col(a.source))
    return Outcome(out, L.read(a.source) + L.add(a.destination), identity=True)


@register_directive("rename <old:column> <new:column>")
def rename(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Rename ``old`` to ``new`` in place; ``new`` must not exist. Labels: RENAME old, new."""
    step.require(df, [a.old])
    if a.old != a.new:
        step.require_new(df, a.new)
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
    """Drop the listed columns (``drop a,b`` or ``drop :a :b``). Labels: DROP each."""
    step.require(df, a.columns)
    names = list(dict.fromkeys(a.columns))
    out = df.select([F.col(quote(c)) for c in df.columns if c not in names])
    return Outcome(out, L.drop(*names))


@register_directive("keep <columns:columns>")
def keep(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Keep only the listed columns, in their current order. Labels: DROP every other column."""
    step.require(df, a.columns)
    kept = set(a.columns)
    out = df.select([F.col(quote(c)) for c in df.columns if c in kept])
    return Outcome(out, L.drop(*[c for c in df.columns if c not in kept]))


@register_directive("set-column <column:column> <expression:expr>")
def set_column(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Set ``column`` to a Spark SQL expression (Wrangler uses JEXL; we use Spark SQL).

    Labels: READ every column the expression reads (found by Spark's analyzer),
    the target MODIFY if the expression reads it, else ADD (new or replaced).
    """
    refs = step.references(df, a.expression)
    out = _replace(df, a.column, F.expr(a.expression))
    reads = [c for c in refs if c != a.column]
    target = L.modify(a.column) if a.column in refs else L.add(a.column)
    return Outcome(out, L.read(*reads) + target)


@register_directive("merge <first:column> <second:column> <destination:column> "
                    "[<delimiter:text>]")
def merge(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Join two columns' values with ``delimiter`` (default empty) into a new column.

    Spark: built with concat_ws, so a null side is skipped rather than
    printed as "null". Labels: READ first, READ second, ADD destination.
    """
    step.require(df, [a.first, a.second])
    if a.destination in (a.first, a.second):
        raise step.error("the destination must differ from the merged columns")
    value = F.concat_ws(a.delimiter or "", step.col(a.first).cast("string"),
                        step.col(a.second).cast("string"))
    return Outcome(_replace(df, a.destination, value),
                   L.read(a.first, a.second) + L.add(a.destination))


def _max_pieces(step: StepContext, df: "DataFrame", column: str, regex: str) -> int:
    step.action()
    row = df.select(F.max(F.size(F.split(step.col(column).cast("string"), regex)))).first()
    return int(row[0] or 0) if row is not None else 0


@register_directive("split-to-columns <column:column> <regex:regex>")
def split_to_columns(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Split ``column`` on a regex into ``column_1`` … ``column_n`` (appended; source kept).

    n is data dependent: one aggregation job computes the largest number of
    pieces over all rows; shorter rows get nulls. Labels: READ column, ADD
    all columns formatted column_%d.
    """
    step.require(df, [a.column])
    n = _max_pieces(step, df, a.column, a.regex)
    parts = F.split(step.col(a.column).cast("string"), a.regex)
    new = [(f"{a.column}_{i}", F.try_element_at(parts, F.lit(i))) for i in range(1, n + 1)]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d")),
                   note=f"one job counted {n} pieces")


@register_directive("split-to-rows <column:column> <regex:regex>")
def split_to_rows(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """One row per regex-separated piece of ``column`` (explode_outer: null stays one row).

    Labels: MODIFY column (other columns' values are repeated, not changed).
    """
    step.require(df, [a.column])
    value = F.explode_outer(F.split(step.col(a.column).cast("string"), a.regex))
    return Outcome(_replace(df, a.column, value), L.modify(a.column))


@register_directive("parse-as-csv <column:column> [<delimiter:text>] [<header:bool>]")
def parse_as_csv(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse ``column`` as one CSV record per row into new columns (source kept).

    Without header the columns are ``column_1`` … ``column_n``; n is the
    largest number of delimiter-separated pieces (one aggregation job; a
    quoted field holding the delimiter can over-count, leaving a trailing
    all-null column). With header=true the first non-null value (one
    ``limit(1)`` job) gives the names and every row equal to it is removed
    (Wrangler drops only the first record). Quotes follow Spark's from_csv.
    Labels: READ column, ADD all columns minus <the columns before>.
    """
    step.require(df, [a.column])
    delim = a.delimiter if a.delimiter is not None else ","
    if not delim:
        raise step.error("the delimiter is empty")
    src = step.col(a.column).cast("string")
    if a.header:
        step.action()
        first = df.select(src).where(src.isNotNull()).limit(1).collect()
        if not first:
            raise step.error("header=true but the column has no value to read a header from")
        header_line = first[0][0]
        names = next(csv.reader([header_line], delimiter=delim[0] if len(delim) == 1 else ","))
        names = [n.strip() for n in names]
        if len(delim) > 1:
            names = [n.strip() for n in header_line.split(delim)]
        df = df.where(src.isNull() | (src != F.lit(header_line)))
        note = "one job read the header"
    else:
        pieces = _max_pieces(step, df, a.column, java_quote(delim))
        names = [f"{a.column}_{i}" for i in range(1, pieces + 1)]
        note = f"one job counted {pieces} fields"
    for n in names:
        if not n:
            raise step.error("the header has an empty column name")
        if n in df.columns:
            raise step.error(f"parsed column {n!r} already exists")
    if len(set(names)) != len(names):
        raise step.error(f"the header repeats a column name: {names}")
    before = list(df.columns)
    if names:
        schema = ", ".join(f"{quote(n)} STRING" for n in names)
        parsed = F.from_csv(src, schema, {"sep": delim})
        new = [(n, parsed.getField(n)) for n in names]
        df = _add_all(df, new)
    return Outcome(df, L.read(a.column) + L.add(L.all_columns_minus(*before)), note=note)


_JSON_SAMPLE = 1000


@register_directive("parse-as-json <column:column> [<depth:int>]")
def parse_as_json(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse a JSON object per row into ``column_key`` columns, nested down to ``depth`` (1).

    The keys and types are data dependent: one job infers the schema from
    the first 1000 non-null values with Spark's JSON reader (keys seen only
    later are not found). Source column kept, as in Wrangler. Labels: READ
    column, ADD all columns minus <the columns before>.
    """
    step.require(df, [a.column])
    depth = 1 if a.depth is None else a.depth
    if depth < 1:
        raise step.error("depth must be at least 1")
    src = step.col(a.column).cast("string")
    sample = df.select(src.alias("value")).where(src.isNotNull()).limit(_JSON_SAMPLE)
    jdf = getattr(sample, "_jdf", None)
    if jdf is None:
        raise step.error("inferring a JSON schema needs a classic Spark session")
    step.action()
    jvm = step.spark._jvm
    if jvm is None:  # a classic session (checked above) always has one
        raise step.error("inferring a JSON schema needs a classic Spark session")
    jds = getattr(jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    schema = StructType.fromJson(json.loads(
        step.spark._jsparkSession.read().json(jds).schema().json()))
    schema = StructType([f for f in schema.fields if f.name != "_corrupt_record"])
    parsed = F.from_json(src, schema)
    new: list[tuple[str, "Column"]] = []

    def walk(prefix: str, value: "Column", st: StructType, level: int) -> None:
        for f in st.fields:
            v = value.getField(f.name)
            name = f"{prefix}_{f.name}"
            if isinstance(f.dataType, StructType) and level < depth:
                walk(name, v, f.dataType, level + 1)
            else:
                new.append((name, v))
    walk(a.column, parsed, schema, 1)
    for n, _ in new:
        if n in df.columns:
            raise step.error(f"parsed column {n!r} already exists")
    before = list(df.columns)
    return Outcome(_add_all(df, new), L.read(a.column) + L.add(L.all_columns_minus(*before)),
                   note=f"one job inferred {len(schema.fields)} keys")


# -- value transformations (MODIFY) -------------------------------------------

def _modify(step: StepContext, df: "DataFrame", column: str, value: "Column",
            masking: bool = False) -> Outcome:
    return Outcome(_replace(df, column, value), L.modify(column), masking=masking)


@register_directive("lowercase <column:column>")
def lowercase(step, df, a):
    """Lower-case the values of ``column``. Labels: MODIFY column."""
    step.require(df, [a.column])
    return _modify(step, df, a.column, F.lower(step.col(a.column)))


@register_directive("uppercase <column:column>")
def uppercase(step, df, a):
    """Upper-case the values of ``column``. Labels: MODIFY column."""
    step.require(df, [a.column])
    return _modify(step, df, a.column, F.upper(step.col(a.column)))


@register_directive("trim <column:column>")
def trim(step, df, a):
    """Remove leading and trailing spaces. Spark's trim removes spaces only (not tabs).

    Labels: MODIFY column.
    """
    step.require(df, [a.column])
    return _modify(step, df, a.column, F.trim(step.col(a.column)))


@register_directive("titlecase <column:column>")
def titlecase(step, df, a):
    """Title-case each word (Spark initcap: first letter up, the rest lower, words split
    on white space). Labels: MODIFY column."""
    step.require(df, [a.column])
    return _modify(step, df, a.column, F.initcap(step.col(a.column)))


@register_directive("fill-null-or-empty <column:column> <value:text>")
def fill_null_or_empty(step, df, a):
    """Replace null (and, for strings, empty) values with ``value``, cast to the column's
    type (a value that does not cast gives null). Labels: MODIFY column."""
    step.require(df, [a.column])
    c = step.col(a.column)
    is_string = _is_string(df, a.column)
    empty = c.isNull() | (c == F.lit("")) if is_string else c.isNull()
    dtype = df.schema[a.column].dataType.simpleString()
    fill = F.lit(a.value) if is_string else F.expr(f"try_cast({_sql_str(a.value)} AS {dtype})")
    return _modify(step, df, a.column, F.when(empty, fill).otherwise(c))


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
    first match is replaced. Labels: MODIFY each column.
    """
    step.require(df, a.columns)
    out = df
    for c in dict.fromkeys(a.columns):
        out = _replace(out, c, _sed_value(step.col(c).cast("string"), a.sed))
    return Outcome(out, L.modify(*dict.fromkeys(a.columns)))


@register_directive("filter-row-if-matched <column:column> <regex:regex>")
def filter_row_if_matched(step, df, a):
    """Remove the rows whose ``column`` matches ``regex`` (found anywhere in the value, as
    Spark's rlike; anchor with ^…$ for whole values). Null values never match and stay.

    Labels: READ column — it decides which rows every other column keeps.
    """
    step.require(df, [a.column])
    c = step.col(a.column).cast("string")
    return Outcome(df.where(c.isNull() | ~c.rlike(a.regex)), L.read(a.column))


@register_directive("filter-row-if-true <condition:expr>")
def filter_row_if_true(step, df, a):
    """Remove the rows for which a Spark SQL condition is true (null counts as false).

    Wrangler uses JEXL; we use Spark SQL. Labels: READ each column the condition reads.
    """
    refs = step.references(df, a.condition)
    return Outcome(df.where(~F.coalesce(F.expr(a.condition).cast("boolean"), F.lit(False))),
                   L.read(*refs))


@register_directive("mask-number <column:column> <pattern:text>")
def mask_number(step, df, a):
    """Mask by position: where ``pattern`` has ``#`` the value's character at that
    position is kept, any other pattern character replaces it. The result is as long
    as the pattern (the value's extra characters are dropped). Labels: MODIFY column.
    """
    step.require(df, [a.column])
    c = step.col(a.column).cast("string")
    parts = [F.substring(c, i + 1, 1) if ch == "#" else F.lit(ch)
             for i, ch in enumerate(a.pattern)]
    value = F.when(c.isNull(), F.lit(None)).otherwise(F.concat(*parts) if parts else F.lit(""))
    return _modify(step, df, a.column, value, masking=True)


_HASHES = {"MD5": None, "SHA": None, "SHA-1": None, "SHA1": None, "SHA-224": 224,
           "SHA-256": 256, "SHA-384": 384, "SHA-512": 512}


def _hash_check(value: str) -> str | None:
    if value.upper() not in _HASHES:
        return f"unknown algorithm {value!r}; known: MD5, SHA-1, SHA-224, SHA-256, SHA-384, " \
               f"SHA-512"
    return None


@register_directive("hash <column:column> <algorithm:text> [<encode:bool>]",
                    checks={"algorithm": _hash_check})
def hash_(step, df, a):
    """Replace values with their message digest. Spark offers MD5, SHA-1 and SHA-2
    (224/256/384/512), not Wrangler's other algorithms. encode=true (the default) gives a
    hex string, false the raw bytes (binary). Labels: MODIFY column (masking)."""
    step.require(df, [a.column])
    algo = a.algorithm.upper()
    c = step.col(a.column).cast("string")
    bits = _HASHES[algo]
    value = F.md5(c) if algo == "MD5" else F.sha1(c) if bits is None else F.sha2(c, bits)
    if a.encode is False:
        value = F.unhex(value)
    return _modify(step, df, a.column, value, masking=True)


_TYPES = {"int": "int", "integer": "int", "long": "bigint", "short": "smallint",
          "float": "float", "double": "double", "string": "string", "boolean": "boolean",
          "bool": "boolean", "bytes": "binary", "decimal": "decimal(38,18)",
          "date": "date", "timestamp": "timestamp"}


@register_directive("set-type <column:column> <type:text>")
def set_type(step, df, a):
    """Convert ``column`` to ``type`` (int, long, short, float, double, string, boolean,
    bytes, decimal, date, timestamp, or any Spark SQL type such as decimal(10,2)).

    Spark: uses try_cast, so a value that does not convert becomes null instead of
    failing the record. Labels: MODIFY column.
    """
    step.require(df, [a.column])
    dtype = _TYPES.get(a.type.lower(), a.type)
    try:
        value = F.expr(f"try_cast({quote(a.column)} AS {dtype})")
        out = _replace(df, a.column, value)
    except Exception as exc:
        raise step.error(f"unknown type {a.type!r}: {str(exc).splitlines()[0]}") from None
    return Outcome(out, L.modify(a.column))


# -- column names (RENAME) ---------------------------------------------------

@register_directive("columns-replace <sed:sed>")
def columns_replace(step, df, a):
    """Rename every column through ``s/regex/replacement/[g][i]`` (applied in Python to
    the names: ``$1`` and ``\\1`` both name a group). Labels: RENAME each changed column."""
    flags = re.IGNORECASE if a.sed.ignore_case else 0
    try:
        rx = re.compile(a.sed.pattern, flags)
    except re.error as exc:
        raise step.error(f"bad regex {a.sed.pattern!r} for column names: {exc}") from None
    repl = re.sub(r"\$(\d+)", r"\\g<\1>", a.sed.replacement)
    mapping = {}
    for c in df.columns:
        try:
            mapping[c] = rx.sub(repl, c, count=0 if a.sed.global_ else 1)
        except (re.error, IndexError) as exc:
            raise step.error(f"bad replacement {a.sed.replacement!r}: {exc}") from None
    return _renamed(step, df, mapping)


@register_directive("change-column-case <case:lower|upper>")
def change_column_case(step, df, a):
    """Change every column name to lower or upper case. Labels: RENAME each changed name."""
    f = str.lower if a.case == "lower" else str.upper
    return _renamed(step, df, {c: f(c) for c in df.columns})


def cleanse_name(name: str) -> str:
    """Our cleansing rule: trim, lower-case, each run of characters other than a-z, 0-9
    and _ becomes one _, and a leading digit gets a _ prefix."""
    out = re.sub(r"[^a-z0-9_]+", "_", name.strip().lower())
    return ("_" + out) if out[:1].isdigit() else (out or "_")


@register_directive("cleanse-column-names")
def cleanse_column_names(step, df, a):
    """Sanitize every column name with `cleanse_name`. Labels: RENAME each changed name."""
    return _renamed(step, df, {c: cleanse_name(c) for c in df.columns})


@register_directive("set-headers <columns:columns>")
def set_headers(step, df, a):
    """Rename columns by position (the first k columns for k names).

    Labels: RENAME each changed name.
    """
    if len(a.columns) > len(df.columns):
        raise step.error(f"{len(a.columns)} names for {len(df.columns)} columns")
    return _renamed(step, df, dict(zip(df.columns, a.columns, strict=False)))


# -- parsing and generating (READ + ADD) -------------------------------------

@register_directive("extract-regex-groups <column:column> <regex:regex>")
def extract_regex_groups(step, df, a):
    """Put each capture group of the first match into ``column_1_1`` … ``column_1_g``.

    Wrangler names columns column_<match>_<group> for every match; Spark gives
    a fixed set of columns, so only the first match is extracted (no match:
    nulls). The group count is read from the regex by Java. Labels: READ
    column, ADD all columns formatted column_%d_%d.
    """
    step.require(df, [a.column])
    try:
        groups = int(step.spark._jvm.java.util.regex.Pattern.compile(a.regex)
                     .matcher("").groupCount())
    except Exception as exc:
        raise step.error(f"bad regex {a.regex!r}: {str(exc).splitlines()[0]}") from None
    if groups == 0:
        raise step.error("the regex has no capture group")
    c = step.col(a.column).cast("string")
    new = [(f"{a.column}_1_{g}", F.when(c.rlike(a.regex), F.regexp_extract(c, a.regex, g)))
           for g in range(1, groups + 1)]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d_%d")))


_EMAIL = r"^([^@\s]+)@([^@\s]+\.[^@\s]+)$"


@register_directive("split-email <column:column>")
def split_email(step, df, a):
    """Split an email address into ``column_account`` and ``column_domain`` (null when
    the value is not an address). Labels: READ column, ADD both."""
    step.require(df, [a.column])
    c = F.trim(step.col(a.column).cast("string"))
    ok = c.rlike(_EMAIL)
    new = [(f"{a.column}_account", F.when(ok, F.regexp_extract(c, _EMAIL, 1))),
           (f"{a.column}_domain", F.when(ok, F.regexp_extract(c, _EMAIL, 2)))]
    return Outcome(_add_all(df, new),
                   L.read(a.column) + L.add(f"{a.column}_account", f"{a.column}_domain"))


@register_directive("generate-uuid <column:column>")
def generate_uuid(step, df, a):
    """Set ``column`` to a random UUID per row (Spark uuid(); replaces an existing
    column). Labels: ADD column (its old values, if any, are not read)."""
    return Outcome(_replace(df, a.column, F.expr("uuid()")), L.add(a.column))


@register_directive("format-date <column:column> <format:text>")
def format_date(step, df, a):
    """Format a date/timestamp column as text with a Spark datetime pattern (close to
    Java's SimpleDateFormat that Wrangler uses; Spark rejects a few letters).
    Labels: MODIFY column."""
    step.require(df, [a.column])
    return _modify(step, df, a.column, F.date_format(step.col(a.column), a.format))


@register_directive("parse-as-date <column:column> [<format:text>]")
def parse_as_date(step, df, a):
    """Parse text into a timestamp. Wrangler understands natural language dates (natty)
    and takes a time zone; Spark does not: without ``format`` Spark's default
    timestamp parsing is used (ISO-like text), with it a Spark datetime pattern; the
    session time zone applies. Unparseable values give null. Labels: MODIFY column."""
    step.require(df, [a.column])
    c = step.col(a.column).cast("string")
    value = (F.try_to_timestamp(c, F.lit(a.format)) if a.format
             else F.try_to_timestamp(c))
    return _modify(step, df, a.column, value)
