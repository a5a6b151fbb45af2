"""Directives that encode, cut and write values: cut-character, encode, decode,
url-encode, url-decode, split-url, write-as-csv, write-as-json-map, write-as-json-object,
create-record, flatten-record, set-record-delim and set-charset.

Each follows CDAP Wrangler's implementation (io.cdap.directives.transformation,
.writer and .column); where Spark makes fll differ, the directive's docstring says so.
Everything is a lazy Spark SQL expression except base32 and set-charset's
decoding, which Spark has no built-in for. This module must never run a Spark action.
"""
from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from .. import labels as L
from ..support import fail_when, require_string, null_value, parse_check, put, put_all, string_of
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive
from ..variables import is_variable, visible

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

_INT_MAX = 2147483647


# -- cut-character -----------------------------------------------------------

_RANGE = re.compile(r"(\d+)?(-)?(\d+)?")


def parse_ranges(text: str) -> list[tuple[int, int | None]]:
    """UNIX ``cut -c`` ranges (``1-3,5,7-``, ``-3``) as sorted disjoint 1-based
    (start, end-or-None) pairs; raises ValueError naming the bad piece."""
    spans: list[tuple[int, int | None]] = []
    for piece in text.split(","):
        piece = piece.strip()
        m = _RANGE.fullmatch(piece)
        if not piece or not m or (m.group(2) is None and m.group(3) is not None) or \
                (m.group(1) is None and m.group(3) is None):
            raise ValueError(f"cannot read the range {piece!r}; use N, N-M, -M or N- "
                             f"separated by commas")
        start = int(m.group(1)) if m.group(1) else 1
        end = None if m.group(2) and not m.group(3) else int(m.group(3) or m.group(1))
        if start < 1:
            raise ValueError(f"range {piece!r}: positions start at 1")
        if end is not None and end < start:
            raise ValueError(f"range {piece!r} is decreasing")
        spans.append((start, end))
    spans.sort(key=lambda s: s[0])
    merged: list[tuple[int, int | None]] = []
    for start, end in spans:
        if merged:
            last_start, last_end = merged[-1]
            if last_end is None or start <= last_end + 1:
                new_end = None if last_end is None or end is None else max(last_end, end)
                merged[-1] = (last_start, new_end)
                continue
        merged.append((start, end))
    return merged


@register_directive("cut-character <source:column> <destination:column> <ranges:text>",
                    checks={"ranges": parse_check(parse_ranges)})
def cut_character(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Keep the characters of ``source`` at the UNIX ``cut -c`` positions ``ranges``
    (``1-3``, ``5-``, ``-3``, ``1,2,3-5``) into ``destination`` (set or appended).

    As in Wrangler a null value stops the run, and a non-string source is refused.
    Labels: READ source, ADD destination.
    """
    require_string(step, df, a.source)
    src = step.col(a.source)
    pieces = [F.substring(src, start, (end - start + 1) if end is not None else _INT_MAX)
              for start, end in parse_ranges(a.ranges)]
    value = pieces[0] if len(pieces) == 1 else F.concat(*pieces)
    value = fail_when(step, src.isNull(), value,
                      null_value(a.source))
    if a.source == a.destination:
        return Outcome(put(df, a.destination, value), L.modify(a.source))
    return Outcome(put(df, a.destination, value), L.read(a.source) + L.add(a.destination))


# -- encode / decode ---------------------------------------------------------

@F.udf(StringType())
def _base32_encode(value):
    return None if value is None else base64.b32encode(bytes(value)).decode("ascii")


@F.udf(StringType())
def _base32_decode(value):
    if value is None:
        return None
    data = bytes(value).strip().upper()
    try:
        # commons-codec decodes leniently: missing padding is accepted
        return base64.b32decode(data + b"=" * (-len(data) % 8)).decode("utf-8", "replace")
    except ValueError:
        return None


def _bytes_of(step: StepContext, df: "DataFrame", column: str) -> "Column":
    step.require(df, [column])
    kind = df.schema[column].dataType.typeName()
    if kind not in ("string", "binary"):
        raise step.error(f"column {column!r} has type {kind}; it should be string or binary")
    return step.col(column).cast("binary")


_METHODS = "base64|base32|hex"


@register_directive(f"encode <method:{_METHODS}> <column:column>")
def encode(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Encode ``column`` (text as UTF-8, or binary) with base64, base32 or hex into a
    new column ``<column>_encode_<method>``; nulls stay null, and a column that is not
    there leaves the rows as they are (Wrangler skips them).

    base64 and hex are Spark built-ins (hex lower case, as commons-codec writes it;
    base64 on one line, where Spark's MIME encoder breaks it every 76 characters);
    base32 has no Spark built-in and runs as a Python UDF.
    Labels: READ column, ADD <column>_encode_<method>.
    """
    if a.column not in df.columns:
        return Outcome(df, [])
    raw = _bytes_of(step, df, a.column)
    if a.method == "base64":
        value = F.regexp_replace(F.base64(raw), "\r\n", "")
    elif a.method == "hex":
        value = F.lower(F.hex(raw))
    else:
        value = _base32_encode(raw)
    out = f"{a.column}_encode_{a.method}"
    return Outcome(put(df, out, value), L.read(a.column) + L.add(out))


@register_directive(f"decode <method:{_METHODS}> <column:column>")
def decode(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Decode ``column`` from base64, base32 or hex into ``<column>_decode_<method>``
    (the bytes read as UTF-8 text); nulls stay null, and a column that is not there
    leaves the rows as they are (Wrangler skips them).

    As in Wrangler a value that is not valid hex stops the run; base64 and base32
    are decoded leniently (Spark's unbase64 like commons-codec skips bad characters),
    and base64 reads the URL-safe alphabet (``-`` and ``_``) too, as commons-codec does.
    base32 runs as a Python UDF (no Spark built-in).
    Labels: READ column, ADD <column>_decode_<method>.
    """
    if a.column not in df.columns:
        return Outcome(df, [])
    raw = _bytes_of(step, df, a.column)
    src = step.col(a.column)
    if a.method == "base64":
        value = F.unbase64(F.translate(raw.cast("string"), "-_", "+/")).cast("string")
    elif a.method == "hex":
        text = raw.cast("string")
        decoded = F.unhex(text)
        value = fail_when(step, src.isNotNull() & (decoded.isNull() | (F.length(text) % 2 == 1)),
                          decoded.cast("string"), "Failed to decode hex value.",
                          F.concat(F.lit("Failed to decode hex value '"), string_of(text),
                                   F.when(F.length(text) % 2 == 1,
                                          F.lit("'. Odd number of characters."))
                                   .otherwise(F.lit("'. Illegal hexadecimal character."))))
    else:
        value = _base32_decode(raw)
    out = f"{a.column}_decode_{a.method}"
    return Outcome(put(df, out, value), L.read(a.column) + L.add(out))


# -- url-encode / url-decode -------------------------------------------------

@register_directive("url-encode <column:column>")
def url_encode(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """URL-encode ``column`` in place as Java's URLEncoder does (UTF-8, space as ``+``).

    As in Wrangler a null value stops the run. Labels: MODIFY column.
    """
    require_string(step, df, a.column)
    src = step.col(a.column)
    value = fail_when(step, src.isNull(), F.url_encode(src), null_value(a.column))
    return Outcome(put(df, a.column, value), L.modify(a.column))


@register_directive("url-decode <column:column>")
def url_decode(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """URL-decode ``column`` in place as Java's URLDecoder does (``+`` is a space).

    As in Wrangler a null value, or a malformed ``%`` escape, stops the run.
    Labels: MODIFY column.
    """
    require_string(step, df, a.column)
    src = step.col(a.column)
    decoded = F.try_url_decode(src)
    value = fail_when(step, src.isNull(), decoded, null_value(a.column))
    value = fail_when(step, src.isNotNull() & decoded.isNull(), value, "malformed url escape",
                      F.concat(F.lit("malformed url escape in "), string_of(src)))
    return Outcome(put(df, a.column, value), L.modify(a.column))


# -- split-url ---------------------------------------------------------------

_URL_PARTS = ("protocol", "authority", "host", "port", "path", "filename", "query")


@register_directive("split-url <column:column>")
def split_url(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Split a URL into ``<column>_protocol``, ``_authority``, ``_host``, ``_port``
    (int, -1 when absent), ``_path``, ``_filename`` (path and query) and ``_query``.

    A null URL gives nulls. Wrangler uses java.net.URL, Spark's parse_url uses
    java.net.URI: both refuse text without a scheme, which stops the run as in
    Wrangler; URI is stricter on a few characters (e.g. a space), which also stop it.
    Labels: READ column, ADD the seven part columns.
    """
    require_string(step, df, a.column)
    src = step.col(a.column)

    def part(name: str) -> "Column":
        return F.try_parse_url(src, F.lit(name))

    authority = part("AUTHORITY")
    port_text = F.regexp_extract(authority, r":(\d+)$", 1)
    port = F.when(authority.isNull(), F.lit(None)).when(
        port_text == "", F.lit(-1)).otherwise(port_text.cast("int"))
    path = F.coalesce(part("PATH"), F.lit(""))
    query = part("QUERY")
    filename = F.when(query.isNull(), path).otherwise(F.concat(path, F.lit("?"), query))
    values = {"protocol": part("PROTOCOL"), "authority": authority, "host": part("HOST"),
              "port": port, "path": path, "filename": filename, "query": query}
    protocol = values["protocol"]
    new: list[tuple[str, "Column"]] = []
    for name in _URL_PARTS:
        guarded = fail_when(step, src.isNotNull() & protocol.isNull(), values[name],
                            f"Malformed url found in column '{a.column}'.",
                            F.concat(F.lit("Malformed url '"), string_of(src),
                                     F.lit(f"' found in column '{a.column}'.")))
        new.append((f"{a.column}_{name}",
                    F.when(src.isNull(), F.lit(None)).otherwise(guarded)))
    names = [n for n, _ in new]
    return Outcome(put_all(df, new), L.read(a.column) + L.add(*names))


# -- writers -----------------------------------------------------------------

def _flat(df: "DataFrame", step: StepContext) -> list["Column"]:
    """Every column, complex ones as JSON text (CSV has no nesting)."""
    out = []
    for f in df.schema.fields:
        if is_variable(f.name):     # set-variable's hidden values are not fields
            continue
        c = step.col(f.name)
        if f.dataType.typeName() in ("struct", "array", "map"):
            c = F.to_json(c)
        out.append(c.alias(f.name))
    return out


def _writer_labels(df: "DataFrame", column: str) -> list[L.Decl]:
    if column in df.columns:
        return L.read(L.all_columns_minus(column)) + L.modify(column)
    return L.read(L.all_columns_minus(column)) + L.add(column)


def _csv_field(value: "Column", first: bool) -> "Column":
    """One value as Commons CSV 1.4's ``CSVFormat.DEFAULT`` prints it (QuoteMode MINIMAL,
    quote ``"`` doubled inside quotes, no escape character): null is written as nothing
    and never quoted; a value is quoted when it holds a comma, a quote, CR or LF, starts
    with a character up to ``#`` (space, ``!``, ``"``, ``#`` and control characters) or
    ends with one up to space; the first value of the record also when it is empty or
    starts with a character outside RFC 4180's TEXTDATA (``,`` or above ``~``)."""
    # one Java regex per value (cheaper than slicing out its first and last character)
    if first:
        needs = value.rlike(r'^(?:[\x00-#,]|[^\x00-~])|[,"\r\n]|[\x00- ]\z') | (value == "")
    else:
        needs = value.rlike(r'^[\x00-#]|[,"\r\n]|[\x00- ]\z')
    quoted = F.concat(F.lit('"'), F.replace(value, F.lit('"'), F.lit('""')), F.lit('"'))
    return F.coalesce(F.when(needs, quoted).otherwise(value), F.lit(""))


@register_directive("write-as-csv <column:column>")
def write_as_csv(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Write every column of the row as one CSV record into ``column``, as Wrangler's
    CSVPrinter with Commons CSV's DEFAULT format writes it: comma-separated, quoted only
    where needed, a quote inside a quoted value doubled (never a backslash escape),
    null as nothing, no line end (see `_csv_field` for when a value is quoted).

    Wrangler appends a second column of the same name when it exists; a DataFrame
    cannot hold two, so fll replaces it (its old value is part of the record).
    Values are written as Spark prints them (a double 1.8 as ``1.8``), nested ones as
    JSON. Labels: READ all columns minus column, ADD column (MODIFY when it existed).
    """
    if not df.columns:
        raise step.error("there is no column to write")
    fields = [_csv_field(c.cast("string"), i == 0) for i, c in enumerate(_flat(df, step))]
    value = F.concat_ws(",", *fields)
    return Outcome(put(df, a.column, value), _writer_labels(df, a.column))


@register_directive("write-as-json-map <column:column>")
def write_as_json_map(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Write every column of the row as one JSON object into ``column``; null values
    are left out (as Gson does) and nested values stay nested.

    Keys come in column order (Wrangler's HashMap order is unspecified).
    Labels: READ all columns minus column, ADD column (MODIFY when it existed).
    """
    if not df.columns:
        raise step.error("there is no column to write")
    value = F.to_json(F.struct(*[step.col(c).alias(c) for c in visible(df.columns)]))
    return Outcome(put(df, a.column, value), _writer_labels(df, a.column))


@register_directive("write-as-json-object <column:column> <columns:columns>")
def write_as_json_object(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Gather ``columns`` into one JSON object held in ``column`` (a Spark struct, so a
    later write-as-json-map nests it as Wrangler does); ``columns`` are kept.

    Labels: READ each of columns, ADD column (MODIFY when it is one of them).
    """
    step.require(df, a.columns)
    names = list(dict.fromkeys(a.columns))
    value = F.struct(*[step.col(c).alias(c) for c in names])
    reads = [c for c in names if c != a.column]
    target = L.modify(a.column) if a.column in names else L.add(a.column)
    return Outcome(put(df, a.column, value), L.read(*reads) + target)


# -- records (struct columns) --------------------------------------------------

@register_directive("create-record <column:column> <columns:columns>")
def create_record(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Gather ``columns`` into one record held in ``column`` (a Spark struct, set in place
    or appended), as Wrangler's CreateRecord; ``columns`` are kept. Wrangler leaves a
    null or absent column out of that row's record; a struct has one set of fields, so
    fll keeps a null field and refuses an absent column. Labels: READ each of columns,
    ADD column (MODIFY when it is one of them).
    """
    return write_as_json_object(step, df, a)


@register_directive("flatten-record <columns:columns>")
def flatten_record(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Put each field of the record (struct) columns into ``column_field`` (set in place or
    appended; the record is kept), as Wrangler's FlattenRecord. A null record gives null
    fields; an absent column is skipped; a column that is not a record is refused
    (Wrangler fails the run on it). Labels: per record, READ column, ADD each field
    column (MODIFY where it already existed).
    """
    new: list[tuple[str, "Column"]] = []
    labels: list = []
    for column in dict.fromkeys(a.columns):
        if column not in df.columns:
            continue
        kind = df.schema[column].dataType
        if kind.typeName() != "struct":
            raise step.error(f"column {column!r} has type {kind.simpleString()}; it should "
                             f"be a record (struct)")
        names = [f"{column}_{f.name}" for f in kind.fields]   # type: ignore[attr-defined]
        new += [(n, step.col(column).getField(f.name))
                for n, f in zip(names, kind.fields, strict=True)]   # type: ignore[attr-defined]
        labels += L.read(column) + [d for n in names
                                    for d in (L.modify(n) if n in df.columns else L.add(n))]
    return Outcome(put_all(df, new), labels)


# -- set-record-delim, set-charset -----------------------------------------------

@register_directive("set-record-delim <column:column> <delimiter:regex> [<limit:int>]")
def set_record_delim(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Cut the text of ``column`` into records at a regex (Java's ``String.split``: trailing
    empty pieces dropped), one row per piece, as Wrangler does: each new row holds only
    ``column`` (every other column is gone), a row whose value is null or not text gives
    no record, and with ``limit`` at most limit + 1 pieces are kept (Wrangler stops after
    piece number limit, counting from 0). An absent column gives no rows, as Wrangler.
    Labels: MODIFY column, DROP every other column.
    """
    others = [c for c in visible(df.columns) if c != a.column]
    # set-variable's hidden values stay with the new rows (Wrangler's store outlives them)
    hidden = [step.col(c) for c in df.columns if is_variable(c)]
    if a.column not in df.columns:
        return Outcome(df.where(F.lit(False)).select(hidden), L.drop(*others))
    if df.schema[a.column].dataType.typeName() != "string":
        empty = df.where(F.lit(False)).select(F.lit(None).cast("string").alias(a.column))
        return Outcome(empty, L.modify(a.column) + L.drop(*others))
    src = step.col(a.column)
    pieces = F.split(F.regexp_replace(src, "(?:" + a.delimiter + ")+$", ""), a.delimiter)
    if a.limit is not None:
        if a.limit < 0:
            raise step.error(f"limit {a.limit} is negative")
        pieces = F.slice(pieces, 1, min(a.limit + 1, _INT_MAX))
    out = df.select(F.explode(pieces).alias(a.column), *hidden)
    return Outcome(out, L.modify(a.column) + L.drop(*others))


def _python_codec(charset: str) -> str | None:
    import codecs
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return None


def _decode(data: bytes | bytearray | None, codec: str) -> str | None:
    """Java's Charset.decode: malformed input becomes U+FFFD; UTF-16/32 without a byte
    order mark are big-endian, as Java reads them."""
    if data is None:
        return None
    raw = bytes(data)
    if codec in ("utf-16", "utf-32"):
        boms = {"utf-16": (b"\xfe\xff", b"\xff\xfe"), "utf-32": (b"\x00\x00\xfe\xff",
                                                            b"\xff\xfe\x00\x00")}
        if not raw.startswith(boms[codec]):
            codec += "-be"
    return raw.decode(codec, "replace")


@register_directive("set-charset <column:column> <charset:text>")
def set_charset(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Decode the bytes of ``column`` from ``charset`` into text, as Wrangler's
    ``Charset.forName(charset).decode``: malformed bytes become U+FFFD, a null stays
    null, an absent column is left alone; a column that is not bytes is refused up front
    (Wrangler fails on each row). The charset is checked when the recipe compiles, by the
    JVM's Charset and by Python's codecs, which do the decoding in a Python UDF (Spark's
    decode knows seven charsets and stops on malformed bytes). Labels: MODIFY column.
    """
    if a.column not in df.columns:
        return Outcome(df, note=f"column {a.column!r} is not there: nothing decoded")
    kind = df.schema[a.column].dataType.typeName()
    if kind != "binary":
        raise step.error(f"column {a.column!r} has type {kind}; it should hold bytes")
    name = a.charset
    jvm = getattr(step.spark, "_jvm", None)
    if jvm is not None:
        try:
            name = str(jvm.java.nio.charset.Charset.forName(a.charset).name())
        except Exception:
            raise step.error(f"unknown charset {a.charset!r}") from None
    codec = _python_codec(name) or _python_codec(a.charset)
    if codec is None:
        raise step.error(f"charset {a.charset!r} has no Python codec to decode it with")
    decode = F.udf(lambda data: _decode(data, codec), StringType(), useArrow=False)
    return Outcome(put(df, a.column, decode(step.col(a.column))), L.modify(a.column))
