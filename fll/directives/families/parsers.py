"""Parsing directives: parse-as-csv, parse-as-fixed-length, parse-as-currency,
format-as-currency, parse-as-bytesize and parse-as-timeduration.

Each follows CDAP Wrangler's implementation; where Spark makes fll differ the
docstring says so. Locales are checked through the session's JVM before
anything runs. parse-as-csv runs one small action to learn the number of fields
(and the header); the others are lazy Spark SQL expressions.
"""
from __future__ import annotations

import csv
import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from .. import labels as L
from ..context import StepContext, java_quote, quote
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (append_all, as_text, error_rows, fail_when, null_value, parse_check, put, put_all,
                       require_string, string_of)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


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
    src = as_text(df, a.column, step.col(a.column))
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
        df = append_all(df, new)
    return Outcome(df, L.read(a.column) + L.add(L.all_columns_minus(*before)), note=note)


# -- parse-as-fixed-length -----------------------------------------------------

def _widths(text: str) -> list[int]:
    pieces = [p.strip() for p in text.split(",")]
    if not pieces or any(not re.fullmatch(r"\d+", p) or int(p) < 1 for p in pieces):
        raise ValueError(f"widths must be positive whole numbers separated by commas, "
                         f"got {text!r}")
    return [int(p) for p in pieces]


_REC = "__fll_fixed_record"


@register_directive("parse-as-fixed-length <column:column> <widths:text> [<padding:text>]",
                    checks={"widths": parse_check(_widths)})
def parse_as_fixed_length(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Cut ``column`` into fields of the given widths (``2,3,4``) as ``column_1`` …
    ``column_n`` (source kept); a value holding several whole records gives one row per
    record and a partial record at the end is ignored, as in Wrangler.

    ``padding`` is a regular expression removed from every field (Wrangler's
    replaceAll). A value shorter than one record goes to the error output (errCode 2);
    a null value stops the run. Labels: READ column, ADD column_1 … column_n.
    """
    require_string(step, df, a.column)
    widths = _widths(a.widths)
    record = sum(widths)
    src = step.col(a.column)
    short = F.length(src) < F.lit(record)
    kept, extra = error_rows(step, df, src.isNotNull() & short, F.concat(
        F.lit(f"Column '{a.column}' contains a value with fewer characters than the specified "
              f"length of row. Expected at least {record} characters but found "),
        F.length(src).cast("string"), F.lit(" characters.")), 2)
    count = F.floor(F.length(src) / F.lit(record)).cast("int")
    guarded = fail_when(step, src.isNull(), count,
                        null_value(a.column))
    exploded = kept.select("*", F.explode(F.sequence(F.lit(0), guarded - 1)).alias(_REC))
    new: list[tuple[str, "Column"]] = []
    start = 1
    for i, width in enumerate(widths, start=1):
        name = f"{a.column}_{i}"
        if name in df.columns:
            raise step.error(f"parsed column {name!r} already exists")
        field = F.expr(f"substring({quote(a.column)}, {_REC} * {record} + {start}, {width})")
        if a.padding:
            field = F.regexp_replace(field, a.padding, "")
        new.append((name, field))
        start += width
    out = put_all(exploded, new).drop(_REC)
    return Outcome(out, L.read(a.column) + L.add(*[n for n, _ in new]), **extra)


# -- currency ------------------------------------------------------------------

def _currency_format(step: StepContext, locale: str):
    """Java's currency NumberFormat for a Wrangler locale name (``en_US``, ``de_DE``)."""
    if not re.fullmatch(r"[a-zA-Z]{2,3}(_[a-zA-Z]{2}|_\d{3})?(_\w+)?", locale):
        raise step.error(f"locale {locale!r} is invalid; expected a name like en_US")
    jvm = getattr(step.spark, "_jvm", None)
    if jvm is None:
        raise step.error("currency formats need a classic Spark session (its JVM)")
    parts = locale.split("_")
    loc = jvm.java.util.Locale(*parts[:3])
    if not str(loc.getISO3Language() if parts[0] else ""):
        raise step.error(f"locale {locale!r} is invalid")
    return jvm.java.text.NumberFormat.getCurrencyInstance(loc)


def _symbols(fmt) -> dict[str, str]:
    sym = fmt.getDecimalFormatSymbols()
    return {"pos_prefix": str(fmt.getPositivePrefix()), "pos_suffix": str(fmt.getPositiveSuffix()),
            "neg_prefix": str(fmt.getNegativePrefix()), "neg_suffix": str(fmt.getNegativeSuffix()),
            "group": str(sym.getMonetaryGroupingSeparator() if hasattr(sym, "getMonetaryGroupingSeparator")
                         else sym.getGroupingSeparator()),
            "decimal": str(sym.getMonetaryDecimalSeparator()),
            "digits": str(fmt.getMaximumFractionDigits())}


@register_directive("parse-as-currency <source:column> <destination:column> [<locale:text>]")
def parse_as_currency(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read money text written in ``locale``'s currency format (default en_US:
    ``$1,234.56``, ``-$1.56``) as a double into ``destination``.

    The locale's symbols and separators come from Java's NumberFormat (through the
    session's JVM); the value must carry the currency sign as Java requires and, as
    Java's parse, text after a whole amount is ignored (``$12abc`` is 12.0) while a
    leading space is not. Text that
    does not fit goes to the error output (errCode 1); null, blank and non-text values
    are skipped (destination left null). Labels: READ source, ADD destination.
    """
    step.require(df, [a.source])
    s = _symbols(_currency_format(step, a.locale or "en_US"))
    kind = df.schema[a.source].dataType.typeName()
    src = step.col(a.source) if kind == "string" else F.lit(None).cast("string")
    # Java's parser takes a whitespace-insensitive sign, so no-break and plain spaces match
    def lit(text: str) -> str:
        return java_quote(text).replace("\\Q\u00a0", "\\Q").replace("\u00a0", "\\E\\s?\\Q") \
            if text else ""
    number = rf"([0-9{java_quote(s['group'])}]+(?:{java_quote(s['decimal'])}[0-9]+)?)"
    # NumberFormat.parse(String) reads from the start and ignores what follows a whole
    # number, so only the start is anchored; a leading space is not skipped
    pos = "^" + lit(s["pos_prefix"]) + number + lit(s["pos_suffix"])
    neg = "^" + lit(s["neg_prefix"]) + number + lit(s["neg_suffix"])
    text = src

    def as_double(pattern: str) -> "Column":
        digits = F.regexp_extract(text, pattern, 1)
        plain = F.replace(F.replace(digits, F.lit(s["group"]), F.lit("")), F.lit(s["decimal"]),
                          F.lit("."))
        return F.when(text.rlike(pattern), plain.try_cast("double"))

    value = F.coalesce(as_double(pos), -as_double(neg))
    skip = src.isNull() | (F.trim(src) == "")
    kept, extra = error_rows(step, df, ~skip & value.isNull(), F.concat(
        F.lit("Unparseable number: \""), string_of(src), F.lit("\"")), 1)
    value = F.when(~skip, value)
    if a.destination in df.columns and a.destination != a.source:
        value = F.coalesce(value, step.col(a.destination))   # Wrangler leaves it as it was
    return Outcome(put(kept, a.destination, value), L.derive(a.source, a.destination), **extra)


@register_directive("format-as-currency <source:column> <destination:column> [<locale:text>]")
def format_as_currency(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Write a double as money text in ``locale``'s currency format (default en_US:
    ``$1,234.57``) into ``destination``, rounding half-even to the currency's digits.
    Spark rounds the double's decimal text, Java its exact binary value, so a rare tie
    (1.015) can differ by one unit in the last digit.

    Wrangler formats only Double values and skips the rest; fll refuses a column that
    is not a double, since every row would be skipped. Labels: READ source, ADD
    destination.
    """
    step.require(df, [a.source])
    kind = df.schema[a.source].dataType.typeName()
    if kind != "double":
        raise step.error(f"column {a.source!r} has type {kind}; it should be a double")
    s = _symbols(_currency_format(step, a.locale or "en_US"))
    src = step.col(a.source)
    digits = int(s["digits"])
    plain = F.format_number(F.bround(F.abs(src), digits), digits)   # grouped: 1,234.56
    local = F.translate(plain, ",.", s["group"] + s["decimal"]) if digits else \
        F.translate(plain, ",", s["group"])
    value = F.when(src < 0, F.concat(F.lit(s["neg_prefix"]), local, F.lit(s["neg_suffix"]))) \
        .otherwise(F.concat(F.lit(s["pos_prefix"]), local, F.lit(s["pos_suffix"])))
    return Outcome(put(df, a.destination, value), L.derive(a.source, a.destination))


# -- parse-as-bytesize / parse-as-timeduration ---------------------------------

_AMOUNT = r"^\s*([+-]?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$"


def _unit_amount(step: StepContext, df: "DataFrame", a: Args, factors: dict[str, float],
                 result_type: str, what: str) -> Outcome:
    """``number unit`` text times the unit's factor, into ``to_column`` or in place."""
    require_string(step, df, a.column)
    src = step.col(a.column)
    number = F.regexp_extract(src, _AMOUNT, 1)
    unit = F.lower(F.regexp_extract(src, _AMOUNT, 2))
    factor: "Column" = F.lit(None).cast("decimal(38,9)")
    for name, f in factors.items():
        factor = F.when(unit == F.lit(name), F.lit(f).cast("decimal(38,9)")).otherwise(factor)
    value = (number.try_cast("decimal(38,9)") * factor).cast(result_type)
    bad = src.isNotNull() & (~src.rlike(_AMOUNT) | factor.isNull())
    kept, extra = error_rows(step, df, bad, F.concat(
        F.lit("'"), string_of(src), F.lit(f"' is not a {what}: a number followed by one of "
                                          f"{', '.join(factors)}")), 1)
    target = a.to_column or a.column
    labels = (L.modify(a.column) if target == a.column
              else L.read(a.column) + L.add(target))
    return Outcome(put(kept, target, value), labels, **extra)


_BYTES = {u: float(1024 ** i) for i, u in enumerate(("b", "kb", "mb", "gb", "tb", "pb"))}


@register_directive("parse-as-bytesize <column:column> [<to_column:column>]")
def parse_as_bytesize(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read a byte size with a unit (``10KB``, ``2.5GB``; B, KB, MB, GB, TB, PB in any
    case, powers of 1024) as a whole number of bytes (long), into ``to_column`` or in place.

    Wrangler documents this directive (with a ByteSize type) but ships no
    implementation; fll builds it from the documentation, holding the byte count.
    A fraction of a byte is cut off. Text that does not fit goes to the error
    output (errCode 1); nulls stay null. Labels: MODIFY column, or READ column and
    ADD to_column.
    """
    return _unit_amount(step, df, a, _BYTES, "bigint", "byte size")


_MILLIS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7,
           "w": 6.048e8}


@register_directive("parse-as-timeduration <column:column> [<to_column:column>]")
def parse_as_timeduration(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read a time duration with a unit (``100ms``, ``5s``; ns, us, ms, s, m, h, d, w in
    any case) as milliseconds (a double, so ns and us keep their fraction), into
    ``to_column`` or in place.

    Wrangler documents this directive (with a TimeDuration type) but ships no
    implementation; fll builds it from the documentation. Text that does not fit goes
    to the error output (errCode 1); nulls stay null. Labels: MODIFY column, or READ
    column and ADD to_column.
    """
    return _unit_amount(step, df, a, _MILLIS, "double", "time duration")
