"""The built-in joiner: equi-join of several inputs on key fields (CDAP's Joiner).

Lineage, as CDAP records it but kept apart by stage: a selected field that is
a join key is computed from the matching key of every input (the join makes
them equal); any other selected field is an identity of its input field.
Inputs are always named as `StageField(field, stage)`, never as dotted
strings. This module must never guess which input a field came from.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ...errors import PipelineError
from ..api import (FieldTransformOperation, Joiner, Property, PropertyError, StageContext,
                   StageField, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

_JOIN_TYPES = {"inner": "inner", "left": "left_outer", "right": "right_outer",
               "outer": "full_outer"}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@register
class FieldJoiner(Joiner):
    """Joins its inputs in the order of ``joinKeys`` (the first is the left side)."""

    plugin_name = "joiner"
    properties = (
        Property("joinKeys", "dict", required=True,
                 help="input stage -> list of key fields; the n-th keys of all stages match"),
        Property("selectedFields", "list",
                 help="list of {stage, field, alias}; default every field of every input"),
        Property("joinType", default="inner", choices=tuple(_JOIN_TYPES)),
    )

    @classmethod
    def validate(cls, config, inputs) -> None:
        keys = config["joinKeys"]
        if set(keys) != set(inputs):
            missing = sorted(set(inputs) - set(keys))
            extra = sorted(set(keys) - set(inputs))
            what = (f"missing input stage(s) {', '.join(map(repr, missing))}" if missing
                    else f"names stage(s) {', '.join(map(repr, extra))}, which are not inputs")
            raise PropertyError("joinKeys", f"must list keys for each input stage exactly "
                                f"({', '.join(map(repr, inputs))}); {what}")
        sizes = set()
        for stage, fields in keys.items():
            if not isinstance(fields, list) or not fields or not all(
                    isinstance(f, str) and f for f in fields):
                raise PropertyError("joinKeys", f"keys of stage {stage!r} must be a non-empty "
                                    f"list of field names")
            sizes.add(len(fields))
        if len(sizes) > 1:
            raise PropertyError("joinKeys", "every stage must give the same number of keys")
        aliases = []
        for i, sel in enumerate(config.get("selectedFields") or []):
            if not isinstance(sel, dict) or not isinstance(sel.get("field"), str) or \
                    sel.get("stage") not in inputs:
                raise PropertyError("selectedFields", f"entry #{i + 1} must be {{\"stage\": "
                                    f"<an input stage>, \"field\": ..., \"alias\": ...}}, "
                                    f"got {sel!r}")
            aliases.append(sel.get("alias") or sel["field"])
        dup = {a for a in aliases if aliases.count(a) > 1}
        if dup:
            raise PropertyError("selectedFields", f"output field {sorted(dup)[0]!r} is selected "
                                f"twice; give one an alias")

    def join(self, ctx: StageContext, inputs: Mapping[str, "DataFrame"]) -> "DataFrame":
        from pyspark.sql import functions as F

        keys: dict[str, list[str]] = self.config["joinKeys"]
        order = list(keys)
        internal: dict[tuple[str, str], str] = {}
        frames = []
        for i, stage in enumerate(order):
            df = inputs[stage]
            absent = [k for k in keys[stage] if k not in df.columns]
            if absent:
                raise PipelineError(f"stage {ctx.stage!r}, property 'joinKeys': input "
                                    f"{stage!r} has no field {absent[0]!r} (fields: "
                                    f"{', '.join(df.columns)})")
            cols = []
            for j, c in enumerate(df.columns):
                internal[(stage, c)] = f"__j{i}_{j}"
                cols.append(F.col(_q(c)).alias(internal[(stage, c)]))
            frames.append(df.select(*cols))
        selected = self._selected(ctx, inputs, order)
        how = _JOIN_TYPES[self.config["joinType"]]
        out = frames[0]
        first = order[0]
        for i in range(1, len(order)):
            stage = order[i]
            cond = None
            for k0, ki in zip(keys[first], keys[stage], strict=True):
                eq = F.col(internal[(first, k0)]) == F.col(internal[(stage, ki)])
                cond = eq if cond is None else cond & eq
            out = out.join(frames[i], on=cond, how=how)
        ops = []
        for stage, field, alias in selected:
            if field in keys[stage]:
                k = keys[stage].index(field)
                ops.append(FieldTransformOperation(
                    f"join.{alias}", f"Joined on {', '.join(f'{s}.{keys[s][k]}' for s in order)}.",
                    tuple(StageField(keys[s][k], s) for s in order), (alias,)))
            else:
                ops.append(FieldTransformOperation(
                    f"select.{alias}", f"Selected {field} of {stage} as {alias}.",
                    (StageField(field, stage),), (alias,)))
        ctx.record(ops)
        return out.select(*[F.col(internal[(s, f)]).alias(a) for s, f, a in selected])

    def _selected(self, ctx: StageContext, inputs: Mapping[str, "DataFrame"],
                  order: list[str]) -> list[tuple[str, str, str]]:
        given = self.config.get("selectedFields")
        if given:
            out = []
            for sel in given:
                if sel["field"] not in inputs[sel["stage"]].columns:
                    raise PipelineError(
                        f"stage {ctx.stage!r}, property 'selectedFields': input "
                        f"{sel['stage']!r} has no field {sel['field']!r} (fields: "
                        f"{', '.join(inputs[sel['stage']].columns)})")
                out.append((sel["stage"], sel["field"], sel.get("alias") or sel["field"]))
            return out
        out = []
        seen: dict[str, str] = {}
        for stage in order:
            for c in inputs[stage].columns:
                if c in seen:
                    raise PipelineError(
                        f"stage {ctx.stage!r}: field {c!r} comes from both {seen[c]!r} and "
                        f"{stage!r}; list 'selectedFields' with an alias for one of them")
                seen[c] = stage
                out.append((stage, c, c))
        return out
