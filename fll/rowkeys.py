"""Row keys of the wide-row layout.

Format 5 (wide rows: a column per run or per set; format 4 without ``i|``/``o|``):

| key | one per | columns |
|---|---|---|
| ``d|<checksum>`` | distinct operation set | its operations, compressed, or its shape and endpoints (see `fll.store.lineage`) |
| ``p|<checksum>`` | distinct shape: a set with its endpoints left out | the shape's operations and summaries, compressed |
| ``b|<ns>|<name>|<inv 64 ms>`` | destination × 64 ms with a run | ``<run>`` → ms offset, raw checksum |
| ``f|<ns>|<name>|<inv 64 ms>`` | source × 64 ms with a run | ``<run>`` → ms offset, raw checksum |
| ``i|<ns>|<name>|<inv 64 ms>`` | destination × 64 ms with a set's first run | as ``b|`` (format 5) |
| ``o|<ns>|<name>|<inv 64 ms>`` | source × 64 ms with a set's first run | as ``f|`` (format 5) |
| ``g|<ns>|<name>|<level><inv bucket>`` | destination × time bucket (see `cover4`) | ``<checksum>`` → b"" |
| ``h|<ns>|<name>|<level><inv bucket>`` | source × time bucket | ``<checksum>`` → b"" |
| ``g|<ns>|<name>|*`` / ``h|…|*`` | endpoint: the top-level buckets it has | ``<bucket ms>`` → b"" |
| ``r|<run>`` | run | start time, program, checksum (idempotence and lookup) |
| ``S|<ns>|<name>`` | dataset whose schema some run reported (format 7) | ``<16 hex inv start>|<run>`` → the schema's 16-byte digest (`schema_column`) |
| ``q|<digest hex>`` | distinct schema (format 6) | ``f``: its fields |
| ``n|<run>`` | run (format 6, run model) | ``j``: its job; a column per event received: ``<16 hex event ms><16 hex digest>`` → its eventType |
| ``e|<inv event ms>|<run>|<digest>`` | event received | ``z``: the raw event, compressed |
| ``j|<job ns>|<job name>`` | job | ``x`` (a marker: jobs of a namespace are a range) |
| ``J|<job ns>|<job name>|<inv start>|<run>`` | run × its job | ``x`` (runs of a job, newest first) |
| ``x|<ns>|<name>|<inv start>|<run>`` | failed run × destination | ``c``: the run's checksum (the FAIL/ABORT index) |
| ``y|<ns>|<name>|<inv start>|<run>`` | failed run × source | ``c`` |
| ``v|<name>`` | store metadata: the format version, an upgrade's cursor | |
| ``a|<ns>|<name>`` | alias (a logical dataset name) | ``t``: the dataset it stands for |
| ``A|<ns>|<name>`` | the reverse: a dataset's aliases (format 8) | ``<alias ns>|<alias name>`` → b"" (`alias_column`) |
| ``T|<tag>`` | classification tag (format 6, additive) | ``d`` description, ``p`` policy, ``by``, ``at`` |
| ``t|<ns>|<name>|<field>|<tag>`` | tag put on a field (``<field>`` empty: on the dataset) | ``by``, ``at`` |

Formats 1-7 had a row per alias, ``A|<ns>|<name>|<alias ns>|<alias name>``,
found by a scan of the dataset's prefix.

Formats 1-6 had a row per run and dataset whose schema the run reported,
``s|<ns>|<name>|<inv start>|<run>``, holding the schema (``f``, formats 1-5)
or its digest (``h``, format 6): the latest schema in a range was the first
row of a range of its own, so a hop's datasets took a read each.

Formats 1-3 had one narrow row per run and endpoint
(``b|<ns>|<name>|<inv start>|<run>`` with ``c``); format 2 also had ``B|``/``F|``
rows (``<kind>|<ns>|<name>|<checksum>|<inv start>|<run>``) and bucket keys
ending in the checksum's 32 hex digits, format 3 narrow bucket rows
``g|<ns>|<name>|<level>|<inv bucket>|<raw checksum>`` at 4 s ×16 levels.
`decode` reads every shape so `fll admin upgrade` and fsck can.

Every variable part is escaped so it never contains the separator ``|``:
``%`` becomes ``%25`` and ``|`` becomes ``%7C`` (and bytes below 0x20 are
escaped too, so keys stay printable). Since an escaped part has no ``|``,
the prefix ``b|<ns>|<name>|`` of one dataset can never be a prefix of another
dataset's keys, whatever characters their names hold.

The inverted start time is ``2**63 - 1 - start_ms`` as 8 big-endian bytes:
newest runs sort first and a time range ``[start, end)`` is one contiguous
key range. This module must never depend on a backend.
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import NamedTuple

SEP = b"|"
MAX_TIME = 2**63 - 1

DATA = b"d"
BACKWARD = b"b"
FORWARD = b"f"
BACKWARD_BY_SET = b"B"
FORWARD_BY_SET = b"F"
RUN = b"r"
SCHEMA = b"s"
ALIAS = b"a"
ALIASED_BY = b"A"
BACKWARD_BUCKET = b"g"
FORWARD_BUCKET = b"h"
META = b"v"
#: format 5: the run cells of a set's first runs again, in rows of their own,
#: so a set with one run needs no bucket cells (see `fll.store.lineage`)
FIRST_BACKWARD = b"i"
FIRST_FORWARD = b"o"
#: format 5: what the operation sets of one shape share (see `fll.store.lineage`)
SHAPE = b"p"
#: format 6: a schema's fields, once per distinct schema; ``S|`` rows name it
SCHEMA_BODY = b"q"
#: format 7: a dataset's schema reports, a column per run (`schema_column`):
#: the latest in a range is the row's first column in a column range, which a
#: backend reads for many datasets in one call (`fll.store.base.Table.first_cells`)
SCHEMAS = b"S"
#: a classification tag's definition (description, propagation policy); not lineage
TAG = b"T"
#: a tag put on a dataset or one of its fields by a person (`fll.store.tags`)
TAGGED = b"t"
#: format 6, the run model (see `fll.store.runs`): a run's job and events
RUN_MODEL = b"n"
EVENT = b"e"
JOB = b"j"
JOB_RUN = b"J"
#: format 6: the run cells of FAIL/ABORT runs, out of the default index
FAILED_BACKWARD = b"x"
FAILED_FORWARD = b"y"
KINDS = {BACKWARD_BUCKET: "backward-buckets", FORWARD_BUCKET: "forward-buckets",
         META: "meta", DATA: "data", BACKWARD: "backward", FORWARD: "forward",
         BACKWARD_BY_SET: "backward-by-set", FORWARD_BY_SET: "forward-by-set", RUN: "run",
         SCHEMA: "schema", SCHEMAS: "schemas", ALIAS: "alias", ALIASED_BY: "aliased-by",
         FIRST_BACKWARD: "backward-first", FIRST_FORWARD: "forward-first", SHAPE: "shape",
         SCHEMA_BODY: "schema-body", TAG: "tag", TAGGED: "tagged", RUN_MODEL: "run-model",
         EVENT: "event", JOB: "job", JOB_RUN: "job-run", FAILED_BACKWARD: "failed-backward",
         FAILED_FORWARD: "failed-forward"}

_ESCAPE = {ord("%"): "%25", ord("|"): "%7C"}
_ESCAPE.update({c: f"%{c:02X}" for c in range(0x20)})
_ESCAPE[0x7F] = "%7F"


def escape(part: str) -> bytes:
    """UTF-8 of ``part`` with ``%``, ``|`` and control characters percent-escaped."""
    if not isinstance(part, str):
        raise TypeError(f"key part must be a string, got {type(part).__name__}")
    if "%" not in part and "|" not in part and part.isprintable():
        return part.encode("utf-8")  # the common case, 5x faster than translate
    return part.translate(_ESCAPE).encode("utf-8")


def unescape(raw: bytes) -> str:
    text = raw.decode("utf-8")
    if "%" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and i + 3 <= len(text):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def invert(start_ms: int) -> bytes:
    if not 0 <= start_ms <= MAX_TIME:
        raise ValueError(f"start time must be between 0 and {MAX_TIME} ms, got {start_ms}")
    return struct.pack(">Q", MAX_TIME - start_ms)


def uninvert(raw: bytes) -> int:
    return MAX_TIME - struct.unpack(">Q", raw)[0]


def data(checksum: str) -> bytes:
    return DATA + SEP + escape(checksum)


def shape(checksum: str) -> bytes:
    return SHAPE + SEP + escape(checksum)


def schema_body(checksum: str) -> bytes:
    return SCHEMA_BODY + SEP + escape(checksum)


@lru_cache(maxsize=16384)
def dataset_prefix(kind: bytes, namespace: str, name: str) -> bytes:
    """``<kind>|<ns>|<name>|``: every key of one dataset in one index."""
    return kind + SEP + escape(namespace) + SEP + escape(name) + SEP


def run_suffix(start_ms: int, run_id: str) -> bytes:
    """``<inv start>|<run>``, the tail every per-run index key of a run shares:
    a writer builds it once per run, not once per key."""
    return invert(start_ms) + SEP + escape(run_id)


def backward(namespace: str, name: str, start_ms: int, run_id: str) -> bytes:
    return dataset_prefix(BACKWARD, namespace, name) + invert(start_ms) + SEP + escape(run_id)


def forward(namespace: str, name: str, start_ms: int, run_id: str) -> bytes:
    return dataset_prefix(FORWARD, namespace, name) + invert(start_ms) + SEP + escape(run_id)


@lru_cache(maxsize=16384)
def by_set_prefix(kind: bytes, namespace: str, name: str, checksum: str) -> bytes:
    return dataset_prefix(kind, namespace, name) + escape(checksum) + SEP


def by_set(kind: bytes, namespace: str, name: str, checksum: str, start_ms: int,
           run_id: str) -> bytes:
    return by_set_prefix(kind, namespace, name, checksum) + invert(start_ms) + SEP + escape(run_id)


def run(run_id: str) -> bytes:
    return RUN + SEP + escape(run_id)


def schema(namespace: str, name: str, start_ms: int, run_id: str) -> bytes:
    return dataset_prefix(SCHEMA, namespace, name) + invert(start_ms) + SEP + escape(run_id)


def schemas(namespace: str, name: str) -> bytes:
    """The row of a dataset's schema reports (format 7): a column per run."""
    return SCHEMAS + SEP + escape(namespace) + SEP + escape(name)


def schema_column(start_ms: int, run_id: str) -> str:
    """A run's column in its dataset's ``S|`` row: ``<inv start>|<run>``, the
    inverted start as 16 lowercase hex digits, so the newest sorts first and a
    time range is one column range (`schema_columns`)."""
    if not 0 <= start_ms <= MAX_TIME:
        raise ValueError(f"start time must be between 0 and {MAX_TIME} ms, got {start_ms}")
    return f"{MAX_TIME - start_ms:016x}|{escape(run_id).decode('utf-8')}"


def schema_columns(start_ms: int, end_ms: int) -> tuple[str, str] | None:
    """The column range ``[lo, hi)`` of the runs started in ``[start, end)``;
    None when the range holds no time."""
    start_ms, end_ms = max(start_ms, 0), min(end_ms, MAX_TIME + 1)
    if end_ms <= start_ms:
        return None
    return f"{MAX_TIME - (end_ms - 1):016x}", f"{MAX_TIME - start_ms + 1:016x}"


_HEX16 = re.compile(r"[0-9a-f]{16}").fullmatch


def schema_column_of(column: str) -> tuple[int, str]:
    """(start, run) of an ``S|`` column; ValueError when it is not one."""
    inv, sep, run_id = column.partition("|")
    if not sep or not run_id or not _HEX16(inv):
        raise ValueError(f"not a schema column: {column!r}")
    return MAX_TIME - int(inv, 16), unescape(run_id.encode("utf-8"))


def run_model(run_id: str) -> bytes:
    return RUN_MODEL + SEP + escape(run_id)


def event(at_ms: int, run_id: str, digest: str) -> bytes:
    """An event's row: newest first, so a time range is one key range."""
    return EVENT + SEP + invert(at_ms) + SEP + escape(run_id) + SEP + escape(digest)


def job(namespace: str, name: str) -> bytes:
    return JOB + SEP + escape(namespace) + SEP + escape(name)


def job_run(namespace: str, name: str, start_ms: int, run_id: str) -> bytes:
    return dataset_prefix(JOB_RUN, namespace, name) + invert(start_ms) + SEP + escape(run_id)


def failed(kind: bytes, namespace: str, name: str, start_ms: int, run_id: str) -> bytes:
    """A FAIL/ABORT run's cell for one endpoint (``kind``: `FAILED_BACKWARD`
    for a destination, `FAILED_FORWARD` for a source)."""
    return dataset_prefix(kind, namespace, name) + invert(start_ms) + SEP + escape(run_id)


def alias(namespace: str, name: str) -> bytes:
    return ALIAS + SEP + escape(namespace) + SEP + escape(name)


def aliased_by(namespace: str, name: str) -> bytes:
    """The row of the aliases standing for a dataset (format 8): a column
    per alias (`alias_column`), so a walk reads a dataset's aliases with a
    key, as it reads everything else of a hop (format 7 had a row per alias,
    found by a scan)."""
    return ALIASED_BY + SEP + escape(namespace) + SEP + escape(name)


def alias_column(alias_ns: str, alias_name: str) -> str:
    """An alias's column in its target's ``A|`` row: ``<alias ns>|<alias>``, escaped."""
    return (escape(alias_ns) + SEP + escape(alias_name)).decode("utf-8")


def alias_of_column(column: str) -> tuple[str, str]:
    """The alias an ``A|`` column names (`alias_column`); ValueError if malformed."""
    ns, sep, name = column.encode("utf-8").partition(SEP)
    if not sep or SEP in name:
        raise ValueError(f"malformed alias column: {column!r}")
    return unescape(ns), unescape(name)


def time_range(prefix: bytes, start_ms: int, end_ms: int) -> tuple[bytes, bytes]:
    """Key range ``[lo, hi)`` under ``prefix`` holding runs with start in ``[start, end)``.

    Newest first: the range starts at ``inv(end - 1)`` and stops just past
    every key of ``inv(start)``.
    """
    if end_ms <= start_ms:
        return prefix, prefix  # empty
    lo = prefix + invert(min(end_ms - 1, MAX_TIME))
    hi = prefix + invert(max(start_ms, 0)) + b"\xff"
    return lo, hi


# -- format 2 and 3 time buckets (to read and upgrade older stores) ------------
#
# A run of operation set C that wrote dataset D at time t put, at every level
# k, the narrow row ``g|D|k|inv(bucket_k(t))|C``: 2**12 ms (4 s) up to 2**36 ms
# (2.2 years), a factor 16 apart.
LEVELS = tuple(1 << b for b in range(12, 37, 4))


_HEX32 = re.compile(r"[0-9a-f]{32}").fullmatch


def checksum_bytes(checksum: str) -> bytes:
    """The key form of a checksum: its 16 raw bytes (fll's checksums are 32 hex
    digits); anything else escaped, as format 2 wrote every checksum."""
    if _HEX32(checksum):
        return bytes.fromhex(checksum)
    return escape(checksum)


def checksum_of(raw: bytes) -> str:
    """Inverse of `checksum_bytes`, also for the hex tail of a format-2 key."""
    if len(raw) == 16:
        return raw.hex()
    return unescape(raw)


def bucket(namespace: str, name: str, kind: bytes, level: int, start_ms: int,
           checksum: str) -> bytes:
    size = LEVELS[level]
    return bucket_prefix(kind, namespace, name, level) + invert(start_ms - start_ms % size) + \
        SEP + checksum_bytes(checksum)


def bucket_v2(namespace: str, name: str, kind: bytes, level: int, start_ms: int,
              checksum: str) -> bytes:
    """A bucket key as format 2 wrote it (the checksum in hex): what an upgrade
    replaces and what maintenance of a store not yet upgraded also removes."""
    size = LEVELS[level]
    return bucket_prefix(kind, namespace, name, level) + invert(start_ms - start_ms % size) + \
        SEP + escape(checksum)


@lru_cache(maxsize=16384)
def bucket_prefix(kind: bytes, namespace: str, name: str, level: int) -> bytes:
    return dataset_prefix(kind, namespace, name) + bytes([0x30 + level]) + SEP


# -- format 4: wide rows, enumerated cover ---------------------------------------
#
# Level 0 is the run index itself: one row per endpoint and 64 ms
# (``b|``/``f|``), a column per run whose value is the run's millisecond
# within the row (1 byte) and its set's raw checksum, so the two rows at the
# edges of a range are filtered exactly. Level k >= 1 is a bucket row of
# ``LEVELS4[k]`` ms (``g|``/``h|``), a column per operation set with a run in
# it: blind idempotent puts. Sizes grow x64 (64 ms, 4 s, 4.4 min, 4.7 h,
# 12.4 d, 2.2 y), so the canonical cover of ``[start, end)`` is at most 63
# rows per side per level (64 at level 0 with the edge rows): an explicit
# list of row keys, read with one multi-get. The top level is not bounded by the alignment of a coarser one;
# when a range spans more than `TOP_ENUM` top buckets, the endpoint's
# directory row (``…|*``, a column per top bucket it has) says which to read.
LEVELS4 = tuple(1 << b for b in range(6, 37, 6))
TOP = len(LEVELS4) - 1
TOP_ENUM = 64
DIRECTORY = b"*"
#: `Key.level` of a directory row (no level of any format has it)
DIRECTORY_LEVEL = 99


def run_row(kind: bytes, namespace: str, name: str, ms: int) -> bytes:
    """The level-0 row of an endpoint holding its runs that started in the
    64 ms around ``ms``."""
    return dataset_prefix(kind, namespace, name) + invert(ms - ms % LEVELS4[0])


def run_value(ms: int, raw_checksum: bytes) -> bytes:
    """A run cell: the run's millisecond within its row, then its set."""
    return bytes([ms % LEVELS4[0]]) + raw_checksum


def run_of(row_ms: int, value: bytes) -> tuple[int, str]:
    """(start ms, checksum) of a run cell of the row starting at ``row_ms``;
    ValueError when the value is not one."""
    if len(value) < 2 or value[0] >= LEVELS4[0]:
        raise ValueError("not a run cell")
    return row_ms + value[0], checksum_of(value[1:])


def bucket4(kind: bytes, namespace: str, name: str, level: int, first_ms: int) -> bytes:
    """The format-4 bucket row of level ``level`` >= 1 starting at ``first_ms``."""
    return dataset_prefix(kind, namespace, name) + bytes([0x30 + level]) + invert(first_ms)


def directory(kind: bytes, namespace: str, name: str) -> bytes:
    """The row listing the top-level buckets an endpoint has (columns: bucket ms)."""
    return dataset_prefix(kind, namespace, name) + DIRECTORY


def cover4(start_ms: int, end_ms: int) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """The canonical cover of ``[start, end)``: ``(level, first ms)`` of every
    row to read (level 0: a run row, whose runs the reader filters by their
    exact time: the edge rows hold runs outside the range), and the top-level
    span ``(first, stop)`` when it holds more than `TOP_ENUM` top buckets
    (read through the directory row instead of enumerated), else None."""
    start, end = max(start_ms, 0), min(end_ms, MAX_TIME + 1)
    out: list[tuple[int, int]] = []
    if end <= start:
        return out, None
    z0, z1 = LEVELS4[0], LEVELS4[1]
    lo_n, hi_n = -(-start // z1) * z1, end // z1 * z1
    first, stop = start // z0 * z0, -(-end // z0) * z0
    if lo_n >= hi_n:
        out.extend((0, t) for t in range(first, stop, z0))
        return out, None
    out.extend((0, t) for t in range(first, lo_n, z0))
    out.extend((0, t) for t in range(hi_n, stop, z0))
    lo, hi = lo_n, hi_n
    for k in range(1, TOP):
        size, z = LEVELS4[k], LEVELS4[k + 1]
        lo_n, hi_n = -(-lo // z) * z, hi // z * z
        if lo_n >= hi_n:
            out.extend((k, t) for t in range(lo, hi, size))
            return out, None
        out.extend((k, t) for t in range(lo, lo_n, size))
        out.extend((k, t) for t in range(hi_n, hi, size))
        lo, hi = lo_n, hi_n
    size = LEVELS4[TOP]
    if (hi - lo) // size > TOP_ENUM:
        return out, (lo, hi)
    out.extend((TOP, t) for t in range(lo, hi, size))
    return out, None


@lru_cache(maxsize=256)
def cover4_runs(start_ms: int, end_ms: int
                ) -> tuple[tuple[tuple[int, int, int], ...], tuple[int, int] | None]:
    """`cover4` as runs of consecutive rows of one level, ``(level, first ms,
    last ms)``, and its top span. The same for every endpoint, so made once
    per range: a walk over a thousand datasets asks it a thousand times, and
    an all-time cover has ~170 rows."""
    cover, top = cover4(start_ms, end_ms)
    runs: list[tuple[int, int, int]] = []
    for k, t in cover:
        if runs and runs[-1][0] == k and runs[-1][2] + LEVELS4[k] == t:
            runs[-1] = (k, runs[-1][1], t)
        else:
            runs.append((k, t, t))
    return tuple(runs), top


def tag(name: str) -> bytes:
    return TAG + SEP + escape(name)


def tagged(namespace: str, name: str, field: str, tag_name: str) -> bytes:
    """``t|<ns>|<name>|<field>|<tag>``; ``field`` is empty for a tag on the dataset
    itself. One row per (dataset, field, tag): a dataset's tags are one prefix."""
    return dataset_prefix(TAGGED, namespace, name) + escape(field) + SEP + escape(tag_name)


def meta(name: str) -> bytes:
    return META + SEP + name.encode("ascii")


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b""
    p[-1] += 1
    return bytes(p)


class Key(NamedTuple):
    """A decoded row key, for display and repair."""

    kind: str
    namespace: str | None = None
    name: str | None = None
    checksum: str | None = None
    start_ms: int | None = None
    run_id: str | None = None
    #: the alias of a format-7 ``A|`` row (namespace, name), a row per alias
    alias: tuple[str, str] | None = None
    #: the level of a bucket row (its start_ms is the bucket's start); 0 for a
    #: format-4 run row (no run id: its runs are its columns); DIRECTORY_LEVEL
    #: for a directory row
    level: int | None = None
    #: the field (``""``: the dataset itself) and the tag of a ``t|`` row
    field: str | None = None
    tag: str | None = None


def is_wide(key: bytes) -> bool:
    """Whether an index or bucket key has the format-4 shape (a wide row)."""
    try:
        k = decode(key)
    except (ValueError, UnicodeDecodeError):
        return False
    if k.kind in ("backward", "forward", "backward-first", "forward-first"):
        return k.level == 0
    if k.kind in ("backward-buckets", "forward-buckets"):
        return k.checksum is None
    return False


def decode(key: bytes) -> Key:
    """Parse any fll row key; raises ValueError on a key of no known shape."""
    kind, sep, rest = key[:1], key[1:2], key[2:]
    if sep != SEP or kind not in KINDS:
        raise ValueError(f"not an fll row key: {key!r}")
    if kind == DATA:
        return Key("data", checksum=unescape(rest))
    if kind == SHAPE:
        return Key("shape", checksum=unescape(rest))
    if kind == SCHEMA_BODY:
        return Key("schema-body", checksum=unescape(rest))
    if kind == RUN:
        return Key("run", run_id=unescape(rest))
    if kind == RUN_MODEL:
        return Key("run-model", run_id=unescape(rest))
    if kind == EVENT:
        if len(rest) < 10 or rest[8:9] != SEP:
            raise ValueError(f"malformed event row key: {key!r}")
        run_part, sep2, digest = rest[9:].partition(SEP)
        if not sep2 or SEP in digest:
            raise ValueError(f"malformed event row key: {key!r}")
        return Key("event", start_ms=uninvert(rest[:8]), run_id=unescape(run_part),
                   checksum=unescape(digest))
    if kind == JOB:
        ns, sep2, name = rest.partition(SEP)
        if not sep2 or SEP in name:
            raise ValueError(f"malformed job row key: {key!r}")
        return Key("job", unescape(ns), unescape(name))
    if kind == META:
        return Key("meta", name=rest.decode("ascii"))
    if kind == TAG:
        if not rest or SEP in rest:
            raise ValueError(f"malformed tag row key: {key!r}")
        return Key("tag", tag=unescape(rest))
    if kind == TAGGED:
        parts = rest.split(SEP)
        if len(parts) != 4 or not parts[0] or not parts[1] or not parts[3]:
            raise ValueError(f"malformed tagged row key: {key!r}")
        return Key("tagged", unescape(parts[0]), unescape(parts[1]), field=unescape(parts[2]),
                   tag=unescape(parts[3]))
    if kind in (BACKWARD_BUCKET, FORWARD_BUCKET):
        ns, name, rest = rest.split(SEP, 2)
        if rest == DIRECTORY:
            return Key(KINDS[kind], unescape(ns), unescape(name), level=DIRECTORY_LEVEL)
        if len(rest) == 9:  # format 4: <level><inv bucket>, no checksum in the key
            if not 0x31 <= rest[0] <= 0x30 + TOP:
                raise ValueError(f"malformed bucket row key: {key!r}")
            return Key(KINDS[kind], unescape(ns), unescape(name), None, uninvert(rest[1:]),
                       level=rest[0] - 0x30)
        level, sep3, rest = rest.partition(SEP)
        if not sep3:
            raise ValueError(f"malformed bucket row key: {key!r}")
        if len(level) != 1 or len(rest) < 9 or rest[8:9] != SEP:
            raise ValueError(f"malformed bucket row key: {key!r}")
        return Key(KINDS[kind], unescape(ns), unescape(name), checksum_of(rest[9:]),
                   uninvert(rest[:8]), level=level[0] - 0x30)
    if kind in (ALIAS, SCHEMAS):
        ns, sep2, name = rest.partition(SEP)
        if not sep2 or SEP in name:
            raise ValueError(f"malformed {KINDS[kind]} row key: {key!r}")
        return Key(KINDS[kind], unescape(ns), unescape(name))
    if kind == ALIASED_BY:
        parts = rest.split(SEP)
        if len(parts) == 2:
            return Key("aliased-by", unescape(parts[0]), unescape(parts[1]))
        if len(parts) != 4:
            raise ValueError(f"malformed alias row key: {key!r}")
        # format 7's row per alias, which `fll admin upgrade` moves into columns
        return Key("aliased-by", unescape(parts[0]), unescape(parts[1]),
                   alias=(unescape(parts[2]), unescape(parts[3])))
    ns, name, rest = rest.split(SEP, 2)
    checksum = None
    if kind in (BACKWARD, FORWARD, FIRST_BACKWARD, FIRST_FORWARD) and len(rest) == 8:
        # format 4: a run row of 64 ms (format 5: first runs too)
        return Key(KINDS[kind], unescape(ns), unescape(name), None, uninvert(rest), None,
                   level=0)
    if kind in (FIRST_BACKWARD, FIRST_FORWARD):
        raise ValueError(f"malformed first-run row key: {key!r}")
    if kind in (BACKWARD_BY_SET, FORWARD_BY_SET):
        c, rest = rest.split(SEP, 1)
        checksum = unescape(c)
    if len(rest) < 9 or rest[8:9] != SEP:
        raise ValueError(f"truncated fll row key: {key!r}")
    return Key(KINDS[kind], unescape(ns), unescape(name), checksum, uninvert(rest[:8]),
               unescape(rest[9:]))
