"""The ``d|`` row of an operation set and the ``p|`` row of its shape: how a
set is encoded, stored once per distinct set (and shape), and decoded again
(`_Cached`: a decoded row as the store's cache keeps it)."""
from __future__ import annotations

import struct
import zlib
from typing import Sequence

import msgpack
import xxhash

from .. import rowkeys as rk
from ..codec import canonical_doc
from ..errors import FllError
from ..opset import FieldLineageInfo, decode_canonical
from ..summaries import PLACEHOLDER_NS, Summaries, summaries_to_bytes
from .base import Table
from .layout import _corrupt

# -- the d| row ----------------------------------------------------------------
#
# ``z``: a version byte, then one raw deflate stream (no header) against a
# preset dictionary of what every canonical set repeats (map keys, operation
# types, the shape of inputs and endpoints) of: the length of the canonical
# operations (4 bytes), the operations, the summaries. One stream, so the
# summaries reuse the operations' field names. A 10-field set takes 428 bytes
# instead of 549. Dropping the summaries (computing them on first read) would
# save 183 more, but a set read for the first time would cost about 2.7 ms
# instead of 0.35 (measured on the bench's 10-field set): wide ranges over
# many sets, beyond the cache, would pay it on every question; and with tags
# (format 6) far more. Older rows (format 2's plain ``o`` and ``s``, the
# summaries of formats 2-5) are converted by `fll.store.admin.upgrade`, never
# read here. The dictionary of version 1 must
# never change: a new one takes a new version byte.
_ZDICT_1 = (b"\xa6source\x83\xa4name\xa9namespace\xaaproperties\x80\xa4type\xa4READ\x85"
            b"\xabdescription\xabdestination\x83\xa4name\xa9namespace\xaaproperties\x80"
            b"\xa6inputs\x93\x82\xa4name\xa4type\xa5WRITE\xa1v\x01\x82\xaaoperations\x85"
            b"\xabdescription\xa4read\xa4name\xa4read\xa7outputs\x91\x82\xa4name\xa6origin"
            b"\xa4read\xa4type\xa9TRANSFORM\x85\xabdescription\xa6inputs\x91\x82\xa4name"
            b"\xa6origin\xa4name\xa7outputs\x91\xa4type\xa9TRANSFORM\x85\xabdescription")
_ZDICTS = {1: _ZDICT_1}
_ZVERSION = 1
_LEN = struct.Struct(">I")


def data_row(info: FieldLineageInfo) -> dict[str, bytes]:
    """The ``d|`` row of an operation set, as this format writes it."""
    return {"z": _deflated(info.canonical_bytes(), summaries_to_bytes(info))}


def _deflated(ops: bytes, summaries: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zdict=_ZDICTS[_ZVERSION])
    return bytes([_ZVERSION]) + z.compress(_LEN.pack(len(ops)) + ops + summaries) + z.flush()


def data_parts(row: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(canonical operations, summaries) of a whole ``d|`` row (or a ``p|`` row);
    ValueError when it is not one."""
    z = row.get("z")
    if z is None:
        raise ValueError("a data row without operations and summaries")
    zdict = _ZDICTS.get(z[0]) if z else None
    if zdict is None:
        raise ValueError(f"data row encoding {z[:1]!r} is unknown to this fll")
    try:
        d = zlib.decompressobj(-15, zdict=zdict)
        body = d.decompress(z[1:]) + d.flush()
    except zlib.error as e:
        raise ValueError(f"data row does not inflate ({e})") from None
    if not d.eof or len(body) < 4 or _LEN.unpack_from(body)[0] > len(body) - 4:
        raise ValueError("data row is truncated")
    n = _LEN.unpack_from(body)[0]
    return body[4:4 + n], body[4 + n:]


def decode_data(row: dict[str, bytes], table: Table | None = None) -> FieldLineageInfo:
    """The operation set of a ``d|`` row of any format (a row in shape form
    reads its shape row from ``table``); FllError or ValueError if corrupt."""
    if SHAPED in row:
        if table is None:
            raise ValueError("a data row in shape form read without its table")
        shape_checksum, eps = shape_ref(row)
        shape_row = table.get(rk.shape(shape_checksum))
        if shape_row is None:
            raise ValueError(f"the shape {shape_checksum} of a data row is missing")
        return decode_canonical(join_shape(data_parts(shape_row)[0], eps))
    return decode_canonical(data_parts(row)[0])


# -- shapes (format 5) -----------------------------------------------------------
#
# A daily job reading ``.../day=N`` records a new set every day that differs
# from yesterday's only in an endpoint. Its ``d|`` row then holds only what
# differs: ``y`` = the 16 raw bytes of its shape's checksum and the endpoints
# (msgpack, each as the canonical operations spell it, in order of first
# appearance). The shape, ``p|<checksum>``, is the set's canonical operations
# with each endpoint replaced by a placeholder ``#:<i>``, and the summaries of
# that placeholder set, encoded as a full ``d|`` row is (`data_row`): every set
# of the shape shares it, and its summaries are the set's once the endpoints
# are put back (`fll.summaries.Summaries`), so no read computes one. A set whose
# endpoints cannot stand apart (one dataset with two sets of properties, a
# namespace ``#``), or whose rebuilt operations would not be byte for byte its
# canonical ones, keeps a full row.
SHAPED = "y"
_ENDPOINT_FIELDS = ("destination", "source")


def split_shape(info: FieldLineageInfo) -> tuple[bytes, list[dict]] | None:
    """(the shape's canonical bytes, the endpoints in placeholder order) of a
    set, or None when it cannot be stored as a shape. Built from the set's
    canonical document, never by unpacking its canonical bytes; checked
    against them byte for byte as a reader will rebuild them (from the
    endpoints as stored)."""
    doc = canonical_doc(info.operations)
    eps: list[dict] = []
    index: dict[bytes, int] = {}
    named: dict[tuple[str, str], bytes] = {}
    shape_ops, where = [], []
    for n, op in enumerate(doc["operations"]):
        for field in _ENDPOINT_FIELDS:
            ep = op.get(field)
            if ep is None:
                continue
            if ep["namespace"] == PLACEHOLDER_NS:
                return None
            packed = msgpack.packb(ep, use_bin_type=True)
            if named.setdefault((ep["namespace"], ep["name"]), packed) != packed:
                return None  # one dataset, two sets of properties: a summary tells them apart
            i = index.get(packed)
            if i is None:
                i = index[packed] = len(eps)
                eps.append(ep)
            op = dict(op)
            op[field] = {"name": str(i), "namespace": PLACEHOLDER_NS, "properties": {}}
            where.append((n, field, i))
        shape_ops.append(op)
    shape = msgpack.packb({**doc, "operations": shape_ops}, use_bin_type=True)
    stored = shape_ref({SHAPED: bytes(16) + _pack_endpoints(eps)})[1]
    for n, field, i in where:
        doc["operations"][n][field] = stored[i]
    if msgpack.packb(doc, use_bin_type=True) != info.canonical_bytes():
        return None
    return shape, eps


def set_rows(info: FieldLineageInfo, shapes: dict[str, bytes]
             ) -> dict[bytes, dict[str, bytes]]:
    """The ``d|`` row of a set, and the ``p|`` row of its shape (format 5).
    ``shapes``: the ``p|`` rows' values made lately, by shape checksum (a
    writer's cache, filled here and cleared when it holds 1,024)."""
    key = rk.data(info.checksum)
    split = split_shape(info)
    if split is None:
        return {key: data_row(info)}
    shape, eps = split
    shape_checksum = xxhash.xxh3_128_hexdigest(shape)
    z = shapes.get(shape_checksum)
    if z is None:
        # the shape's summaries are the set's with each endpoint named by its
        # placeholder (summaries know fields by position, never by name), so
        # the shape is not decoded and summarized again; split_shape made
        # sure the shape and its endpoints give back the set byte for byte
        placeholders = {(e["namespace"], e["name"]): (PLACEHOLDER_NS, str(i))
                        for i, e in enumerate(eps)}
        if len(shapes) > 1024:
            shapes.clear()
        z = shapes[shape_checksum] = _deflated(shape, summaries_to_bytes(info, placeholders))
    value = rk.checksum_bytes(shape_checksum) + _pack_endpoints(eps)
    return {key: {SHAPED: value}, rk.shape(shape_checksum): {"z": z}}


def set_endpoints(info: FieldLineageInfo) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(destinations, sources) of a set as sorted (namespace, name) pairs: the
    endpoints its runs are indexed under."""
    return ([(e.namespace, e.name) for e in sorted(info.destinations)],
            [(e.namespace, e.name) for e in sorted(info.sources)])


def join_shape(shape: bytes, eps: Sequence[dict]) -> bytes:
    """A set's canonical operations from its shape and its endpoints."""
    doc = msgpack.unpackb(shape, raw=False)
    for op in doc["operations"]:
        for field in _ENDPOINT_FIELDS:
            ep = op.get(field)
            if ep is not None and ep.get("namespace") == PLACEHOLDER_NS:
                op[field] = eps[int(ep["name"])]
    return msgpack.packb(doc, use_bin_type=True)


def _pack_endpoints(eps: list[dict]) -> bytes:
    # [namespace, name, properties] each: the map keys the canonical form spells out, left out
    return msgpack.packb([[e["namespace"], e["name"], e["properties"]] for e in eps],
                         use_bin_type=True)


def shape_ref(row: dict[str, bytes]) -> tuple[str, list[dict]]:
    """(shape checksum, endpoints) of a ``d|`` row in shape form; ValueError if corrupt."""
    value = row[SHAPED]
    if len(value) < 17:
        raise ValueError("a shaped data row too short to name its shape")
    try:
        packed = msgpack.unpackb(value[16:], raw=False)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise ValueError(f"a shaped data row's endpoints do not decode ({e})") from None
    if not isinstance(packed, list) or not all(
            isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)
            and isinstance(e[1], str) and isinstance(e[2], dict) for e in packed):
        raise ValueError("a shaped data row's endpoints are not a list of endpoints")
    # in the canonical form's key order (name, namespace, properties)
    return rk.checksum_of(value[:16]), [{"name": n, "namespace": ns, "properties": p}
                                        for ns, n, p in packed]


#: bytes of decoded operations per byte of their canonical form (tracemalloc)
_INFO_BYTES = 12


class _Cached:
    """A decoded ``d|`` row: its summaries, and its operations decoded on first
    use (a set stored as a shape: rebuilt from the shape and its endpoints)."""

    __slots__ = ("_ops", "_eps", "summaries", "_info", "_where")

    def __init__(self, ops: bytes, summaries: Summaries, where: tuple[str, bytes],
                 eps: list[dict] | None = None):
        self._ops = ops
        self._eps = eps
        self.summaries = summaries
        self._info: FieldLineageInfo | None = None
        self._where = where

    def footprint(self) -> int:
        """Bytes held (estimated): the stored operations, the decoded summaries
        with the answers they keep, and the operations once decoded."""
        return 200 + len(self._ops) + self.summaries.footprint + \
            (_INFO_BYTES * len(self._ops) if self._info is not None else 0)

    @property
    def info(self) -> FieldLineageInfo:
        if self._info is None:
            try:
                ops = self._ops if self._eps is None else join_shape(self._ops, self._eps)
                self._info = decode_canonical(ops)
            except (FllError, ValueError, KeyError, IndexError, TypeError):
                raise _corrupt(*self._where) from None
            if self._eps is not None and self._info.checksum != rk.decode(self._where[1]).checksum:
                self._info = None
                raise _corrupt(*self._where)
        return self._info
