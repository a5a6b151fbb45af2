"""Text and number directives: quantize, mask-shuffle, text-distance and text-metric.

Each follows CDAP Wrangler's implementation (io.cdap.directives.transformation);
where Spark makes fll differ the directive's docstring says so. Everything is a
lazy Spark SQL expression except mask-shuffle, whose Java random sequence has no
Spark built-in, and the SimMetrics methods Spark has no built-in for (one Python
UDF over `textmetrics`). This module must never run a Spark action.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from pyspark.sql import functions as F
from pyspark.sql.types import FloatType, StringType

from . import labels as L
from .builtin_support import fail_when, null_value, parse_check, put, string_of
from .context import StepContext
from .parser import Args
from .registry import Outcome, register_directive
from .textmetrics import METHODS, distance, similarity

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

def _method_check(directive: str):
    known = METHODS[directive]

    def check(value: str) -> str | None:
        method = value.lower()
        if method in known:
            return None
        hint = ""
        if method in ("block-distance", "block-metric"):
            hint = (f" ({directive} calls it {'block-metric' if directive == 'text-metric' else 'block-distance'}"
                    f" or block; Wrangler would silently use cosine)")
        return (f"unknown method {value!r}{hint}; Wrangler's code silently uses cosine "
                f"for a name it does not know, fll refuses it; known: {', '.join(sorted(known))}")
    return check


def _udf(directive: str) -> "Callable[..., Column]":
    """One Python UDF per directive computing every SimMetrics method (textmetrics)."""
    fn = similarity if directive == "text-metric" else distance

    def measure(method, x, y):
        # Spark evaluates a Python UDF on every row before the CASE WHEN around it
        # chooses, so the null and empty values the directive maps to 0.0 reach it too
        return 0.0 if not x or not y else fn(method, x, y)
    return F.udf(measure, FloatType(), useArrow=False)


_UDFS: dict[str, "Callable[..., Column]"] = {}


def _float(value: "Column") -> "Column":
    return value.cast("float")


def _token_set(x: "Column") -> "Column":
    # SimMetrics' whitespace(): Java's \s+ (ASCII white space), no empty token
    return F.array_distinct(F.array_remove(F.split(x, r"\s+"), ""))


def _native(method: str, x: "Column", y: "Column", is_distance: bool) -> "Column | None":
    """The methods Spark has built-ins for, with Java's float arithmetic (Spark's float
    subtraction is Java's; a quotient of two small integers rounds alike through double)."""
    one = F.lit(1.0).cast("float")
    if method == "levenshtein":
        edits = F.levenshtein(x, y)
        if is_distance:
            return _float(edits)
        return one - _float(edits / F.greatest(F.length(x), F.length(y)))
    if method == "identity":
        same = x == y
        return F.when(same, one if not is_distance else F.lit(0.0).cast("float")) \
            .otherwise(F.lit(0.0).cast("float") if not is_distance else one)
    if method not in ("jaccard", "dice", "overlap-cofficient"):
        return None
    tx, ty = _token_set(x), _token_set(y)
    nx, ny = F.size(tx), F.size(ty)
    common = F.size(F.array_intersect(tx, ty))
    if method == "jaccard":
        sim = _float(common / (nx + ny - common))
    elif method == "dice":
        sim = _float(2 * common / (nx + ny))
    else:
        sim = _float(common / F.least(nx, ny))
    sim = F.when((nx == 0) & (ny == 0), one).when((nx == 0) | (ny == 0),
                                                   F.lit(0.0).cast("float")).otherwise(sim)
    return one - sim if is_distance else sim


def _text_measure(step: StepContext, df: "DataFrame", a: Args, directive: str) -> Outcome:
    method = METHODS[directive][a.method.lower()]
    present = [c for c in dict.fromkeys([a.column1, a.column2]) if c in df.columns]
    zero = F.lit(0.0).cast("float")
    string = len(present) == len({a.column1, a.column2}) and all(
        df.schema[c].dataType.typeName() == "string" for c in present)
    if not string:      # an absent or non-text column gives 0.0 on every row, as Wrangler
        value: "Column" = zero
    else:
        x, y = step.col(a.column1), step.col(a.column2)
        measure = _native(method, x, y, directive == "text-distance")
        if measure is None:
            if directive not in _UDFS:
                _UDFS[directive] = _udf(directive)
            measure = _UDFS[directive](F.lit(method), x, y)
        empty = x.isNull() | y.isNull() | (x == "") | (y == "")
        value = F.when(empty, zero).otherwise(measure)
    reads = [c for c in present if c != a.destination]
    target = (L.modify(a.destination) if a.destination in present else L.add(a.destination))
    return Outcome(put(df, a.destination, value), L.read(*reads) + target)


@register_directive("text-distance <method:text> <column1:column> <column2:column> "
                    "<destination:column>", checks={"method": _method_check("text-distance")})
def text_distance(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """SimMetrics' distance (a float) between two text columns into ``destination``:
    1 − similarity, except the edit counts of levenshtein and damerau-levenshtein, the
    token count difference of block (also block-distance), the euclidean distance of
    token counts, and len(a) + len(b) − 2·lcs for the longest-common-* methods.

    Methods, as Wrangler's code names them: cosine, euclidean, block, identity, dice,
    jaccard, overlap-cofficient (Wrangler's spelling), generalized-jaccard, simon-white,
    jaro, levenshtein, damerau-levenshtein, longest-common-subsequence,
    longest-common-substring. Values are SimMetrics 4.1.1's to the last bit of their
    32-bit float (tokens split on ASCII white space; simon-white on each token's
    2-grams): levenshtein, identity, jaccard, dice and overlap-cofficient are Spark
    expressions, the others one Python UDF (every row crosses to a Python worker, some
    ten times the cost of an expression). A name Wrangler does not know (it silently
    uses cosine) is refused. As in Wrangler a null, empty or non-text value, or an absent
    column, gives 0.0. Labels: READ column1, READ column2, ADD destination (MODIFY when
    it is one of them).
    """
    return _text_measure(step, df, a, "text-distance")


@register_directive("text-metric <method:text> <column1:column> <column2:column> "
                    "<destination:column>", checks={"method": _method_check("text-metric")})
def text_metric(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """SimMetrics' similarity (0 to 1, a float) between two text columns into
    ``destination``; block is also block-metric. Same methods, cost, 0.0 rule and labels
    as text-distance. Labels: READ column1, READ column2, ADD destination.
    """
    return _text_measure(step, df, a, "text-metric")
