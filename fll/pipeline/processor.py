"""Turns every stage's recorded field operations into one run's `FieldLineageInfo`.

Rules (issue 4):
- operation names are prefixed with their stage: ``"<stage>.<name>"``;
- a plain input name resolves to the operation of the same stage that last
  produced the field, else to the stage's input: the operation that last
  produced that field in the nearest upstream stage;
- a stage with several inputs (not a joiner) gets one explicit merge
  operation per field arriving from more than one of them;
- a stage that recorded nothing passes each field of its output schema
  through from its input unchanged (per field, never all-to-all);
- a joiner refers to its inputs by ``StageField(field, stage)``: the pair,
  never a dotted string, so ``A.x`` and ``B.x`` stay apart.

Any inconsistency raises `InvalidLineageError` naming the stage, operation
and field, before anything is written. This module must never touch Spark or
a store.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..errors import InvalidLineageError
from ..model import InputField, Operation, ReadOperation, TransformOperation, WriteOperation
from ..opset import FieldLineageInfo
from .api import (FieldOperation, FieldReadOperation, FieldRef, FieldTransformOperation,
                  FieldWriteOperation, OperationField, StageField)

__all__ = ["StageLineage", "process", "stage_operations"]


@dataclass(frozen=True)
class StageLineage:
    """What the processor needs of one stage.

    ``inputs`` are upstream stage names (in connection order), ``operations``
    what the stage recorded, ``output_fields`` its output schema (None when
    unknown: then everything the stage knows of passes on).
    """

    name: str
    kind: str
    inputs: tuple[str, ...] = ()
    operations: tuple[FieldOperation, ...] = ()
    output_fields: tuple[str, ...] | None = None


def process(stages: Iterable[StageLineage]) -> FieldLineageInfo:
    """One validated `FieldLineageInfo` for the whole run."""
    ops = stage_operations(stages)
    try:
        return FieldLineageInfo(ops)
    except InvalidLineageError as e:
        raise InvalidLineageError(f"the pipeline's lineage is invalid: {e}",
                                  operation=e.operation, field=e.field) from e


def stage_operations(stages: Iterable[StageLineage]) -> list[Operation]:
    """The run's operations (not yet validated as a whole); see the module docstring."""
    ordered = _toposort(list(stages))
    # per stage: output field -> name of the operation that last produced it
    produced: dict[str, dict[str, str]] = {}
    out: list[Operation] = []
    names: set[str] = set()

    def add(op: Operation, stage: str) -> None:
        if op.name in names:
            raise InvalidLineageError(
                f"stage {stage!r}: operation name {op.name!r} is used more than once",
                operation=op.name)
        names.add(op.name)
        out.append(op)

    for st in ordered:
        stage_input = _stage_input(st, produced, add)
        current: dict[str, str] = dict(stage_input) if stage_input is not None else {}
        local: set[str] = set()
        outputs_of: dict[str, set[str]] = {}
        for fop in st.operations:
            name = f"{st.name}.{fop.name}"
            if fop.name in local:
                raise InvalidLineageError(
                    f"stage {st.name!r} recorded operation {fop.name!r} twice", operation=name)
            local.add(fop.name)
            outputs_of[fop.name] = set(getattr(fop, "outputs", ()))
            if isinstance(fop, FieldReadOperation):
                add(ReadOperation(name, fop.description, fop.source, fop.outputs), st.name)
                for f in fop.outputs:
                    current[f] = name
            elif isinstance(fop, FieldTransformOperation):
                outputs_of.pop(fop.name)  # an operation cannot consume itself
                inputs = [_resolve(st, name, ref, current, stage_input, produced, outputs_of)
                          for ref in fop.inputs]
                outputs_of[fop.name] = set(getattr(fop, "outputs", ()))
                tags = {}
                for ref, inp in zip(fop.inputs, inputs, strict=True):
                    key = _field_of(ref)
                    if key in fop.transformations:
                        tags[inp] = tuple(fop.transformations[key])
                add(TransformOperation(name, fop.description, tuple(_dedupe(inputs)),
                                       fop.outputs, tags), st.name)
                if not fop.outputs:
                    for ref in fop.inputs:
                        current.pop(_field_of(ref), None)
                for f in fop.outputs:
                    current[f] = name
            elif isinstance(fop, FieldWriteOperation):
                inputs = [_resolve(st, name, ref, current, stage_input, produced, outputs_of)
                          for ref in fop.inputs]
                written = [i.name for i in inputs]
                dup = {f for f in written if written.count(f) > 1}
                if dup:
                    raise InvalidLineageError(
                        f"stage {st.name!r}: write operation {fop.name!r} writes field "
                        f"{sorted(dup)[0]!r} more than once", operation=name,
                        field=sorted(dup)[0])
                add(WriteOperation(name, fop.description, fop.sink, tuple(inputs)), st.name)
            else:
                raise InvalidLineageError(f"stage {st.name!r} recorded {fop!r}, which is not a "
                                          f"field operation")
        if st.kind == "sink":
            if not any(isinstance(f, FieldWriteOperation) for f in st.operations):
                raise InvalidLineageError(f"sink stage {st.name!r} recorded no write operation")
            continue
        if st.output_fields is None:
            produced[st.name] = current
            continue
        result: dict[str, str] = {}
        for f in st.output_fields:
            if f not in current:
                how = ("recorded no operations and" if not st.operations
                       else "recorded no operation producing it, and")
                raise InvalidLineageError(
                    f"stage {st.name!r} outputs field {f!r}, but it {how} the field is not in "
                    f"its input (fields it knows of: {', '.join(sorted(current)) or 'none'})",
                    field=f)
            result[f] = current[f]
        produced[st.name] = result
    return out


def _stage_input(st: StageLineage, produced: Mapping[str, Mapping[str, str]],
                 add) -> dict[str, str] | None:
    """Field -> origin of the stage's input (None for a joiner: its inputs stay apart)."""
    if not st.inputs:
        return {}
    if len(st.inputs) == 1:
        return dict(produced[st.inputs[0]])
    if st.kind == "joiner":
        return None
    merged: dict[str, str] = {}
    sources: dict[str, list[str]] = {}
    for up in st.inputs:
        for f, origin in produced[up].items():
            sources.setdefault(f, [])
            if origin not in sources[f]:
                sources[f].append(origin)
    for f, origins in sources.items():
        if len(origins) == 1:
            merged[f] = origins[0]
            continue
        name = f"{st.name}.merge.{f}"
        add(TransformOperation(name, f"Merge field {f} from the inputs of stage {st.name}",
                               tuple(InputField(o, f) for o in origins), (f,)), st.name)
        merged[f] = name
    return merged


def _resolve(st: StageLineage, op: str, ref: FieldRef, current: Mapping[str, str],
             stage_input: Mapping[str, str] | None,
             produced: Mapping[str, Mapping[str, str]],
             outputs_of: Mapping[str, set[str]]) -> InputField:
    if isinstance(ref, str):
        if ref in current:
            return InputField(current[ref], ref)
        return _from_input(st, op, ref, None, stage_input, produced)
    if isinstance(ref, OperationField):
        if ref.field not in outputs_of.get(ref.operation, ()):
            raise InvalidLineageError(
                f"stage {st.name!r}, operation {op!r}: input {ref.field!r} names operation "
                f"{ref.operation!r}, which is not an earlier operation of the stage that "
                f"outputs it", operation=op, field=ref.field)
        return InputField(f"{st.name}.{ref.operation}", ref.field)
    return _from_input(st, op, ref.field, ref.stage, stage_input, produced)


def _from_input(st: StageLineage, op: str, field: str, stage: str | None,
                stage_input: Mapping[str, str] | None,
                produced: Mapping[str, Mapping[str, str]]) -> InputField:
    if stage is not None:
        if stage not in st.inputs:
            raise InvalidLineageError(
                f"stage {st.name!r}, operation {op!r}: input field {field!r} names stage "
                f"{stage!r}, which is not one of its inputs ({', '.join(st.inputs) or 'none'})",
                operation=op, field=field)
        fields = produced[stage]
        if field not in fields:
            raise InvalidLineageError(
                f"stage {st.name!r}, operation {op!r}: input stage {stage!r} has no field "
                f"{field!r} (its fields: {', '.join(sorted(fields)) or 'none'})",
                operation=op, field=field)
        return InputField(fields[field], field)
    if stage_input is None:  # joiner: a plain name must be unambiguous
        holders = [s for s in st.inputs if field in produced[s]]
        if len(holders) == 1:
            return InputField(produced[holders[0]][field], field)
        if holders:
            raise InvalidLineageError(
                f"stage {st.name!r}, operation {op!r}: field {field!r} arrives from stages "
                f"{', '.join(map(repr, holders))}; name one with StageField(field, stage)",
                operation=op, field=field)
        raise InvalidLineageError(
            f"stage {st.name!r}, operation {op!r}: no input stage has field {field!r}",
            operation=op, field=field)
    if field not in stage_input:
        raise InvalidLineageError(
            f"stage {st.name!r}, operation {op!r}: input field {field!r} is neither produced "
            f"by an earlier operation of the stage nor in its input (input fields: "
            f"{', '.join(sorted(stage_input)) or 'none'})", operation=op, field=field)
    return InputField(stage_input[field], field)


def _field_of(ref: str | StageField | OperationField) -> str:
    return ref if isinstance(ref, str) else ref.field


def _dedupe(inputs: Sequence[InputField]) -> list[InputField]:
    seen: set[InputField] = set()
    out = []
    for i in inputs:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def _toposort(stages: list[StageLineage]) -> list[StageLineage]:
    by_name: dict[str, StageLineage] = {}
    for st in stages:
        if st.name in by_name:
            raise InvalidLineageError(f"stage name {st.name!r} is used more than once")
        by_name[st.name] = st
    for st in stages:
        for up_name in st.inputs:
            if up_name not in by_name:
                raise InvalidLineageError(
                    f"stage {st.name!r} has unknown input stage {up_name!r}")
            if by_name[up_name].kind == "sink":
                raise InvalidLineageError(f"stage {st.name!r} takes input from sink {up_name!r}")
    order: list[StageLineage] = []
    state: dict[str, int] = {}
    for st in stages:
        stack = [(st, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                if state.get(node.name) == 2:
                    continue
                if state.get(node.name) == 1:
                    raise InvalidLineageError(f"the stages form a cycle through {node.name!r}")
                state[node.name] = 1
            if i < len(node.inputs):
                stack.append((node, i + 1))
                up = by_name[node.inputs[i]]
                if state.get(up.name) == 1:
                    raise InvalidLineageError(f"the stages form a cycle through {up.name!r}")
                if state.get(up.name) != 2:
                    stack.append((up, 0))
            else:
                state[node.name] = 2
                order.append(node)
    return order
