"""Hashing and masking directives: mask-number, mask-shuffle and hash.

Their outcomes are marked ``masking`` (the OpenLineage masking flag). hash
computes the digests Wrangler's Java providers give, in Spark where Spark has
the algorithm and in Python otherwise; mask-shuffle replays Java's Random so its
output is Wrangler's. Nothing here runs a Spark action.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from .. import labels as L
from ..context import StepContext
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (as_text, fail_when, modify, null_value, put)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


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
        return Outcome(put(df, a.column, F.lit("")), L.add(a.column))
    v = as_text(df, a.column, step.col(a.column))
    if not a.pattern:
        return modify(step, df, a.column, F.when(v.isNotNull(), F.lit("")), masking=True)
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
    return modify(step, df, a.column, value, masking=True)


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
    return modify(step, df, a.column, value, masking=True)


def _wrangler_hex(hexed: "Column") -> "Column":
    """``String.format("%064x", new BigInteger(1, digest))`` of a digest in lower-case
    hex: as a number its leading zero digits go, then it is left-padded with zeros to 64
    digits (a 512-bit digest starting with a zero digit comes out 127 digits long)."""
    hexed = F.regexp_replace(hexed, "^0+(?=.)", "")
    return F.when(F.length(hexed) < 64, F.lpad(hexed, 64, "0")).otherwise(hexed)
