"""The operation graph of one run: validation, topological order, summaries.

Every walk here is memoised per operation (or per read field), so each query
is linear in the size of the graph. CDAP's first implementation enumerated
paths and went exponential on all-to-all layers; this module must never
enumerate paths.
"""
from __future__ import annotations

import heapq
import threading
from collections import defaultdict
from itertools import chain
from typing import Iterable

from .errors import InvalidLineageError
from .model import (DROPPED, EndPoint, EndPointField, InputField, Operation, ReadOperation,
                    Transformation, TransformOperation, WriteOperation)


class _Interner:
    """Returns one shared object per distinct set.

    In all-to-all layers every operation of a layer reaches the same set;
    sharing the object lets the next layer union it once (deduplicated by
    identity) instead of once per input, which keeps such graphs linear.
    """

    def __init__(self) -> None:
        self._seen: dict[frozenset, frozenset] = {}

    def __call__(self, value: frozenset) -> frozenset:
        return self._seen.setdefault(value, value)


_KNOWN_SHOWN = 20  # operation names listed in an unknown-origin message
_PROBLEMS_SHOWN = 50  # problems listed in one error; the rest are counted


class _Problems:
    """Every rule an operation set breaks, so one error names them all (as CDAP's
    validator does) instead of stopping at the first: one line per problem,
    after a summary line when there is more than one."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str | None, str | None]] = []

    def add(self, message: str, operation: str | None = None, field: str | None = None) -> None:
        self.found.append((message, operation, field))

    def raise_if_any(self) -> None:
        if not self.found:
            return
        message, operation, field = self.found[0]
        if len(self.found) > 1:
            lines = [f"the operation set has {len(self.found)} problems:"]
            lines += [f"- {m}" for m, _, _ in self.found[:_PROBLEMS_SHOWN]]
            if len(self.found) > _PROBLEMS_SHOWN:
                lines.append(f"- … and {len(self.found) - _PROBLEMS_SHOWN} more")
            message = "\n".join(lines)
        raise InvalidLineageError(message, operation=operation, field=field)


class OperationGraph:
    """Validated operations plus the indexes every summary walks."""

    def __init__(self, operations: Iterable[Operation]):
        ops = list(operations)
        problems = _Problems()
        self._known_text: str | None = None
        self.by_name: dict[str, Operation] = {}
        valid: list[Operation] = []
        for op in ops:
            if not isinstance(op, (ReadOperation, TransformOperation, WriteOperation)):
                problems.add(f"not an operation: {op!r} (expected ReadOperation, "
                             f"TransformOperation or WriteOperation)")
                continue
            if not op.name:
                problems.add("an operation has an empty name")
            elif op.name in self.by_name:
                problems.add(f"operation name {op.name!r} is used more than once",
                             operation=op.name)
                continue
            self.by_name[op.name] = op
            valid.append(op)
        ops = valid
        if not any(isinstance(op, ReadOperation) for op in ops):
            problems.add("the operation set has no READ operation")
        if not any(isinstance(op, WriteOperation) for op in ops):
            problems.add("the operation set has no WRITE operation")
        outputs: dict[str, frozenset[str]] = {}
        for op in ops:
            if isinstance(op, ReadOperation) and not isinstance(op.source, EndPoint):
                problems.add(f"READ operation {op.name!r} has no source endpoint",
                             operation=op.name)
            if isinstance(op, WriteOperation) and not isinstance(op.destination, EndPoint):
                problems.add(f"WRITE operation {op.name!r} has no destination endpoint",
                             operation=op.name)
            outputs[op.name] = frozenset(op.outputs)
        # consumers[(origin, field)] -> operations consuming that exact field
        self.consumers: dict[tuple[str, str], list[Operation]] = defaultdict(list)
        for op in ops:
            for inp in op.inputs:
                origin = self.by_name.get(inp.origin)
                if origin is None:
                    problems.add(
                        f"operation {op.name!r}: input field {inp.name!r} names origin "
                        f"{inp.origin!r}, which is not an operation of this set "
                        f"(known operations: {self._known()})", operation=op.name,
                        field=inp.name)
                elif inp.origin == op.name:
                    problems.add(
                        f"operation {op.name!r} takes its own output {inp.name!r} as input "
                        f"(a cycle)", operation=op.name, field=inp.name)
                elif inp.name not in outputs[inp.origin]:
                    problems.add(
                        f"operation {op.name!r}: input field {inp.name!r} is not an output of "
                        f"operation {inp.origin!r} (its outputs: "
                        f"{', '.join(sorted(outputs[inp.origin])) or 'none'})",
                        operation=op.name, field=inp.name)
                else:
                    self.consumers[(inp.origin, inp.name)].append(op)
        # the topological sort needs a well-formed set: a cycle is looked for only then
        problems.raise_if_any()
        self.operations: tuple[Operation, ...] = self._toposort(ops)
        self.position = {op.name: i for i, op in enumerate(self.operations)}

    def _known(self) -> str:
        """The operation names an unknown-origin message lists (built once, bounded)."""
        if self._known_text is None:
            names = sorted(self.by_name)
            shown = ", ".join(names[:_KNOWN_SHOWN]) or "none"
            more = len(names) - _KNOWN_SHOWN
            self._known_text = shown + (f", … {more} more" if more > 0 else "")
        return self._known_text

    def _toposort(self, ops: list[Operation]) -> tuple[Operation, ...]:
        # Kahn's algorithm; ties broken by name so the order never depends on
        # the order the producer happened to list operations in.
        indegree = {op.name: len({i.origin for i in op.inputs}) for op in ops}
        children: dict[str, set[str]] = defaultdict(set)
        for op in ops:
            for i in op.inputs:
                children[i.origin].add(op.name)
        heap = [name for name, d in indegree.items() if d == 0]
        heapq.heapify(heap)
        order: list[Operation] = []
        while heap:
            name = heapq.heappop(heap)
            order.append(self.by_name[name])
            for child in children[name]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    heapq.heappush(heap, child)
        if len(order) != len(ops):
            stuck = sorted(n for n, d in indegree.items() if d > 0)
            first = self.by_name[stuck[0]]
            field = next((i.name for i in first.inputs if i.origin in stuck), None)
            raise InvalidLineageError(
                f"the operations form a cycle through {', '.join(repr(s) for s in stuck)} "
                f"(operation {first.name!r}, field {field!r})",
                operation=first.name, field=field)
        return tuple(order)

    # -- backward ----------------------------------------------------------
    def incoming_summary(self) -> dict[EndPointField, frozenset[EndPointField]]:
        memo: dict[str, frozenset[EndPointField]] = {}
        interned = _Interner()

        def sources_of(inp: InputField) -> frozenset[EndPointField]:
            origin = self.by_name[inp.origin]
            if isinstance(origin, ReadOperation):
                return frozenset((EndPointField(origin.source, inp.name),))
            return transform_sources(origin)

        def transform_sources(op: Operation) -> frozenset[EndPointField]:
            # iterative post-order so a 10,000-deep chain cannot hit the recursion limit
            stack = [op]
            while stack:
                top = stack[-1]
                if top.name in memo:
                    stack.pop()
                    continue
                pending = [self.by_name[i.origin] for i in top.inputs
                           if isinstance(self.by_name[i.origin], TransformOperation)
                           and i.origin not in memo]
                if pending:
                    stack.extend(pending)
                    continue
                acc: set[EndPointField] = set()
                parts: dict[int, frozenset[EndPointField]] = {}
                for i in top.inputs:
                    origin = self.by_name[i.origin]
                    if isinstance(origin, ReadOperation):
                        acc.add(EndPointField(origin.source, i.name))
                    else:
                        part = memo[i.origin]
                        parts[id(part)] = part
                for part in parts.values():
                    acc |= part
                memo[top.name] = interned(frozenset(acc))
                stack.pop()
            return memo[op.name]

        out: dict[EndPointField, set[EndPointField]] = defaultdict(set)
        for op in self.operations:
            if isinstance(op, WriteOperation):
                for inp in op.inputs:
                    out[EndPointField(op.destination, inp.name)] |= sources_of(inp)
        return {k: frozenset(v) for k, v in out.items()}

    # -- forward -----------------------------------------------------------
    def _transform_reach(self) -> dict[str, frozenset[EndPointField]]:
        """For every transform, the destination fields (or DROPPED) its outputs reach."""
        reach: dict[str, frozenset[EndPointField]] = {}
        interned = _Interner()
        # reverse topological order: consumers are done before producers
        for op in reversed(self.operations):
            if not isinstance(op, TransformOperation):
                continue
            if not op.outputs:
                reach[op.name] = frozenset((DROPPED,))
                continue
            parts: dict[int, frozenset[EndPointField]] = {}
            for out_name in op.outputs:
                for consumer in self.consumers.get((op.name, out_name), ()):
                    part = self._consumer_reach(consumer, out_name, reach)
                    parts[id(part)] = part
            acc: set[EndPointField] = set()
            for part in parts.values():
                acc |= part
            reach[op.name] = interned(frozenset(acc))
        return reach

    @staticmethod
    def _consumer_reach(consumer: Operation, field: str,
                        reach: dict[str, frozenset[EndPointField]]) -> frozenset[EndPointField]:
        if isinstance(consumer, WriteOperation):
            return frozenset((EndPointField(consumer.destination, field),))
        return reach[consumer.name]

    def outgoing_summary(self) -> dict[EndPointField, frozenset[EndPointField]]:
        reach = self._transform_reach()
        out: dict[EndPointField, set[EndPointField]] = defaultdict(set)
        for op in self.operations:
            if not isinstance(op, ReadOperation):
                continue
            for f in op.outputs:
                for consumer in self.consumers.get((op.name, f), ()):
                    out[EndPointField(op.source, f)] |= self._consumer_reach(consumer, f, reach)
        result: dict[EndPointField, frozenset[EndPointField]] = {}
        for k, v in out.items():
            real = v - {DROPPED}
            if real:
                result[k] = frozenset(real)
            elif v:
                result[k] = frozenset((DROPPED,))
            # a field read and never used reaches nothing: in neither summary
        return result

    def dropped_fields(self) -> list[EndPointField]:
        """Source fields whose every path ends in a drop (a transform with no
        outputs): the outgoing summary's DROPPED, found by one linear pass of
        booleans instead of the reach sets `outgoing_summary` builds."""
        to_dest: dict[str, bool] = {}
        to_drop: dict[str, bool] = {}

        def reach(consumer: Operation) -> tuple[bool, bool]:
            if isinstance(consumer, WriteOperation):
                return True, False
            return to_dest[consumer.name], to_drop[consumer.name]

        for op in reversed(self.operations):
            if isinstance(op, TransformOperation):
                dest = drop = not op.outputs
                dest = False
                for out_name in op.outputs:
                    for consumer in self.consumers.get((op.name, out_name), ()):
                        d, x = reach(consumer)
                        dest, drop = dest or d, drop or x
                to_dest[op.name], to_drop[op.name] = dest, drop
        # by (namespace, name, field): the fields returned are the only ones built
        found: dict[tuple[str, str, str], list[bool]] = {}
        for op in self.operations:
            if isinstance(op, ReadOperation):
                ns, name = op.source.namespace, op.source.name
                for f in op.outputs:
                    seen = found.setdefault((ns, name, f), [False, False])
                    for consumer in self.consumers.get((op.name, f), ()):
                        d, x = reach(consumer)
                        seen[0], seen[1] = seen[0] or d, seen[1] or x
        return [EndPointField(EndPoint(ns, name), f) for (ns, name, f), (d, x) in found.items()
                if x and not d]

    # -- per-field operation subgraphs --------------------------------------
    def incoming_operations(self, efield: EndPointField) -> list[Operation]:
        seen: set[str] = set()
        stack: list[str] = []
        for op in self.operations:
            if isinstance(op, WriteOperation) and op.destination == efield.endpoint:
                hits = [i for i in op.inputs if i.name == efield.field]
                if hits:
                    seen.add(op.name)
                    stack.extend(i.origin for i in hits)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(i.origin for i in self.by_name[name].inputs)
        return [op for op in self.operations if op.name in seen]

    def outgoing_operations(self, efield: EndPointField) -> list[Operation]:
        seen: set[str] = set()
        stack: list[Operation] = []
        for op in self.operations:
            if (isinstance(op, ReadOperation) and op.source == efield.endpoint
                    and efield.field in op.outputs):
                seen.add(op.name)
                stack.extend(self.consumers.get((op.name, efield.field), ()))
        while stack:
            op = stack.pop()
            if op.name in seen:
                continue
            seen.add(op.name)
            for out_name in op.outputs:
                stack.extend(self.consumers.get((op.name, out_name), ()))
        return [op for op in self.operations if op.name in seen]


# -- transformation tags along paths ------------------------------------------

_DIRECT_RANK = {"IDENTITY": 1, "TRANSFORMATION": 2, "AGGREGATION": 3}


def compose_pair(x: Transformation, y: Transformation) -> tuple[Transformation, ...]:
    """One dependency through a step tagged ``x`` then a step tagged ``y``: INDIRECT
    wins over DIRECT (the value only shaped the result; the INDIRECT step's
    subtype says how); two DIRECT steps keep the strongest subtype (the earlier
    on a tie), masked if either masked."""
    indirect = tuple(t for t in (x, y) if t.type == "INDIRECT")
    if indirect:
        return indirect
    best = max((x, y), key=lambda t: _DIRECT_RANK.get(t.subtype, 0))
    return (Transformation("DIRECT", best.subtype, best.description,
                           x.masking or y.masking),)


def compose_tags(a: tuple[Transformation, ...], b: tuple[Transformation, ...]
                 ) -> tuple[Transformation, ...]:
    """Tags of a path made of a step tagged ``a`` followed by a step tagged ``b``.

    An untagged step says nothing, so it is neutral. A step may tag one input
    both DIRECT and INDIRECT (a column passed through and also filtered on):
    those are two dependencies, so every tag of ``a`` is composed with every tag
    of ``b`` and all results are kept. Associative, which is what lets a
    stored summary compose a shared group's tags once for all who read it."""
    if not a:
        return b
    if not b:
        return a
    out: dict[Transformation, None] = {}
    for x in a:
        for y in b:
            out.update(dict.fromkeys(compose_pair(x, y)))
    return tuple(out)


def tag_order(t: Transformation) -> tuple:
    """The order tags are listed in: by type, subtype, description, masking."""
    return (t.type, t.subtype, t.description, t.masking)


class TagStates:
    """Interned tag states, so a summary composes each distinct (state, step) once.

    A *state* is what all paths from a source field to some point carry: the
    union of their composed tags, and whether one of those paths carried no tag
    at all (an untagged path composes to whatever the next step says, so it
    must be kept apart from the tags of the others). A *step* is the tags one
    transform puts on one input; a step is a state without untagged paths,
    and the empty step is neutral. States are small ints; 0 is "one untagged
    path" and 1 the empty (neutral) step.
    """

    UNTAGGED, NEUTRAL = 0, 1

    def __init__(self, tags: Iterable[Transformation] = (),
                 states: Iterable[tuple[frozenset[int], bool]] = ()) -> None:
        """Empty, or the tables a stored summary kept (`fll.summaries.Summaries`)."""
        self.tags: list[Transformation] = list(tags)
        self._tag_ids = {t: i for i, t in enumerate(self.tags)}
        self.states: list[tuple[frozenset[int], bool]] = list(states)
        self._ids = {s: i for i, s in enumerate(self.states)}
        self._compose: dict[tuple[int, int], int] = {}
        self._union: dict[tuple[int, int], int] = {}
        # readers share a decoded summary across threads: a new id is taken under it
        self._lock = threading.Lock()
        if not self.states:
            self.state(frozenset(), True)
            self.state(frozenset(), False)
        elif self.states[:2] != [(frozenset(), True), (frozenset(), False)]:
            raise ValueError("tag states do not start with the untagged path and the empty step")

    def state(self, tags: frozenset[int], untagged: bool) -> int:
        key = (tags, untagged)
        found = self._ids.get(key)
        if found is None:
            with self._lock:
                found = self._ids.get(key)
                if found is None:
                    found = len(self.states)
                    self.states.append(key)
                    self._ids[key] = found
        return found

    def tag(self, t: Transformation) -> int:
        found = self._tag_ids.get(t)
        if found is None:
            with self._lock:
                found = self._tag_ids.get(t)
                if found is None:
                    found = len(self.tags)
                    self.tags.append(t)
                    self._tag_ids[t] = found
        return found

    def step(self, tags: Iterable[Transformation]) -> int:
        return self.state(frozenset(self.tag(t) for t in tags), False)

    def union(self, a: int, b: int) -> int:
        if a == b or b < 0:
            return a
        if a < 0:
            return b
        key = (a, b) if a < b else (b, a)
        found = self._union.get(key)
        if found is None:
            (ta, ua), (tb, ub) = self.states[a], self.states[b]
            found = self._union[key] = self.state(ta | tb, ua or ub)
        return found

    def compose(self, state: int, step: int) -> int:
        """``state`` carried on through ``step`` (or two steps, one after the other)."""
        if step == self.NEUTRAL:
            return state
        if state == self.NEUTRAL:
            return step
        key = (state, step)
        found = self._compose.get(key)
        if found is None:
            (ta, untagged), (tb, _) = self.states[state], self.states[step]
            out: set[int] = set(tb) if untagged else set()
            for x in ta:
                for y in tb:
                    out.update(self.tag(t) for t in compose_pair(self.tags[x], self.tags[y]))
            found = self._compose[key] = self.state(frozenset(out), False)
        return found

    def listed(self, state: int) -> list[Transformation]:
        """A state's tags as answers list them (`tag_order`)."""
        return sorted((self.tags[i] for i in self.states[state][0]), key=tag_order)


#: a group at most this large (after expanding the groups it reads) is stored
#: expanded: short chains and narrow sets read as flat lists, wide ones as shared groups
FLAT_GROUP = 32


class LineageGroups:
    """The summaries of one operation set as shared groups, linear in its operations.

    A transform's outputs all depend on all its inputs, so every field it
    writes shares one *group*: the transform's source fields (``leaves``, each
    with its tag state) and the groups it reads from other transforms
    (``refs``, each with the step this transform puts on that input). A
    destination field names one group (its ``root``); an all-to-all transform
    of n inputs and n outputs is then n leaves and n roots naming one group,
    not n x n edges. Groups are interned by content and only those some
    destination reads are kept; a group whose expansion has at most
    `FLAT_GROUP` members is stored expanded, so a narrow set reads flat.

    ``fields``: every source and destination field (indexes below point here);
    ``nodes``: per group, (leaves as [field, state, …], refs as [group, step, …]);
    ``roots``: destination field → its group (-1: it has no source field);
    ``read``: the source fields read; ``dropped``: source fields whose every
    path ends in a drop (the outgoing summary's DROPPED).
    """

    def __init__(self, graph: "OperationGraph"):
        self.states = TagStates()
        self.fields: list[EndPointField] = []
        # fields by (namespace, name, field): an EndPointField (and its
        # EndPoint) is built once per field, not once per input that reads it
        field_ids: dict[tuple[str, str, str], int] = {}
        endpoints: dict[tuple[str, str], EndPoint] = {}
        nodes: list[tuple[dict[int, int], dict[tuple[int, int], None]]] = []
        interned: dict[tuple, int] = {}
        st = self.states

        def field_id(ns: str, name: str, field: str) -> int:
            found = field_ids.get((ns, name, field))
            if found is None:
                ep = endpoints.get((ns, name))
                if ep is None:
                    ep = endpoints[(ns, name)] = EndPoint(ns, name)
                found = field_ids[(ns, name, field)] = len(self.fields)
                self.fields.append(EndPointField(ep, field))
            return found

        def node(leaves: dict[int, int], refs: dict[tuple[int, int], None]) -> int:
            """The group of these members (-1 when empty), expanded when small."""
            if not refs and not leaves:
                return -1
            if not leaves and len(refs) == 1:
                (target, step), = refs
                if step == st.NEUTRAL:
                    return target  # reading one group unchanged is that group
            size = len(leaves)
            for target, _ in refs:
                t_leaves, t_refs = nodes[target]
                size += len(t_leaves) if not t_refs else FLAT_GROUP + 1
            if refs and size <= FLAT_GROUP:
                flat = dict(leaves)
                for target, step in refs:
                    for f, s in nodes[target][0].items():
                        flat[f] = st.union(flat.get(f, -1), st.compose(s, step))
                leaves, refs = flat, {}
            key = (tuple(sorted(leaves.items())), tuple(sorted(refs)))
            found = interned.get(key)
            if found is None:
                found = interned[key] = len(nodes)
                nodes.append((leaves, refs))
            return found

        def member(origin: Operation, name: str, step: int,
                   leaves: dict[int, int], refs: dict[tuple[int, int], None]) -> None:
            if isinstance(origin, ReadOperation):
                f = field_id(origin.source.namespace, origin.source.name, name)
                leaves[f] = st.union(leaves.get(f, -1), st.compose(st.UNTAGGED, step))
            else:
                target = group_of.get(origin.name, -1)
                if target >= 0:
                    refs[(target, step)] = None

        group_of: dict[str, int] = {}
        into: dict[int, tuple[dict[int, int], dict[tuple[int, int], None]]] = {}
        for op in graph.operations:
            if isinstance(op, TransformOperation):
                leaves: dict[int, int] = {}
                refs: dict[tuple[int, int], None] = {}
                for inp in op.inputs:
                    member(graph.by_name[inp.origin], inp.name,
                           st.step(op.transformations.get(inp, ())), leaves, refs)
                group_of[op.name] = node(leaves, refs)
            elif isinstance(op, WriteOperation):
                dest = op.destination
                for inp in op.inputs:
                    d = field_id(dest.namespace, dest.name, inp.name)
                    leaves, refs = into.setdefault(d, ({}, {}))
                    member(graph.by_name[inp.origin], inp.name, st.NEUTRAL, leaves, refs)
        roots = {d: node(leaves, refs) for d, (leaves, refs) in into.items()}
        # keep the groups some destination reads, numbered anew
        keep: dict[int, int] = {}
        stack = [r for r in roots.values() if r >= 0]
        while stack:
            n = stack.pop()
            if n in keep:
                continue
            keep[n] = -1
            stack.extend(t for t, _ in nodes[n][1])
        order = sorted(keep)
        keep = {old: new for new, old in enumerate(order)}
        self.nodes: list[tuple[list[int], list[int]]] = []
        for old in order:
            leaves, refs = nodes[old]
            self.nodes.append((list(chain.from_iterable(leaves.items())),
                               [x for t, s in refs for x in (keep[t], s)]))
        self.roots = {d: keep.get(r, -1) for d, r in roots.items()}
        self.read = sorted({field_id(op.source.namespace, op.source.name, f)
                            for op in graph.operations if isinstance(op, ReadOperation)
                            for f in op.outputs})
        self.dropped = sorted(field_id(ef.endpoint.namespace, ef.endpoint.name, ef.field)
                              for ef in graph.dropped_fields())
