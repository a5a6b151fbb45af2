"""Text and number directives: quantize, mask-shuffle, text-distance and text-metric.

Each follows CDAP Wrangler's implementation (io.cdap.directives.transformation);
where Spark makes fll differ the directive's docstring says so. Everything is a
lazy Spark SQL expression except mask-shuffle, whose Java random sequence has no
Spark built-in. This module must never run a Spark action.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from . import labels as L
from .builtin_support import fail_when, null_value, parse_check, put, string_of
from .context import StepContext
from .parser import Args
from .registry import Outcome, register_directive

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


# -- quantize ------------------------------------------------------------------

_NUMBER = r"[+-]?\d+(?:\.\d*)?"
_RANGE_ITEM = re.compile(rf"\s*({_NUMBER})\s*:\s*({_NUMBER})\s*=\s*('(?:[^']*)'|\"(?:[^\"]*)\"|[^,]*)\s*")


def parse_quantize_ranges(text: str) -> list[tuple[float, float, str]]:
    """``lo:hi=value,…`` as (lo, hi, value) triples; raises ValueError naming the bad piece."""
    out: list[tuple[float, float, str]] = []
    pos = 0
    while pos <= len(text):
        m = _RANGE_ITEM.match(text, pos)
        if not m or m.end() < len(text) and text[m.end()] != ",":
            raise ValueError(f"cannot read the range at {text[pos:]!r}; expected lower:upper=value")
        lo, hi, value = float(m.group(1)), float(m.group(2)), m.group(3).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if not value:
            raise ValueError(f"the range {m.group(0).strip()!r} has no value")
        if lo > hi:
            raise ValueError(f"the range {m.group(1)}:{m.group(2)} has its lower bound above "
                             f"its upper bound")
        out.append((lo, hi, value))
        pos = m.end() + 1
    return out


@register_directive("quantize <source:column> <destination:column> <ranges:text>",
                    checks={"ranges": parse_check(parse_quantize_ranges)})
def quantize(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Put the label of the closed range ``lower:upper=label`` that the number in
    ``source`` falls in into ``destination`` (set or appended); no range gives null.

    Where ranges overlap the one written last wins (Guava's RangeMap). As in Wrangler
    a null or non-numeric text value stops the run. Wrangler takes only text, float
    and double values; fll also takes Spark's other numeric types.
    Labels: READ source, ADD destination (MODIFY when they are the same column).
    """
    step.require(df, [a.source])
    kind = df.schema[a.source].dataType.typeName()
    numeric = ("double", "float", "integer", "long", "short", "byte", "decimal")
    if kind != "string" and not kind.startswith(numeric):
        raise step.error(f"column {a.source!r} has type {kind}; it should be text, float "
                         f"or double")
    src = step.col(a.source)
    number = src.try_cast("double") if kind == "string" else src.cast("double")
    value: "Column" = F.lit(None).cast("string")
    for lo, hi, label in parse_quantize_ranges(a.ranges):     # later ranges win
        value = F.when((number >= F.lit(lo)) & (number <= F.lit(hi)), F.lit(label)).otherwise(value)
    value = fail_when(step, src.isNull(), value,
                      null_value(a.source, "'String', 'Float' or 'Double'"))
    invalid = (f"Column '{a.source}' has invalid type. It should be of type 'String', "
               f"'Float' or 'Double'.")
    value = fail_when(step, src.isNotNull() & number.isNull(), value, invalid,
                      F.concat(F.lit(f"{invalid} Found '"), string_of(src), F.lit("'.")))
    if a.source == a.destination:
        return Outcome(put(df, a.destination, value), L.modify(a.source))
    return Outcome(put(df, a.destination, value), L.read(a.source) + L.add(a.destination))


# -- mask-shuffle --------------------------------------------------------------

_CONSONANTS, _VOWELS, _DIGITS = "bcdfghjklmnpqrstvwxz", "aeiouy", "0123456789"
_MULT, _ADD, _MASK = 0x5DEECE66D, 0xB, (1 << 48) - 1


class _JavaRandom:
    """java.util.Random: the same seed gives the same sequence as the JVM."""

    def __init__(self, seed: int):
        self.seed = (seed ^ _MULT) & _MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * _MULT + _ADD) & _MASK
        value = self.seed >> (48 - bits)
        return value - (1 << 32) if value >= 1 << 31 else value   # Java's (int) cast

    def next_int(self, bound: int) -> int:
        if bound & -bound == bound:
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            value = bits % bound
            if bits - value + (bound - 1) < (1 << 31):   # Java's int overflow check
                return value


def mask_shuffle_value(text: str | None) -> str | None:
    """Wrangler's maskShuffle(text, seed 0): each consonant, vowel and digit becomes a
    random one of its class (case kept); other characters stay."""
    if text is None:
        return None
    rnd = _JavaRandom(0)
    out = []
    for ch in text:
        low = ch.lower()
        for cls in (_CONSONANTS, _VOWELS, _DIGITS):
            if len(low) == 1 and low in cls:
                pick = cls[rnd.next_int(len(cls))]
                ch = pick.upper() if low != ch else pick
                break
        out.append(ch)
    return "".join(out)


_mask_shuffle_udf = F.udf(lambda text: mask_shuffle_value(text), StringType())


@register_directive("mask-shuffle <column:column>")
def mask_shuffle(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Replace each letter and digit of ``column`` by a random one of its kind (consonant,
    vowel, digit; case kept) with Java's Random seeded 0, so equal values mask alike.

    Runs as a Python UDF: Spark has no built-in reproducing java.util.Random. As in
    Wrangler (which casts the value to String) a null value stops the run and a column
    that is not text is refused. Labels: MODIFY column (masking).
    """
    step.require(df, [a.column])
    kind = df.schema[a.column].dataType.typeName()
    if kind != "string":
        raise step.error(f"column {a.column!r} has type {kind}; it should be of type string")
    src = step.col(a.column)
    value = fail_when(step, src.isNull(), _mask_shuffle_udf(src),
                      null_value(a.column))
    return Outcome(put(df, a.column, value), L.modify(a.column), masking=True)


# -- text-distance / text-metric -----------------------------------------------

_SUPPORTED = ("levenshtein", "identity", "jaccard", "dice", "overlap-cofficient")
_WRANGLER_ONLY = ("cosine", "euclidean", "block", "block-distance", "block-metric",
                  "longest-common-subsequence", "longest-common-substring",
                  "damerau-levenshtein", "generalized-jaccard", "jaro", "simon-white")


def _method_check(value: str) -> str | None:
    method = value.lower()
    if method in _SUPPORTED:
        return None
    if method in _WRANGLER_ONLY:
        return (f"method {value!r} (a SimMetrics algorithm) is not available in fll; "
                f"available: {', '.join(_SUPPORTED)}")
    return f"unknown method {value!r}; available: {', '.join(_SUPPORTED)}"


def _similarity(method: str, x: "Column", y: "Column") -> "Column":
    """SimMetrics' similarity (0..1) for the methods fll computes with Spark built-ins."""
    if method == "levenshtein":
        longest = F.greatest(F.length(x), F.length(y))
        return F.lit(1.0) - F.levenshtein(x, y) / longest
    if method == "identity":
        return F.when(x == y, F.lit(1.0)).otherwise(F.lit(0.0))
    # the set metrics compare whitespace-separated tokens, as SimMetrics' whitespace()
    tx = F.array_distinct(F.split(F.trim(x), r"\s+"))
    ty = F.array_distinct(F.split(F.trim(y), r"\s+"))
    common = F.size(F.array_intersect(tx, ty)).cast("double")
    if method == "jaccard":
        return common / F.size(F.array_union(tx, ty))
    if method == "dice":
        return F.lit(2.0) * common / (F.size(tx) + F.size(ty))
    return common / F.least(F.size(tx), F.size(ty))          # overlap-cofficient


def _text_measure(step: StepContext, df: "DataFrame", a: Args, distance: bool) -> Outcome:
    step.require(df, [a.column1, a.column2])
    x, y = step.col(a.column1), step.col(a.column2)
    string = [df.schema[c].dataType.typeName() == "string" for c in (a.column1, a.column2)]
    if not all(string):
        value: "Column" = F.lit(0.0).cast("float")
    else:
        method = a.method.lower()
        sim = _similarity(method, x, y)
        measure = (F.lit(1.0) - sim) if distance else sim
        if distance and method == "levenshtein":     # SimMetrics' distance: the edit count
            measure = F.levenshtein(x, y).cast("double")
        empty = x.isNull() | y.isNull() | (x == "") | (y == "")
        value = F.when(empty, F.lit(0.0)).otherwise(measure).cast("float")
    reads = [c for c in dict.fromkeys([a.column1, a.column2]) if c != a.destination]
    target = (L.modify(a.destination) if a.destination in (a.column1, a.column2)
              else L.add(a.destination))
    return Outcome(put(df, a.destination, value), L.read(*reads) + target)


@register_directive("text-distance <method:text> <column1:column> <column2:column> "
                    "<destination:column>", checks={"method": _method_check})
def text_distance(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Distance (1 − similarity, a float; levenshtein: the edit count) between two text
    columns into ``destination``.

    Methods: levenshtein, identity, jaccard, dice, overlap-cofficient (Wrangler's
    spelling), computed as SimMetrics does with Spark built-ins. Wrangler's other
    SimMetrics methods are refused (Spark has no built-in for them), and an unknown
    method is refused where Wrangler silently uses cosine. As in Wrangler a null,
    empty or non-text value gives 0.0.
    Labels: READ column1, READ column2, ADD destination.
    """
    return _text_measure(step, df, a, distance=True)


@register_directive("text-metric <method:text> <column1:column> <column2:column> "
                    "<destination:column>", checks={"method": _method_check})
def text_metric(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Similarity (0 to 1, a float) between two text columns into ``destination``.

    Same methods and refusals as text-distance; a null, empty or non-text value gives
    0.0 as in Wrangler. Labels: READ column1, READ column2, ADD destination.
    """
    return _text_measure(step, df, a, distance=False)
