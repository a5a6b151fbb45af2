"""Text directives: lowercase, uppercase, trim, ltrim, rtrim, titlecase,
fill-null-or-empty, find-and-replace, extract-regex-groups, split-email, quantize,
text-distance and text-metric.

As in Wrangler, the case and trim directives change only text values (other
types pass through). text-distance and text-metric follow the simmetrics library
Wrangler uses (`fll.directives.textmetrics`). extract-regex-groups runs one
small action to count the groups; the rest is lazy.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from pyspark.sql import functions as F
from pyspark.sql.types import FloatType, StringType

from .. import labels as L
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (append_all, fail_when, is_string, modify, null_value, parse_check, put, string_of)
from ..textmetrics import METHODS, distance, similarity

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def _string_only(df: "DataFrame", column: str, value: "Column", original: "Column") -> "Column":
    """Wrangler changes only String values; other types pass through unchanged."""
    return value if is_string(df, column) else original


@register_directive("lowercase <column:column>")
def lowercase(step, df, a):
    """Lower-case the text values of ``column`` (other types unchanged). Labels: MODIFY."""
    step.require(df, [a.column])
    c = step.col(a.column)
    return modify(step, df, a.column, _string_only(df, a.column, F.lower(c), c))


@register_directive("uppercase <column:column>")
def uppercase(step, df, a):
    """Upper-case the text values of ``column`` (other types unchanged). Labels: MODIFY."""
    step.require(df, [a.column])
    c = step.col(a.column)
    return modify(step, df, a.column, _string_only(df, a.column, F.upper(c), c))


# Wrangler's Trimmer: the Unicode white space set, Java's trim() characters and NEL.
_WHITESPACE = ("\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{180E}\\x{2000}-\\x{200A}"
               "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}")


def _trimmed(step, df, column: str, left: bool, right: bool) -> Outcome:
    step.require(df, [column])
    c = step.col(column)
    pattern = "|".join(([f"^[{_WHITESPACE}]+"] if left else []) +
                       ([f"[{_WHITESPACE}]+$"] if right else []))
    return modify(step, df, column, _string_only(df, column, F.regexp_replace(c, pattern, ""), c))


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
    return modify(step, df, a.column, _string_only(df, a.column, value, c))


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
        return Outcome(put(df, a.column, F.lit(a.value)), L.add(a.column))
    c = step.col(a.column)
    kind = df.schema[a.column].dataType.typeName()
    if kind == "string":
        return modify(step, df, a.column, F.when(c.isNull() | (c == F.lit("")), F.lit(a.value))
                       .otherwise(c))
    if _fits_type(a.value, kind):
        dtype = df.schema[a.column].dataType.simpleString()
        fill = F.expr(f"try_cast({_sql_str(a.value)} AS {dtype})")
        return modify(step, df, a.column, F.when(c.isNull(), fill).otherwise(c))
    return modify(step, df, a.column, F.when(c.isNull(), F.lit(a.value))
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
    names = [c for c in dict.fromkeys(a.columns) if c in df.columns and is_string(df, c)]
    out = df
    for c in names:
        out = put(out, c, _sed_value(step.col(c), a.sed))
    return Outcome(out, L.modify(*names))


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

    from pyspark.sql.types import ArrayType
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
    if groups == 0 or not is_string(df, a.column):
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
        return Outcome(append_all(df, new),
                       L.read(a.column) + L.add(L.all_columns_formatted(f"{a.column}_%d_%d")),
                       note=f"one job counted {matches} matches")
    row = df.select(F.max(F.size(F.regexp_extract_all(c, F.lit(a.regex), 0)))).first()
    matches = int(row[0] or 0) if row is not None else 0
    found = [F.regexp_extract_all(c, F.lit(a.regex), g) for g in range(1, groups + 1)]
    new = [(f"{a.column}_{m}_{g}", F.try_element_at(found[g - 1], F.lit(m)))
           for m in range(1, matches + 1) for g in range(1, groups + 1)]
    return Outcome(append_all(df, new),
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
    if not is_string(df, a.column):
        kind = df.schema[a.column].dataType.typeName()
        raise step.error(f"Column '{a.column}' has invalid type '{kind}'. It should be of "
                         f"type 'String'.")
    c = step.col(a.column)
    address = F.when(F.instr(c, "<") == 0, c).when(c.rlike(_BRACKETED), F.regexp_extract(c, _BRACKETED, 1))
    ok = address.rlike(_AT)
    new = [(f"{a.column}_account", F.when(ok, F.regexp_extract(address, _AT, 1))),
           (f"{a.column}_domain", F.when(ok, F.regexp_extract(address, _AT, 2)))]
    return Outcome(append_all(df, new),
                   L.read(a.column) + L.add(f"{a.column}_account", f"{a.column}_domain"))


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
