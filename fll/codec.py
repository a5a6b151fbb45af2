"""Encodings of an operation set: canonical msgpack, checksum, JSON dicts.

The canonical form (version `CANONICAL_VERSION`) is what the checksum hashes
and what a `d|` row stores. It must never change silently: a different
encoding of the same operations would give a different checksum and split
one operation set into two. Changing it needs a new version number and a
migration. Decoding never trusts its input: every malformed value raises
`InvalidLineageError` naming where it is.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Sequence

import msgpack
import xxhash

from .errors import InvalidLineageError
from .graph import TagStates
from .model import (DROPPED, EndPoint, EndPointField, FieldLineageInfo, InputField, Operation,
                    ReadOperation, Transformation, TransformOperation, WriteOperation)

CANONICAL_VERSION = 1

_KIND = {ReadOperation: "READ", TransformOperation: "TRANSFORM", WriteOperation: "WRITE"}


def _endpoint_dict(ep: EndPoint) -> dict:
    return {"namespace": ep.namespace, "name": ep.name, "properties": dict(ep.properties)}


def _input_dict(op: TransformOperation | WriteOperation, inp: InputField) -> dict:
    d: dict[str, Any] = {"origin": inp.origin, "name": inp.name}
    tags = op.transformations.get(inp) if isinstance(op, TransformOperation) else None
    if tags:
        d["transformations"] = [t.to_dict() for t in tags]
    return d


def operation_to_dict(op: Operation) -> dict:
    """The JSON/msgpack form of one operation (plain dicts and lists only)."""
    d: dict[str, Any] = {"type": _KIND[type(op)], "name": op.name, "description": op.description}
    if isinstance(op, ReadOperation):
        d["source"] = _endpoint_dict(op.source)
        d["outputs"] = list(op.outputs)
    elif isinstance(op, TransformOperation):
        d["inputs"] = [_input_dict(op, i) for i in op.inputs]
        d["outputs"] = list(op.outputs)
    else:
        d["destination"] = _endpoint_dict(op.destination)
        d["inputs"] = [_input_dict(op, i) for i in op.inputs]
    return d


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_sorted_keys(v) for v in value]
    return value


def _canonical_endpoint(ep: EndPoint) -> dict:
    return {"name": ep.name, "namespace": ep.namespace, "properties": dict(ep.properties)}


def _canonical_inputs(op: TransformOperation | WriteOperation) -> list[dict]:
    tags = op.transformations if isinstance(op, TransformOperation) else {}
    out = []
    for i in op.inputs:
        t = tags.get(i)
        if t:
            out.append({"name": i.name, "origin": i.origin, "transformations": [
                {"description": x.description, "masking": x.masking, "subtype": x.subtype,
                 "type": x.type} for x in t]})
        else:
            out.append({"name": i.name, "origin": i.origin})
    return out


def canonical_operation(op: Operation) -> dict:
    """`operation_to_dict` with every map's keys already in sorted order.

    Built directly (not by re-sorting) because this is on the write path of
    every distinct operation set; a test pins it to the sorted form.
    """
    if isinstance(op, ReadOperation):
        return {"description": op.description, "name": op.name, "outputs": list(op.outputs),
                "source": _canonical_endpoint(op.source), "type": "READ"}
    if isinstance(op, TransformOperation):
        return {"description": op.description, "inputs": _canonical_inputs(op), "name": op.name,
                "outputs": list(op.outputs), "type": "TRANSFORM"}
    return {"description": op.description, "destination": _canonical_endpoint(op.destination),
            "inputs": _canonical_inputs(op), "name": op.name, "type": "WRITE"}


def canonical_bytes(operations: Iterable[Operation]) -> bytes:
    """Versioned msgpack of the operations sorted by name, map keys sorted,
    lists in declared order. Independent of the order operations were given."""
    return msgpack.packb(canonical_doc(operations), use_bin_type=True)


def canonical_doc(operations: Iterable[Operation]) -> dict:
    """What `canonical_bytes` packs: plain maps, lists, strings and booleans, so
    unpacking and packing it again gives the same bytes."""
    ops = sorted(operations, key=lambda o: o.name)
    return {"operations": [canonical_operation(o) for o in ops], "v": CANONICAL_VERSION}


def sorted_form(value: Any) -> Any:
    """Any JSON-like value with every map's keys sorted (the canonical rule)."""
    return _sorted_keys(value)


def checksum(operations: Iterable[Operation]) -> str:
    """xxh3-128 of the canonical encoding, as 32 hex digits."""
    return xxhash.xxh3_128_hexdigest(canonical_bytes(operations))


def info_to_dict(info: FieldLineageInfo) -> dict:
    return {"checksum": info.checksum,
            "operations": [operation_to_dict(o) for o in info.operations]}


# -- decoding ---------------------------------------------------------------

def _need(d: Any, key: str, kind: type | tuple, where: str) -> Any:
    if not isinstance(d, dict):
        raise InvalidLineageError(f"{where}: expected an object, got {type(d).__name__}")
    if key not in d:
        raise InvalidLineageError(f"{where}: missing {key!r}")
    v = d[key]
    if not isinstance(v, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InvalidLineageError(f"{where}.{key}: expected {names}, got {type(v).__name__}")
    return v


def _str_list(d: dict, key: str, where: str) -> list[str]:
    values = _need(d, key, list, where)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise InvalidLineageError(f"{where}.{key}[{i}]: expected a string")
    return values


def _endpoint(d: Any, where: str) -> EndPoint:
    ns = _need(d, "namespace", str, where)
    name = _need(d, "name", str, where)
    props = d.get("properties") or {}
    if not isinstance(props, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise InvalidLineageError(f"{where}.properties: expected an object of strings")
    try:
        return EndPoint(ns, name, props)
    except InvalidLineageError as e:
        raise InvalidLineageError(f"{where}: {e}") from None


def _inputs(d: dict, where: str) -> tuple[list[InputField], dict]:
    raw = _need(d, "inputs", list, where)
    inputs: list[InputField] = []
    tags: dict[InputField, tuple[Transformation, ...]] = {}
    for i, item in enumerate(raw):
        w = f"{where}.inputs[{i}]"
        inp = InputField(_need(item, "origin", str, w), _need(item, "name", str, w))
        inputs.append(inp)
        ts = item.get("transformations")
        if ts is not None:
            if not isinstance(ts, list):
                raise InvalidLineageError(f"{w}.transformations: expected a list")
            parsed = []
            for j, t in enumerate(ts):
                tw = f"{w}.transformations[{j}]"
                masking = t.get("masking", False) if isinstance(t, dict) else False
                if not isinstance(masking, bool):
                    raise InvalidLineageError(f"{tw}.masking: expected a boolean")
                try:
                    parsed.append(Transformation(
                        _need(t, "type", str, tw), _opt_str(t, "subtype", tw),
                        _opt_str(t, "description", tw), masking))
                except InvalidLineageError as e:
                    raise InvalidLineageError(f"{tw}: {e}") from None
            if parsed:
                tags[inp] = tags.get(inp, ()) + tuple(parsed)
    return inputs, tags


def _opt_str(d: dict, key: str, where: str) -> str:
    v = d.get(key) or ""
    if not isinstance(v, str):
        raise InvalidLineageError(f"{where}.{key}: expected a string")
    return v


def operation_from_dict(d: Any, where: str = "operation") -> Operation:
    kind = _need(d, "type", str, where).upper()
    name = _need(d, "name", str, where)
    desc = d.get("description") or ""
    if not isinstance(desc, str):
        raise InvalidLineageError(f"{where}.description: expected a string")
    where = f"{where} {name!r}"
    if kind == "READ":
        return ReadOperation(name, desc, _endpoint(_need(d, "source", dict, where),
                                                   f"{where}.source"),
                             tuple(_str_list(d, "outputs", where)))
    if kind == "TRANSFORM":
        inputs, tags = _inputs(d, where)
        return TransformOperation(name, desc, tuple(inputs), tuple(_str_list(d, "outputs", where)),
                                  tags)
    if kind == "WRITE":
        inputs, _ = _inputs(d, where)
        return WriteOperation(name, desc, _endpoint(_need(d, "destination", dict, where),
                                                    f"{where}.destination"), tuple(inputs))
    raise InvalidLineageError(f"{where}.type: expected READ, TRANSFORM or WRITE, got {kind!r}")


def operations_from_list(items: Any, where: str = "operations") -> list[Operation]:
    if not isinstance(items, list):
        raise InvalidLineageError(f"{where}: expected a list of operations")
    return [operation_from_dict(item, f"{where}[{i}]") for i, item in enumerate(items)]


def info_from_dict(data: Any) -> FieldLineageInfo:
    """Parse the `to_dict` form (or a bare list of operations) and validate it."""
    items = data.get("operations") if isinstance(data, dict) else data
    if isinstance(data, dict) and "operations" not in data:
        raise InvalidLineageError("missing 'operations'")
    return FieldLineageInfo(operations_from_list(items))


def decode_canonical(raw: bytes) -> FieldLineageInfo:
    """Inverse of `canonical_bytes`; a corrupt or unknown-version row is an error."""
    try:
        doc = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise InvalidLineageError(f"corrupt operation row: {e}") from None
    if not isinstance(doc, dict) or doc.get("v") != CANONICAL_VERSION:
        version = doc.get("v") if isinstance(doc, dict) else None
        raise InvalidLineageError(
            f"operation row has encoding version {version!r}; this fll reads version "
            f"{CANONICAL_VERSION}")
    return FieldLineageInfo(operations_from_list(doc.get("operations")))


# -- summaries stored beside the operations ----------------------------------
#
# Version 2 of the summaries: the set's `fll.graph.LineageGroups` (shared
# groups with their tag states), so a stored set costs what its operations
# hold and a reader never rebuilds operations to answer with tags. A msgpack
# map: ``endpoints`` [[ns, name]], ``fields`` [[endpoint, name]], ``tags``
# [[type, subtype, description, masking]], ``states`` [[untagged, tag…]],
# ``nodes`` [[leaves: field, state, …], [refs: group, step, …]], ``roots``
# [field, group, …] (group -1: no source), ``read`` and ``dropped`` [field…].
SUMMARY_VERSION = 2


def summaries_to_bytes(info: FieldLineageInfo,
                       rename: Mapping[tuple[str, str], tuple[str, str]] | None = None) -> bytes:
    """Precomputed answers of one operation set, so queries never recompute them:
    its `fll.graph.LineageGroups`, linear in the set's operations. ``rename``:
    (namespace, name) of endpoints to write instead (a shape's placeholders)."""
    g = info.groups()
    eps: dict[tuple[str, str], int] = {}
    fields = []
    for ef in g.fields:
        key = (ef.endpoint.namespace, ef.endpoint.name)
        if rename is not None:
            key = rename.get(key, key)
        fields.append([eps.setdefault(key, len(eps)), ef.field])
    st = g.states
    doc = {"v": SUMMARY_VERSION, "endpoints": [list(k) for k in eps], "fields": fields,
           "tags": [[t.type, t.subtype, t.description, t.masking] for t in st.tags],
           "states": [[untagged, *sorted(tags)] for tags, untagged in st.states],
           "nodes": [list(n) for n in g.nodes],
           "roots": [x for d, r in sorted(g.roots.items()) for x in (d, r)],
           "read": g.read, "dropped": g.dropped}
    return msgpack.packb(doc, use_bin_type=True)


#: the namespace of a shape's placeholder endpoints (a set using it is never stored as a shape)
PLACEHOLDER_NS = "#"

_Tagged = dict[EndPointField, list[Transformation]]


#: the byte estimates of `Summaries.footprint` (CPython 3.11, 64-bit)
_FIELD_BYTES, _NODE_BYTES, _ANSWER_BYTES, _MEMBER_BYTES, _TAGGED_BYTES = 440, 120, 240, 48, 140


class Summaries:
    """Decoded summaries of one operation set (see `summaries_to_bytes`).

    Decoding reads the tables only; a question expands the groups it reaches,
    so it costs its answer: one field of an all-to-all set of n columns is n
    members of one group, never the n x n product. An expansion is kept per
    group, so the fields sharing a group share the answer too (treat every
    answer as read-only)."""

    def __init__(self, raw: bytes, endpoints: Sequence[EndPoint] | None = None):
        """``endpoints``: those of a set stored as a shape (`fll.store.lineage`),
        standing for the shape's placeholders ``#:0``, ``#:1``… in order."""
        try:
            doc = msgpack.unpackb(raw, raw=False, strict_map_key=True)
            if doc.get("v") != SUMMARY_VERSION:
                raise ValueError(f"summary encoding {doc.get('v')!r}; this fll reads "
                                 f"{SUMMARY_VERSION} (run `fll admin upgrade`)")
            if endpoints is None:
                eps = [EndPoint(ns, n) for ns, n in doc["endpoints"]]
            else:
                eps = [endpoints[int(n)] if ns == PLACEHOLDER_NS else EndPoint(ns, n)
                       for ns, n in doc["endpoints"]]
            self.fields = [EndPointField(eps[e], n) for e, n in doc["fields"]]
            self._index = {f: i for i, f in enumerate(self.fields)}
            self._st = TagStates([Transformation(t, s, d, m) for t, s, d, m in doc["tags"]],
                                 [(frozenset(x[1:]), bool(x[0])) for x in doc["states"]])
            self._nodes = [(n[0], n[1]) for n in doc["nodes"]]
            roots = doc["roots"]
            self._roots = {roots[i]: roots[i + 1] for i in range(0, len(roots), 2)}
            for r in self._roots.values():
                if r >= len(self._nodes):
                    raise ValueError(f"group {r} out of range")
            self.source_fields = frozenset(self.fields[i] for i in doc["read"])
            self.destination_fields = frozenset(self.fields[i] for i in self._roots)
            self._dropped = frozenset(doc["dropped"])
        except Exception as e:
            raise InvalidLineageError(f"corrupt summary row: {e}") from None
        # an estimate of the bytes this object holds, grown with each answer
        # it keeps (measured with tracemalloc: ~300-440 B per field decoded,
        # ~40 B per member of a kept answer, ~130 B per tagged member)
        self.footprint = len(raw) + _FIELD_BYTES * len(self.fields) + \
            _NODE_BYTES * len(self._nodes)
        self._down: dict[int, frozenset[EndPointField]] = {}
        self._down_tags: dict[int, _Tagged] = {}
        self._up: tuple | None = None
        self._up_memo: dict[tuple, frozenset[EndPointField]] = {}
        self.incoming = _Direction(self, True)
        self.outgoing = _Direction(self, False)

    def _listed(self, state: int) -> list[Transformation]:
        return self._st.listed(state)

    # -- incoming: down from a destination's group ------------------------------
    def _sources(self, root: int) -> frozenset[EndPointField]:
        found = self._down.get(root)
        if found is None:
            seen = {root}
            stack = [root]
            out: set[int] = set()
            while stack:
                leaves, refs = self._nodes[stack.pop()]
                out.update(leaves[0::2])
                for t in refs[0::2]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            found = self._down[root] = frozenset(self.fields[i] for i in out)
            self.footprint += _ANSWER_BYTES + _MEMBER_BYTES * len(found)
        return found

    def _sources_tagged(self, root: int) -> _Tagged:
        found = self._down_tags.get(root)
        if found is None:
            acc: dict[int, int] = {}
            seen = {(root, 1)}
            stack = [(root, 1)]
            while stack:
                n, after = stack.pop()
                leaves, refs = self._nodes[n]
                for i in range(0, len(leaves), 2):
                    f = leaves[i]
                    acc[f] = self._st.union(acc.get(f, -1),
                                               self._st.compose(leaves[i + 1], after))
                for i in range(0, len(refs), 2):
                    nxt = (refs[i], self._st.compose(refs[i + 1], after))
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            found = self._down_tags[root] = {self.fields[f]: self._listed(s)
                                             for f, s in acc.items()}
            self.footprint += _ANSWER_BYTES + _TAGGED_BYTES * len(found)
        return found

    def incoming_tags(self, dest: EndPointField) -> _Tagged:
        """Per source field of ``dest``, its distinct tags composed along every
        path (``[]``: no step on any path was tagged); empty when this set does
        not write ``dest``."""
        d = self._index.get(dest)
        root = self._roots.get(d, -1) if d is not None else -1
        return self._sources_tagged(root) if root >= 0 else {}

    # -- outgoing: up from a source field's groups ------------------------------
    def _reverse(self) -> tuple:
        if self._up is None:
            parents: dict[int, list[tuple[int, int]]] = {}
            at: dict[int, list[tuple[int, int]]] = {}
            users: dict[int, list[int]] = {}
            for n, (leaves, refs) in enumerate(self._nodes):
                for i in range(0, len(leaves), 2):
                    at.setdefault(leaves[i], []).append((n, leaves[i + 1]))
                for i in range(0, len(refs), 2):
                    parents.setdefault(refs[i], []).append((n, refs[i + 1]))
            for d, r in self._roots.items():
                if r >= 0:
                    users.setdefault(r, []).append(d)
            self._up = (parents, at, users)
            self.footprint += _ANSWER_BYTES * 3 + _MEMBER_BYTES * 2 * (
                sum(map(len, parents.values())) + sum(map(len, at.values()))
                + sum(map(len, users.values())))
        return self._up

    def _walk_up(self, source: int, tagged: bool) -> dict[int, int]:
        parents, at, users = self._reverse()
        acc: dict[int, int] = {}
        stack = [(n, s if tagged else 0) for n, s in at.get(source, ())]
        seen = set(stack)
        while stack:
            n, state = stack.pop()
            for d in users.get(n, ()):
                acc[d] = self._st.union(acc.get(d, -1), state)
            for p, step in parents.get(n, ()):
                nxt = (p, self._st.compose(state, step) if tagged else 0)
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return acc

    def _destinations(self, source: EndPointField) -> frozenset[EndPointField] | None:
        i = self._index.get(source)
        if i is None:
            return None
        if i in self._dropped:
            return frozenset((DROPPED,))
        at = self._reverse()[1].get(i)
        if not at:
            return None
        key = tuple(sorted({n for n, _ in at}))
        found = self._up_memo.get(key)
        if found is None:
            found = self._up_memo[key] = frozenset(self.fields[d]
                                                   for d in self._walk_up(i, False))
            self.footprint += _ANSWER_BYTES + _MEMBER_BYTES * len(found)
        return found

    def outgoing_tags(self, source: EndPointField) -> _Tagged:
        """Per destination field built from ``source``, its tags (as `incoming_tags`)."""
        i = self._index.get(source)
        if i is None:
            return {}
        return {self.fields[d]: self._listed(s) for d, s in self._walk_up(i, True).items()}

    def _has(self, key: EndPointField, incoming: bool) -> bool:
        i = self._index.get(key)
        if i is None:
            return False
        if incoming:
            return i in self._roots
        return i in self._dropped or bool(self._reverse()[1].get(i))

    def _keys(self, incoming: bool) -> list[EndPointField]:
        if incoming:
            return [self.fields[d] for d in self._roots]
        at = self._reverse()[1]
        return [self.fields[i] for i in sorted(set(at) | self._dropped)]


class _Direction(Mapping):
    """One summary as a read-only mapping, each value expanded when asked:
    incoming = destination field → its source fields; outgoing = source field
    → the destination fields built from it, or {DROPPED}."""

    __slots__ = ("_s", "_incoming")

    def __init__(self, s: Summaries, incoming: bool):
        self._s = s
        self._incoming = incoming

    def __getitem__(self, key: EndPointField) -> frozenset[EndPointField]:
        s = self._s
        if self._incoming:
            i = s._index.get(key)
            if i is None or i not in s._roots:
                raise KeyError(key)
            root = s._roots[i]
            return s._sources(root) if root >= 0 else frozenset()
        found = s._destinations(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, EndPointField) and self._s._has(key, self._incoming)

    def __iter__(self) -> Iterator[EndPointField]:
        return iter(self._s._keys(self._incoming))

    def __len__(self) -> int:
        return len(self._s._keys(self._incoming))


def summaries_of(info: FieldLineageInfo) -> Summaries:
    return Summaries(summaries_to_bytes(info))


def endpoint_fields_by(items: Iterable[EndPointField]) -> Mapping[EndPoint, set[str]]:
    out: dict[EndPoint, set[str]] = {}
    for ef in items:
        out.setdefault(ef.endpoint, set()).add(ef.field)
    return out
