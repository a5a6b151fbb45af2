"""One run's operation set (`FieldLineageInfo`): validated operations and
everything computed from them (checksum, summaries, JSON form).

It builds on the model (`fll.model`), the operation graph (`fll.graph`) and
the operation encodings (`fll.codec`); the stored summaries
(`fll.summaries`) build on it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import xxhash

from .codec import canonical_bytes, decode_operations, operation_to_dict, operations_from_list
from .errors import InvalidLineageError
from .graph import LineageGroups, OperationGraph
from .model import EndPoint, EndPointField, Operation, ReadOperation, WriteOperation

__all__ = ["DeferredSet", "FieldLineageInfo", "decode_canonical"]


class FieldLineageInfo:
    """One run's validated operation set and everything computed from it.

    Construction validates (semantics §1) and raises `InvalidLineageError`
    naming the operation and field. Summaries are computed lazily, once, in
    time linear in the size of the operation graph.
    """

    @property
    def built(self) -> bool:
        """Whether the operations are at hand (a `DeferredSet` builds them on first use)."""
        return True

    def __init__(self, operations: Iterable[Operation]):
        ops = list(operations)
        self._graph = OperationGraph(ops)  # validates
        self._checksum: str | None = None
        self._canonical: bytes | None = None
        self._groups: LineageGroups | None = None
        self._incoming: dict[EndPointField, frozenset[EndPointField]] | None = None
        self._outgoing: dict[EndPointField, frozenset[EndPointField]] | None = None

    # -- identity --------------------------------------------------------
    @property
    def checksum(self) -> str:
        if self._checksum is None:
            self._checksum = xxhash.xxh3_128_hexdigest(self.canonical_bytes())
        return self._checksum

    def canonical_bytes(self) -> bytes:
        """The canonical encoding the checksum hashes (`fll.codec.canonical_bytes`), once."""
        if self._canonical is None:
            self._canonical = canonical_bytes(self._graph.operations)
        return self._canonical

    def groups(self) -> LineageGroups:
        """The set's summaries as shared groups (`fll.graph.LineageGroups`), once."""
        if self._groups is None:
            self._groups = LineageGroups(self._graph)
        return self._groups

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldLineageInfo) and self.checksum == other.checksum

    def __hash__(self) -> int:
        return hash(self.checksum)

    def __repr__(self) -> str:
        return f"FieldLineageInfo({len(self.operations)} operations, checksum={self.checksum})"

    # -- structure -------------------------------------------------------
    @property
    def operations(self) -> tuple[Operation, ...]:
        """The operations in topological order (ties broken by name)."""
        return self._graph.operations

    @property
    def sources(self) -> frozenset[EndPoint]:
        return frozenset(op.source for op in self.operations if isinstance(op, ReadOperation))

    @property
    def destinations(self) -> frozenset[EndPoint]:
        return frozenset(op.destination for op in self.operations
                         if isinstance(op, WriteOperation))

    def endpoint(self, namespace: str, name: str) -> EndPoint | None:
        """The endpoint (with its properties) this set uses for ``namespace:name``."""
        key = EndPoint(namespace, name)
        for ep in self.sources | self.destinations:
            if ep == key:
                return ep
        return None

    def destination_fields(self) -> dict[EndPoint, frozenset[str]]:
        """Per destination endpoint, the fields written to it."""
        out: dict[EndPoint, set[str]] = {}
        for op in self.operations:
            if isinstance(op, WriteOperation):
                out.setdefault(op.destination, set()).update(i.name for i in op.inputs)
        return {k: frozenset(v) for k, v in out.items()}

    def source_fields(self) -> dict[EndPoint, frozenset[str]]:
        """Per source endpoint, the fields read from it."""
        out: dict[EndPoint, set[str]] = {}
        for op in self.operations:
            if isinstance(op, ReadOperation):
                out.setdefault(op.source, set()).update(op.outputs)
        return {k: frozenset(v) for k, v in out.items()}

    # -- summaries -------------------------------------------------------
    def incoming_summary(self) -> dict[EndPointField, frozenset[EndPointField]]:
        """Destination field → the source fields it derives from."""
        if self._incoming is None:
            self._incoming = self._graph.incoming_summary()
        return dict(self._incoming)

    def outgoing_summary(self) -> dict[EndPointField, frozenset[EndPointField]]:
        """Source field → destination fields, or {DROPPED} when every path ends in a drop."""
        if self._outgoing is None:
            self._outgoing = self._graph.outgoing_summary()
        return dict(self._outgoing)

    def incoming_operations(self, endpoint_field: EndPointField) -> list[Operation]:
        """Operations on some path from a source to this destination field, in topological order."""
        return self._graph.incoming_operations(endpoint_field)

    def outgoing_operations(self, endpoint_field: EndPointField) -> list[Operation]:
        """The READ of this source field and every operation reachable from its consumption."""
        return self._graph.outgoing_operations(endpoint_field)

    # -- encoding --------------------------------------------------------
    def to_dict(self) -> dict:
        """The JSON form: the checksum and the operations in topological order."""
        return {"checksum": self.checksum,
                "operations": [operation_to_dict(o) for o in self.operations]}

    @classmethod
    def from_dict(cls, data: Any) -> "FieldLineageInfo":
        """Parse the `to_dict` form (or a bare list of operations) and validate it."""
        items = data.get("operations") if isinstance(data, dict) else data
        if isinstance(data, dict) and "operations" not in data:
            raise InvalidLineageError("missing 'operations'")
        return cls(operations_from_list(items))

    @classmethod
    def from_canonical(cls, raw: bytes) -> "FieldLineageInfo":
        """Inverse of `canonical_bytes`; a corrupt or unknown-version row is an error."""
        return cls(decode_operations(raw))


class DeferredSet(FieldLineageInfo):
    """An operation set known by its checksum, its operations built by ``build``
    on first use (anything but the checksum, and the destinations when given).

    Ingest hands one on when it has seen the JSON an event's set is built from
    (`fll.openlineage.ingest`): a run of a set the store holds is recorded by
    its checksum alone, and nothing is built. ``build`` must give the set of
    that checksum: what it gives is checked once, and anything else is an
    error, never another set under this checksum."""

    def __init__(self, checksum: str, build: "Callable[[], FieldLineageInfo]",
                 destinations: frozenset[EndPoint] | None = None):
        # no _graph: the first use of it builds the set (`__getattr__`)
        self._checksum = checksum
        self._build = build
        self._known_destinations = destinations
        self._canonical = None
        self._groups = None
        self._incoming = None
        self._outgoing = None

    @property
    def built(self) -> bool:
        return "_graph" in self.__dict__

    def __getattr__(self, name: str) -> Any:
        if name != "_graph":
            raise AttributeError(name)
        info = self._build()
        if info.checksum != self._checksum:
            raise RuntimeError(f"an operation set remembered as {self._checksum} was built "
                               f"again as {info.checksum}")
        self._build = _BUILT_ALREADY  # what it read (an event's JSON) is let go
        self._graph = info._graph
        if self._canonical is None:
            self._canonical = info._canonical
        return self._graph

    @property
    def destinations(self) -> frozenset[EndPoint]:
        if self._known_destinations is not None and not self.built:
            return self._known_destinations
        return super().destinations


def _built_already() -> FieldLineageInfo:
    raise AssertionError("a DeferredSet is built once")


_BUILT_ALREADY = _built_already


def decode_canonical(raw: bytes) -> FieldLineageInfo:
    """`FieldLineageInfo.from_canonical`: the set a `d|` row holds."""
    return FieldLineageInfo.from_canonical(raw)
