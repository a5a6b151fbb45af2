"""The summaries stored beside an operation set: its shared lineage groups
encoded (`summaries_to_bytes`) and decoded for questions (`Summaries`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Iterable, Iterator, Sequence

import msgpack

from .errors import InvalidLineageError
from .graph import TagStates
from .model import DROPPED, EndPoint, EndPointField, Transformation
from .opset import FieldLineageInfo

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
