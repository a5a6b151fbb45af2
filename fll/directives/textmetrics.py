"""SimMetrics 4.1.1's string metrics and distances, as Wrangler's text-metric and
text-distance call them, to the last digit of their 32-bit float results.

Wrangler builds its metrics with ``org.simmetrics.metrics.StringMetrics`` /
``StringDistances``: the token metrics split on Java's ``\\s+`` (ASCII white
space) and compare token sets (jaccard, dice, overlap coefficient) or multisets
(cosine, block distance, euclidean, generalized jaccard, and simon-white over the
2-grams of each token); the others compare characters. Java computes in
``float``: every operation here is rounded to a 32-bit float where Java's is, so
the values equal Wrangler's bit for bit (a Java ``char`` is a UTF-16 unit; these
work on code points, which differs only outside the Basic Multilingual Plane).

Pure Python: this module must never import Spark (the directive wraps it in a UDF).
"""
from __future__ import annotations

import math
import re
import struct
from collections import Counter
from typing import Callable

__all__ = ["similarity", "distance", "METHODS", "f32"]

_F32 = struct.Struct("f")
_JAVA_SPACE = re.compile(r"[ \t\n\x0b\f\r]+")     # Java's \s without UNICODE_CHARACTER_CLASS


def f32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float (Java's ``(float)`` cast)."""
    return float(_F32.unpack(_F32.pack(x))[0])


def _div(a: float, b: float) -> float:
    return f32(f32(a) / f32(b))


def _sub(a: float, b: float) -> float:
    return f32(f32(a) - f32(b))


def _whitespace(text: str) -> list[str]:
    # Pattern.split drops trailing empty tokens; SimMetrics drops the leading one
    return [t for t in _JAVA_SPACE.split(text) if t]


def _qgrams(token: str, q: int = 2) -> list[str]:
    if len(token) < q:
        return [token]
    return [token[i:i + q] for i in range(len(token) - q + 1)]


def _empty_rule(a, b) -> float | None:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return None


# -- set and multiset metrics --------------------------------------------------------

def _jaccard(a: set, b: set) -> float:
    common = len(a & b)
    return _div(common, len(a) + len(b) - common)


def _dice(a: set, b: set) -> float:
    return _div(f32(2.0 * len(a & b)), len(a) + len(b))


def _overlap(a: set, b: set) -> float:
    return _div(len(a & b), min(len(a), len(b)))


def _cosine(a: Counter, b: Counter) -> float:
    dot = sum(a[t] * b[t] for t in a.keys() & b.keys())
    ma, mb = sum(v * v for v in a.values()), sum(v * v for v in b.values())
    # float sums of small integer counts are exact; the quotient is a double cast to float
    return f32(dot / (math.sqrt(ma) * math.sqrt(mb)))


def _block_distance(a: Counter, b: Counter) -> float:
    return float(sum(abs(a[t] - b[t]) for t in a.keys() | b.keys()))


def _block(a: Counter, b: Counter) -> float:
    return _sub(1.0, _div(_block_distance(a, b), sum(a.values()) + sum(b.values())))


def _euclidean_distance(a: Counter, b: Counter) -> float:
    return f32(math.sqrt(sum((a[t] - b[t]) ** 2 for t in a.keys() | b.keys())))


def _euclidean(a: Counter, b: Counter) -> float:
    na, nb = sum(a.values()), sum(b.values())
    return _sub(1.0, _div(_euclidean_distance(a, b), f32(math.sqrt(na * na + nb * nb))))


def _multiset_common(a: Counter, b: Counter) -> int:
    return sum((a & b).values())


def _generalized_jaccard(a: Counter, b: Counter) -> float:
    common = _multiset_common(a, b)
    return _div(common, sum(a.values()) + sum(b.values()) - common)


def _simon_white(a: Counter, b: Counter) -> float:
    return _div(f32(2.0 * _multiset_common(a, b)), sum(a.values()) + sum(b.values()))


# -- character metrics -----------------------------------------------------------------

def _levenshtein_distance(s: str, t: str) -> float:
    if not s:
        return float(len(t))
    if not t:
        return float(len(s))
    prev = list(range(len(t) + 1))
    for i, cs in enumerate(s):
        cur = [i + 1]
        for j, ct in enumerate(t):
            cur.append(min(cur[j] + 1, prev[j + 1] + 1, prev[j] + (cs != ct)))
        prev = cur
    return float(prev[-1])


def _damerau_distance(s: str, t: str) -> float:
    """SimMetrics' restricted Damerau-Levenshtein (optimal string alignment)."""
    if not s:
        return float(len(t))
    if not t:
        return float(len(s))
    older: list[int] = [0] * (len(t) + 1)
    prev = list(range(len(t) + 1))
    for i, cs in enumerate(s):
        cur = [i + 1]
        for j, ct in enumerate(t):
            best = min(cur[j] + 1, prev[j + 1] + 1, prev[j] + (cs != ct))
            if i > 0 and j > 0 and s[i - 1] == ct and cs == t[j - 1]:
                best = min(best, older[j - 1] + 1)
            cur.append(best)
        older, prev = prev, cur
    return float(prev[-1])


def _edit_similarity(d: float, a: str, b: str) -> float:
    return _sub(1.0, _div(d, max(len(a), len(b))))


def _lcs_subsequence(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(cur[j], prev[j + 1]))
        prev = cur
    return prev[-1]


def _lcs_substring(a: str, b: str) -> int:
    best = 0
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else 0)
        best = max(best, max(cur))
        prev = cur
    return best


def _jaro(a: str, b: str) -> float:
    """SimMetrics' Jaro, including its way of counting transpositions: the common
    characters of ``a`` are paired with those of ``b`` position by position, for as many
    as ``a`` has (``b``'s list may be shorter: its free slots hold 0)."""
    half = max(0, max(len(a), len(b)) // 2 - 1)

    def common(x: str, y: str) -> list[int]:
        out = [0] * min(len(x), len(y))
        taken = [False] * len(y)
        k = 0
        for i, ch in enumerate(x):
            for j in range(max(0, i - half), min(i + half + 1, len(y))):
                if y[j] == ch and not taken[j]:
                    out[k] = ord(ch)
                    taken[j] = True
                    k += 1
                    break
        if k < len(out):
            out[k] = -1
        return out

    ca, cb = common(a, b), common(b, a)
    n, transpositions = 0, 0.0
    while n < len(ca) and ca[n] > -1:
        if ca[n] != cb[n]:
            transpositions += 1
        n += 1
    if n == 0:
        return 0.0
    ra, rb = _div(n, len(a)), _div(n, len(b))
    rt = _div(_sub(n, f32(transpositions / 2.0)), n)
    return _div(f32(f32(ra + rb) + rt), 3.0)


# -- the methods, as Wrangler names them -------------------------------------------------

Pair = Callable[[str, str], float]


def _tokens_set(fn: Callable[[set, set], float]) -> Pair:
    def run(a: str, b: str) -> float:
        x, y = set(_whitespace(a)), set(_whitespace(b))
        empty = _empty_rule(x, y)
        return fn(x, y) if empty is None else empty
    return run


def _tokens_bag(fn: Callable[[Counter, Counter], float], grams: bool = False,
                both_empty_only: bool = False) -> Pair:
    def run(a: str, b: str) -> float:
        ta, tb = _whitespace(a), _whitespace(b)
        if grams:
            ta = [g for t in ta for g in _qgrams(t)]
            tb = [g for t in tb for g in _qgrams(t)]
        x, y = Counter(ta), Counter(tb)
        if both_empty_only:
            if not x and not y:
                return 1.0
            return fn(x, y)
        empty = _empty_rule(x, y)
        return fn(x, y) if empty is None else empty
    return run


def _bag_distance(fn: Callable[[Counter, Counter], float]) -> Pair:
    return lambda a, b: fn(Counter(_whitespace(a)), Counter(_whitespace(b)))


def _chars(fn: Callable[[str, str], float]) -> Pair:
    def run(a: str, b: str) -> float:
        empty = _empty_rule(a, b)
        return fn(a, b) if empty is None else empty
    return run


def _edit(dist: Callable[[str, str], float]) -> Pair:
    return lambda a, b: 1.0 if not a and not b else _edit_similarity(dist(a, b), a, b)


def _lcs_distance(lcs: Callable[[str, str], int]) -> Pair:
    return lambda a, b: float(len(a) + len(b) - 2 * lcs(a, b))


def _one_minus(fn: Pair) -> Pair:
    return lambda a, b: _sub(1.0, fn(a, b))


_SIMILARITY: dict[str, Pair] = {
    "cosine": _tokens_bag(_cosine),
    "block": _tokens_bag(_block),
    "euclidean": _tokens_bag(_euclidean, both_empty_only=True),
    "identity": lambda a, b: 1.0 if a == b else 0.0,
    "dice": _tokens_set(_dice),
    "jaccard": _tokens_set(_jaccard),
    "overlap-cofficient": _tokens_set(_overlap),
    "generalized-jaccard": _tokens_bag(_generalized_jaccard),
    "simon-white": _tokens_bag(_simon_white, grams=True),
    "jaro": _chars(_jaro),
    "levenshtein": _edit(_levenshtein_distance),
    "damerau-levenshtein": _edit(_damerau_distance),
    "longest-common-subsequence": _chars(
        lambda a, b: _div(_lcs_subsequence(a, b), max(len(a), len(b)))),
    "longest-common-substring": _chars(
        lambda a, b: _div(_lcs_substring(a, b), max(len(a), len(b)))),
}

_DISTANCE: dict[str, Pair] = {
    **{m: _one_minus(f) for m, f in _SIMILARITY.items()},
    # the metrics whose distance is not 1 - similarity
    "identity": lambda a, b: 0.0 if a == b else 1.0,
    "block": _bag_distance(_block_distance),
    "euclidean": _bag_distance(_euclidean_distance),
    "levenshtein": _levenshtein_distance,
    "damerau-levenshtein": _damerau_distance,
    "longest-common-subsequence": _lcs_distance(_lcs_subsequence),
    "longest-common-substring": _lcs_distance(_lcs_substring),
}

#: Method name → the name SimMetrics computes, per directive (Wrangler's switch):
#: text-distance takes block-distance, text-metric block-metric, both take block.
METHODS = {
    "text-distance": {**{m: m for m in _DISTANCE}, "block-distance": "block"},
    "text-metric": {**{m: m for m in _SIMILARITY}, "block-metric": "block"},
}


def similarity(method: str, a: str, b: str) -> float:
    """SimMetrics' ``compare(a, b)`` for a method named as text-metric names it."""
    return _SIMILARITY[METHODS["text-metric"][method]](a, b)


def distance(method: str, a: str, b: str) -> float:
    """SimMetrics' ``distance(a, b)`` for a method named as text-distance names it."""
    return _DISTANCE[METHODS["text-distance"][method]](a, b)
