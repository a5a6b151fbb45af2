"""Encodings of operations: canonical msgpack, checksum, JSON dicts.

The canonical form (version `CANONICAL_VERSION`) is what the checksum hashes
and what a `d|` row stores. It must never change silently: a different
encoding of the same operations would give a different checksum and split
one operation set into two. Changing it needs a new version number and a
migration. Decoding never trusts its input: every malformed value raises
`InvalidLineageError` naming where it is.

This module knows operations only; an operation set (`fll.opset`) and its
stored summaries (`fll.summaries`) build on it.
"""
from __future__ import annotations

from typing import Any, Iterable

import msgpack
import xxhash

from .errors import InvalidLineageError
from .model import (EndPoint, InputField, Operation, ReadOperation, Transformation,
                    TransformOperation, WriteOperation)

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


def decode_operations(raw: bytes) -> list[Operation]:
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
    return operations_from_list(doc.get("operations"))
