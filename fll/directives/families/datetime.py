"""Date and time directives: format-date, parse-as-date, parse-as-datetime, format-datetime, current-datetime,
datetime-to-timestamp, timestamp-to-datetime, parse-as-simple-date, parse-timestamp,
format-unix-timestamp and diff-date.

Wrangler has two kinds of time values and so does Spark: a *datetime* (Java
LocalDateTime, no zone) is Spark's TIMESTAMP_NTZ, a *timestamp* (Java
ZonedDateTime) is Spark's TIMESTAMP, an instant shown in the session time zone
(the zone a ZonedDateTime carries is not kept per value). Patterns are Java
DateTimeFormatter patterns checked before anything runs, by the JVM and by
Spark's own rules. A value Wrangler sends to the error collector goes to the
recipe's error output (or, without one, stops the run naming the line).
This module must never run a Spark action.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from ...errors import RecipeError
from .. import labels as L
from ..support import (check_datetime_pattern, check_zone, error_rows, modify, put,
                       session_zone, string_of)
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def _type(df: "DataFrame", column: str) -> str:
    return df.schema[column].dataType.typeName()


# The Java class Wrangler's row holds for a value of each Spark type (its error messages
# name it with getSimpleName()).
_JAVA_CLASS = {"string": "String", "integer": "Integer", "long": "Long", "short": "Short",
               "byte": "Byte", "double": "Double", "float": "Float", "boolean": "Boolean",
               "decimal": "BigDecimal", "date": "LocalDate", "timestamp": "ZonedDateTime",
               "timestamp_ntz": "LocalDateTime", "binary": "byte[]"}


def _wrong_kind(step: StepContext, df: "DataFrame", column: str, expected: str) -> Outcome:
    """Every non-null value of a column that holds no ``expected`` values goes to the error
    output, as Wrangler's datetime directives throw ErrorRowException (code 2) for each:
    ``Value <v> for column <c> expected to be <expected> but found <Class>``. Null values
    are skipped (the row stays as it is), as in Wrangler."""
    kind = _type(df, column)
    found = _JAVA_CLASS.get(kind, kind)
    value = step.col(column)
    kept, extra = error_rows(step, df, value.isNotNull(), F.concat(
        F.lit("Value "), string_of(value),
        F.lit(f" for column {column} expected to be {expected} but found {found}")), 2)
    return Outcome(kept, L.modify(column), **extra)


def _zone_letters(pattern: str) -> list[str]:
    """Pattern letters that need a zone or offset (outside quoted text)."""
    return sorted(set(re.sub(r"'[^']*'", "", pattern)) & set("VzOXxZ"))


_OPTIONAL = re.compile(r"'[^']*'|\[[^\[\]']*\]")


def _without_optional_zones(pattern: str) -> str:
    """The pattern without its optional sections (``[xxx]``) that print a zone: Java's
    formatter skips such a section for a value that has no zone, as Wrangler's
    FormatDateTimeTest shows (``yyyy-MM-dd'T'HH:mm:ss[xxx]``)."""
    return _OPTIONAL.sub(lambda m: "" if m.group(0)[0] == "[" and _zone_letters(m.group(0))
                         else m.group(0), pattern)


def _instant_in(value: "Column", zone: str) -> "Column":
    """The instant at which the wall time ``value`` (TIMESTAMP_NTZ) is read in ``zone``.

    make_timestamp builds it from the fields in that zone, so the session time zone
    never enters (a cast would read the wall time in the session zone).
    """
    return F.make_timestamp(F.year(value), F.month(value), F.dayofmonth(value),
                            F.hour(value), F.minute(value),
                            F.date_part(F.lit("SECOND"), value),
                            F.lit(zone))


def _ntz_parse(text: "Column", pattern: str) -> tuple["Column", "Column"]:
    """(parsed TIMESTAMP_NTZ, row is bad) for ``text`` read with ``pattern``.

    to_timestamp_ntz fails the job on a bad value under ANSI, so it is only
    evaluated where try_to_timestamp (same pattern, same parser) succeeded.
    """
    ok = F.try_to_timestamp(text, F.lit(pattern)).isNotNull()
    value = F.when(ok, F.to_timestamp_ntz(text, F.lit(pattern)))
    return value, text.isNotNull() & ~ok


@register_directive("parse-as-datetime <column:column> <format:text>")
def parse_as_datetime(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse text with a DateTimeFormatter pattern into a datetime (TIMESTAMP_NTZ).

    A zone or offset in the text is read and ignored, as LocalDateTime.parse does.
    A value that does not fit the pattern goes to the error output (errCode 2);
    nulls and values already datetime stay. Spark refuses to *parse* a few
    patterns Java accepts (e.g. a day-of-week name ``EEE``): the run then stops
    with Spark's reason. Labels: MODIFY column.
    """
    step.require(df, [a.column])
    check_datetime_pattern(step, a.format)
    if _type(df, a.column) == "timestamp_ntz":
        return Outcome(df, L.modify(a.column))
    text = step.col(a.column).cast("string")
    value, bad = _ntz_parse(text, a.format)
    kept, extra = error_rows(step, df, bad, F.concat(
        F.lit("Value "), string_of(text), F.lit(f" for column {a.column} is not in expected "
                                                  f"format {a.format}")), 2)
    return Outcome(put(kept, a.column, value), L.modify(a.column), **extra)


@register_directive("format-datetime <column:column> <format:text>")
def format_datetime(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Format a datetime (TIMESTAMP_NTZ) column as text with a DateTimeFormatter pattern.

    A pattern needing a zone (``XXX``, ``z``, ``VV``…) cannot format a datetime: Java
    fails every row, fll refuses the recipe; in an optional section (``[xxx]``) Java
    skips it, and so does fll. On a column of another type each non-null value goes to
    the error output (errCode 2), as Wrangler's FormatDateTimeTest testInvalidObject
    shows. Nulls stay null; a
    column that is not there leaves the rows as they are. Labels: MODIFY column.
    """
    check_datetime_pattern(step, a.format)
    if a.column not in df.columns:      # Wrangler skips a row without the column
        return Outcome(df, [])
    pattern = _without_optional_zones(a.format)
    zone = _zone_letters(pattern)
    if zone:
        raise step.error(f"datetime format {a.format!r} needs a zone ({''.join(zone)}), "
                         f"and a datetime has none")
    if _type(df, a.column) != "timestamp_ntz":
        return _wrong_kind(step, df, a.column, "datetime")
    value = F.date_format(step.col(a.column), pattern)
    return Outcome(put(df, a.column, value), L.modify(a.column))


@register_directive("current-datetime <column:column> [<zone:text>]")
def current_datetime(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Set ``column`` to the current datetime (TIMESTAMP_NTZ) in ``zone`` (default UTC).

    Spark takes one current time per query, so every row gets the same value
    (Wrangler reads the clock per row). Labels: ADD column (old values not read).
    """
    zone = check_zone(step, a.zone or "UTC")
    now = F.convert_timezone(F.lit(session_zone(step)), F.lit(zone),
                             F.current_timestamp().cast("timestamp_ntz"))
    return Outcome(put(df, a.column, now), L.add(a.column))


@register_directive("datetime-to-timestamp <column:column> [<zone:text>]")
def datetime_to_timestamp(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read a datetime (TIMESTAMP_NTZ) as wall time in ``zone`` (default UTC) and turn it
    into a timestamp (TIMESTAMP).

    The zone is used for the conversion but not kept: Spark shows timestamps in the
    session time zone. On a column of another type each non-null value goes to the
    error output (errCode 2), as Wrangler's DateTimeToTimestampTest testInvalidObject
    shows; a column that is not there leaves the rows as they are, as in Wrangler.
    Labels: MODIFY column.
    """
    zone = check_zone(step, a.zone or "UTC")
    if a.column not in df.columns:
        return Outcome(df, [])
    kind = _type(df, a.column)
    if kind != "timestamp_ntz":
        return _wrong_kind(step, df, a.column, "datetime")
    return Outcome(put(df, a.column, _instant_in(step.col(a.column), zone)), L.modify(a.column))


@register_directive("timestamp-to-datetime <column:column>")
def timestamp_to_datetime(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Turn a timestamp (TIMESTAMP) into a datetime (TIMESTAMP_NTZ): its wall time.

    Wrangler takes the wall time in the zone the value carries; a Spark timestamp
    carries none, so the session time zone is used. A datetime column stays as it is;
    on a column of another type each non-null value goes to the error output (errCode
    2), as Wrangler's TimestampToDateTimeTest testInvalidObject shows; a column that is
    not there leaves the rows as they are. Labels: MODIFY column.
    """
    if a.column not in df.columns:      # Wrangler skips a row without the column
        return Outcome(df, [])
    kind = _type(df, a.column)
    if kind == "timestamp_ntz":
        return Outcome(df, L.modify(a.column))
    if kind != "timestamp":
        return _wrong_kind(step, df, a.column, "timestamp")
    return Outcome(put(df, a.column, step.col(a.column).cast("timestamp_ntz")),
                   L.modify(a.column))


_NUMERIC = set("dHhKkmsDF")
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.S)


# SimpleDateFormat letters whose count says text or number differently from
# DateTimeFormatter, as the count Spark's formatter reads the same way
def _spark_count(tok: str) -> str:
    letter, n = tok[0], len(tok)
    if letter == "M" and n >= 4:          # MMMM and more: the full month name
        return "MMMM"
    if letter in "aG":                    # any count: AM/PM, the era (short name)
        return letter if letter == "a" or n < 4 else "GGGG"
    if letter == "z":                     # 1-3: short zone name, 4+: the long one
        return "z" if n < 4 else "zzzz"
    return tok


#: letters that only name the day of the week (text E, number u): SimpleDateFormat reads
#: them and the date comes from the other fields; Spark cannot parse them
_DAY_OF_WEEK = {"E": r"\p{L}+\.?", "u": r"\d+"}


def simple_date_patterns(pattern: str) -> list[str]:
    """A SimpleDateFormat parse pattern as the Spark patterns that together read the
    same text, tried in turn (after `day_of_week_remover` took the day names out).

    SimpleDateFormat's ``yy`` reads two digits in a century window and more digits
    as they are (``10/12/2016`` under ``dd/MM/yy`` is 2016); Spark's ``yy`` reads two
    only, so a second pattern with ``yyyy`` follows.
    """
    first = simple_date_pattern(pattern)
    tokens = [m.group(0) for m in _TOKEN.finditer(first)]
    if "yy" not in tokens:
        return [first]
    return [first, "".join("yyyy" if t == "yy" else t for t in tokens)]


def simple_date_pattern(pattern: str) -> str:
    """A SimpleDateFormat parse pattern as a Spark pattern that reads the same text.

    SimpleDateFormat ignores the width of a numeric field when parsing unless a
    neighbouring field is numeric too (``MM/dd`` reads ``2/1``); Spark's ``MM`` needs two
    digits but its one-letter form reads one or more, so such fields become one letter.
    Text fields take any count in SimpleDateFormat (``aaa``, ``MMMMM``, ``GGG``): each
    becomes the count Spark reads the same way, and day-of-week fields are left out.
    """
    tokens = [m.group(0) for m in _TOKEN.finditer(pattern)
              if m.group(0)[0] not in _DAY_OF_WEEK]
    out = []
    for i, tok in enumerate(tokens):
        letter = tok[0]
        numeric = letter in _NUMERIC or (letter == "M" and len(tok) <= 2)
        near = [tokens[j][0] for j in (i - 1, i + 1) if 0 <= j < len(tokens)]
        adjacent = any(n in _NUMERIC or n in "My" for n in near)
        out.append(letter if numeric and len(tok) == 2 and not adjacent
                   else _spark_count(tok) if letter.isalpha() else tok)
    return "".join(out)


def day_of_week_remover(pattern: str) -> tuple[str, str] | None:
    """(Java regex, replacement) that take the day-of-week fields out of a value read
    with ``pattern`` (``Wed, Jul 4, '01`` → ``, Jul 4, '01`` for ``EEE, MMM d, ''yy``),
    or None when the pattern has none. The text between them is kept as it is."""
    tokens = [m.group(0) for m in _TOKEN.finditer(pattern)]
    if not any(t[0] in _DAY_OF_WEEK for t in tokens):
        return None
    regex, replacement, group, open_run = ["^"], [], 0, False
    for tok in tokens:
        if tok[0] in _DAY_OF_WEEK:
            regex.append(_DAY_OF_WEEK[tok[0]])
            open_run = False
        elif not open_run:
            group += 1
            regex.append("(.*?)")
            replacement.append(f"${group}")
            open_run = True
    regex.append("$")
    return "".join(regex), "".join(replacement)


def _check_simple_date_format(step: StepContext, pattern: str) -> None:
    """Refuse a pattern java.text.SimpleDateFormat refuses (Wrangler's parser)."""
    jvm = getattr(step.spark, "_jvm", None)
    if not pattern:
        raise step.error("the date pattern is empty")
    if jvm is None:
        return
    try:
        jvm.java.text.SimpleDateFormat(pattern)
    except Exception as exc:
        from ..support import java_message
        raise step.error(f"date pattern {pattern!r} is invalid: {java_message(exc)}") from None


@register_directive("parse-as-simple-date <column:column> <format:text>")
def parse_as_simple_date(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse text with a java.text.SimpleDateFormat pattern into a timestamp; text
    without a zone is read in UTC.

    Spark has only DateTimeFormatter patterns, so the pattern is translated: text
    fields take SimpleDateFormat's any count (``aaa``, ``MMMMM`` full month name,
    ``GGG``), day-of-week names and numbers (``EEE``, ``u``), which Spark cannot
    parse and which SimpleDateFormat reads without using, are taken out of the value
    first, and ``''`` is a quote in both. A two-letter numeric field reads one digit
    too (``MM/dd`` reads ``2/1``), as SimpleDateFormat does, but text after the
    pattern is not ignored: such a value, like any that does not fit, goes to the
    error output (errCode 1); nulls and timestamps stay. A zone name is read as the
    zone's offset on that date, where SimpleDateFormat gives a daylight-saving name
    (``PDT``) its summer offset on any date. Week-based letters (``Y``, ``w``, ``W``)
    are refused. Labels: MODIFY column.
    """
    step.require(df, [a.column])
    _check_simple_date_format(step, a.format)
    patterns = simple_date_patterns(a.format)
    for pattern in patterns:
        check_datetime_pattern(step, pattern)
        step.check_datetime_pattern(pattern, parsing=True)
    kind = _type(df, a.column)
    if kind in ("timestamp", "date"):
        return Outcome(df, L.modify(a.column))
    if kind != "string":
        raise step.error(f"column {a.column!r} has type {kind}; it should be of type string")
    original = step.col(a.column)
    text = original
    remover = day_of_week_remover(a.format)
    if remover is not None:
        text = F.regexp_replace(text, F.lit(remover[0]), F.lit(remover[1]))
    if _zone_letters(patterns[0]):
        value = F.coalesce(*[F.try_to_timestamp(text, F.lit(p)) for p in patterns])
        bad = text.isNotNull() & value.isNull()
    else:
        tries = [_ntz_parse(text, p) for p in patterns]
        local = F.coalesce(*[v for v, _ in tries])
        bad = tries[0][1]
        for _, b in tries[1:]:
            bad = bad & b
        value = _instant_in(local, "UTC")
    kept, extra = error_rows(step, df, bad, F.concat(
        F.lit("Failed to parse '"), string_of(original), F.lit(f"' with pattern '{a.format}'")), 1)
    return Outcome(put(kept, a.column, value), L.modify(a.column), **extra)


_UNITS = {"seconds": F.timestamp_seconds, "milliseconds": F.timestamp_millis,
          "microseconds": F.timestamp_micros}


def _unit_check(value: str) -> str | None:
    if value.lower() in _UNITS:
        return None
    return (f"time unit {value!r} is not supported; supported time units are "
            f"{', '.join(u.upper() for u in _UNITS)}")


@register_directive("parse-timestamp <column:column> [<timeunit:text>]",
                    checks={"timeunit": _unit_check})
def parse_timestamp(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read a count of seconds, milliseconds (default) or microseconds since the epoch
    (a long, or text holding one) as a timestamp.

    Text that is not a whole number goes to the error output (errCode 2); nulls and
    timestamps stay. Wrangler takes only Long or String values; fll also takes the
    narrower integer types. Labels: MODIFY column.
    """
    step.require(df, [a.column])
    kind = _type(df, a.column)
    if kind == "timestamp":
        return Outcome(df, L.modify(a.column))
    if kind not in ("string", "long", "integer", "short", "byte"):
        raise step.error(f"column {a.column!r} has type {kind}; it should be a long or a "
                         f"string holding one")
    convert = _UNITS[(a.timeunit or "milliseconds").lower()]
    src = step.col(a.column)
    number = src.try_cast("bigint") if kind == "string" else src.cast("bigint")
    bad = src.isNotNull() & number.isNull()
    if kind == "string":   # Long.parseLong: an optional sign and digits, nothing else
        bad = src.isNotNull() & (number.isNull() | ~src.rlike(r"^[+-]?[0-9]+$"))
    kept, extra = error_rows(step, df, bad, F.lit(
        f"Invalid value for column '{a.column}'. Must be of type 'Long' or 'String' "
        f"representing long."), 2)
    return Outcome(put(kept, a.column, convert(number)), L.modify(a.column), **extra)


@register_directive("format-unix-timestamp <column:column> <pattern:text>")
def format_unix_timestamp(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Format a UNIX timestamp (seconds since the epoch) as text with a date pattern,
    in the session time zone.

    Wrangler documents this directive but has no implementation; this follows its
    documentation. Text holding a number is read as one; nulls stay null.
    Labels: MODIFY column.
    """
    step.require(df, [a.column])
    check_datetime_pattern(step, a.pattern)
    kind = _type(df, a.column)
    if kind not in ("string", "long", "integer", "short", "byte", "double", "float", "decimal"):
        raise step.error(f"column {a.column!r} has type {kind}; it should hold a number of "
                         f"seconds")
    src = step.col(a.column)
    seconds = src.try_cast("bigint") if kind == "string" else src.cast("bigint")
    value = F.date_format(F.timestamp_seconds(seconds), a.pattern)
    return Outcome(put(df, a.column, value), L.modify(a.column))


def _diff_side(step: StepContext, df: "DataFrame", name: str) -> "Column":
    if name.lower() == "now":
        return F.current_timestamp()
    step.require(df, [name])
    kind = _type(df, name)
    if kind not in ("timestamp", "date"):
        raise step.error(f"column {name!r} has type {kind}; parse it first (parse-as-date, "
                         f"parse-as-simple-date or parse-timestamp)")
    return step.col(name).cast("timestamp")


@register_directive("diff-date <column1:column> <column2:column> <destination:column>")
def diff_date(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Set ``destination`` to ``column1`` minus ``column2`` in milliseconds (a long).

    ``now`` (any case) stands for the current time, the same for every row. A null
    side gives null. The documentation's example shows 17280000 for two days; the
    code, and fll, give 172800000. Wrangler silently gives null for values that are
    not parsed dates; fll refuses such columns before running.
    Labels: READ column1, READ column2, ADD destination (MODIFY when it is one of them).
    """
    first, second = _diff_side(step, df, a.column1), _diff_side(step, df, a.column2)
    # Instant.toEpochMilli floors each side before Wrangler subtracts
    millis = F.unix_millis(first) - F.unix_millis(second)
    reads = [c for c in dict.fromkeys([a.column1, a.column2])
             if c.lower() != "now" and c != a.destination]
    target = (L.modify(a.destination) if a.destination in (a.column1, a.column2)
              else L.add(a.destination))
    return Outcome(put(df, a.destination, millis), L.read(*reads) + target)


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
    return modify(step, df, a.column, F.date_format(step.col(a.column), a.format))


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
    return Outcome(put(df, target, value), L.read(a.column) + L.add(target))
