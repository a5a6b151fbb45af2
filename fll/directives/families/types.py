"""The set-type directive: Wrangler's type conversions on Spark types.

Names, scales and rounding modes follow Wrangler's SetType (Java's BigDecimal
rounding), bytes its Bytes utilities; a value that does not convert becomes null
(Wrangler fails the record). Nothing here runs a Spark action.
"""
from __future__ import annotations

import re
import struct
from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DoubleType, FloatType, StringType

from .. import labels as L
from ..context import StepContext, quote
from ..registry import Outcome, register_directive
from ..support import fail_when, put, session_zone

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column


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
    each value's own; for the same reason decimal without either holds 18 places).
    Bytes convert as Wrangler's Bytes utilities: big-endian integers, IEEE floats, a
    decimal as a 4-byte scale then its unscaled two's complement (float, double and
    decimal through a small Python UDF, null-safe); a datetime or timestamp becomes
    Java's ``toString`` text (``2024-01-02T03:04:05.123``, a timestamp with the
    session zone's offset and id, ``…Z[UTC]``). Spark: a value that does not convert
    (too few bytes, text that is no number) becomes null instead of failing the
    record. Labels: MODIFY column.
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
        value = _PACK[src](c)
    elif kind == "binary" and src in _INT_BYTES:   # big-endian two's complement, as Bytes.toBytes
        digits = _INT_BYTES[src] * 2
        value = F.unhex(F.expr(f"right(lpad(hex({quote(a.column)}), 16, '0'), {digits})"))
    elif src == "binary" and kind in _FROM_BYTES:
        value = _FROM_BYTES[kind](c)
    elif kind == "decimal":
        value = _to_decimal(step, _unpack_decimal(c) if src == "binary" else c, a.scale,
                            precision, a.rounding_mode)
    elif kind == "string" and src in ("timestamp", "timestamp_ntz"):
        value = _java_text(step, c, zoned=src == "timestamp")
    else:
        value = F.expr(f"try_cast({quote(a.column)} AS {kind})")
    return Outcome(put(df, a.column, value), L.modify(a.column))


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


# -- bytes, as Wrangler's Bytes.toX / Bytes.toBytes ----------------------------------------

def _signed(c: "Column", n: int) -> "Column":
    """The first ``n`` bytes as a big-endian two's complement integer (null when there are
    fewer), as Bytes.toShort/toInt/toLong read them."""
    unsigned = F.conv(F.hex(F.substring(c, 1, n)), 16, 10).cast("decimal(20,0)")
    half, whole = (F.expr(f"CAST('{2 ** k}' AS DECIMAL(20,0))") for k in (8 * n - 1, 8 * n))
    value = F.when(unsigned >= half, unsigned - whole).otherwise(unsigned)
    return F.when(F.length(c) >= n, value)


def _float_of(data: bytes | bytearray | None, fmt: str, size: int) -> float | None:
    if data is None or len(data) < size:
        return None
    return struct.unpack(fmt, bytes(data[:size]))[0]


def _decimal_text(data: bytes | bytearray | None) -> str | None:
    """Bytes.toBigDecimal: a 4-byte scale, then the unscaled value's two's complement."""
    if data is None or len(data) < 5:
        return None
    scale = int.from_bytes(bytes(data[:4]), "big", signed=True)
    unscaled = int.from_bytes(bytes(data[4:]), "big", signed=True)
    return str(Decimal(unscaled).scaleb(-scale))


def _bytes_of(value: float | Decimal | None, fmt: str) -> bytes | None:
    if value is None:
        return None
    if fmt == "decimal":       # Bytes.toBytes(BigDecimal): scale, then unscaled bytes
        sign, digits, exponent = Decimal(value).as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        scale = -int(exponent)
        size = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
        return scale.to_bytes(4, "big", signed=True) + unscaled.to_bytes(size, "big", signed=True)
    return struct.pack(fmt, value)


_to_float = F.udf(lambda b: _float_of(b, ">f", 4), FloatType())
_to_double = F.udf(lambda b: _float_of(b, ">d", 8), DoubleType())
_unpack_decimal = F.udf(lambda b: _decimal_text(b), StringType())
_FROM_BYTES = {"int": lambda c: _signed(c, 4).cast("int"),
               "smallint": lambda c: _signed(c, 2).cast("smallint"),
               "bigint": lambda c: _signed(c, 8).cast("bigint"),
               "float": _to_float, "double": _to_double,
               "string": lambda c: c.cast("string")}
_PACK = {"float": F.udf(lambda v: _bytes_of(v, ">f"), BinaryType()),
         "double": F.udf(lambda v: _bytes_of(v, ">d"), BinaryType()),
         "decimal": F.udf(lambda v: _bytes_of(v, "decimal"), BinaryType())}


# -- datetimes as Java's toString ----------------------------------------------------------

_OFFSET_ZONE = re.compile(r"Z|[+-]\d{2}(:?\d{2}(:?\d{2})?)?|(UTC|GMT|UT)?[+-]\d{1,2}(:\d{2})?")


def _java_text(step: StepContext, c: "Column", zoned: bool) -> "Column":
    """LocalDateTime.toString (``uuuu-MM-ddTHH:mm``, then ``:ss`` and a fraction of 3 or
    6 digits only when not zero), and for a timestamp ZonedDateTime.toString's offset and,
    for a region zone, ``[zone]`` (the session zone: a Spark timestamp carries none)."""
    base = F.date_format(c, "yyyy-MM-dd'T'HH:mm")
    seconds = F.date_format(c, "ss")
    micros = F.date_format(c, "SSSSSS").cast("int")
    text = (F.when((F.second(c) == 0) & (micros == 0), base)
            .when(micros == 0, F.concat(base, F.lit(":"), seconds))
            .when(micros % 1000 == 0, F.concat(base, F.lit(":"), seconds, F.lit("."),
                                               F.date_format(c, "SSS")))
            .otherwise(F.concat(base, F.lit(":"), seconds, F.lit("."),
                                F.date_format(c, "SSSSSS"))))
    if not zoned:
        return text
    zone = session_zone(step)
    suffix = "" if _OFFSET_ZONE.fullmatch(zone) else f"[{zone}]"
    return F.when(c.isNotNull(), F.concat(text, F.date_format(c, "XXX"), F.lit(suffix)))
