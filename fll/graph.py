"""The operation graph of one run: validation, topological order, summaries.

Every walk here is memoised per operation (or per read field), so each query
is linear in the size of the graph. CDAP's first implementation enumerated
paths and went exponential on all-to-all layers; this module must never
enumerate paths.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Iterable

from .errors import InvalidLineageError
from .model import (DROPPED, EndPoint, EndPointField, InputField, Operation, ReadOperation,
                    TransformOperation, WriteOperation)


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
