"""The built-in Wrangler transform: runs a directive recipe (fll.directives) over the input.

The recipe is parsed while the spec is validated (a bad line fails before
Spark starts, naming the line and column). At run time the recipe's labels
become this stage's field operations: one per produced column, each input
named exactly (the stage's input, or the earlier recipe step that produced
it), so the processor never has to guess. This module must never re-derive
lineage the directive engine already computed.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from ...errors import PipelineError, RecipeError
from ...model import Transformation
from ..api import (FieldRef, FieldTransformOperation, OperationField, Property, PropertyError,
                   StageContext, StageField, Transform, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from ...directives.recipe import CompiledRecipe, FieldOperations
    from ...model import InputField

# the origin standing for "this stage's input" while the engine builds operations
_INPUT = "\x00stage-input"


def _recipe_text(config: dict[str, Any], base_dir: str | None) -> tuple[str, str]:
    """(recipe text, the property it came from)."""
    recipe, path = config.get("recipe"), config.get("recipeFile")
    if (recipe is None) == (path is None):
        raise PropertyError("recipe", "give exactly one of 'recipe' (text or list of lines) "
                            "or 'recipeFile'")
    if recipe is not None:
        if isinstance(recipe, list):
            if not all(isinstance(line, str) for line in recipe):
                raise PropertyError("recipe", "a list recipe must hold directive lines")
            return "\n".join(recipe), "recipe"
        if not isinstance(recipe, str):
            raise PropertyError("recipe", f"must be text or a list of lines, got "
                                f"{type(recipe).__name__}")
        return recipe, "recipe"
    path = cast(str, path)  # the check above guarantees recipeFile is given when recipe is not
    full = path if os.path.isabs(path) or not base_dir else os.path.join(base_dir, path)
    try:
        with open(full, encoding="utf-8") as fh:
            return fh.read(), "recipeFile"
    except OSError as e:
        raise PropertyError("recipeFile", f"cannot read {path}: {e.strerror or e}") from e


@register
class Wrangler(Transform):
    """Applies ``recipe`` (Wrangler directives) and records the recipe's field operations."""

    plugin_name = "wrangler"
    properties = (Property("recipe", "any", help="directives, as text or a list of lines"),
                  Property("recipeFile", help="a recipe file, relative to the spec file"),
                  Property("indirectDependencies", "bool", default=True,
                           help="record filter columns as INDIRECT/FILTER inputs of every "
                                "column (false: a filter only reads its columns, as CDAP)"),
                  Property("filterDependencies", "bool", default=None,
                           help="older name of indirectDependencies; wins when given"))

    @classmethod
    def validate(cls, config, inputs) -> None:
        from ...directives import Recipe

        # recipeFile is checked at run time too: validation does not know the spec's directory
        if config.get("recipeFile") is not None and config.get("recipe") is None \
                and not os.path.isabs(config["recipeFile"]):
            return
        text, prop = _recipe_text(config, None)
        try:
            Recipe.parse(text)
        except RecipeError as e:
            raise PropertyError(prop, str(e)) from e

    def _compile(self, ctx: StageContext, df: "DataFrame") -> "tuple[CompiledRecipe, str]":
        from ...directives import Recipe

        try:
            text, prop = _recipe_text(self.config, ctx.base_dir)
        except PropertyError as e:
            raise PipelineError(f"stage {ctx.stage!r}, property {e.property!r}: "
                                f"{e.reason}") from e
        try:
            compiled = Recipe.parse(text).compile(df)
        except RecipeError as e:
            raise PipelineError(f"stage {ctx.stage!r}, property {prop!r}: {e}") from e
        self.compiled, self.stage = compiled, ctx.stage
        return compiled, prop

    def explain_failure(self, exc: BaseException) -> str | None:
        """A failed job's error as one line naming the recipe line, when this stage's
        recipe caused it (`fail`, a failing expression); None when it cannot tell."""
        compiled = getattr(self, "compiled", None)
        if compiled is None:
            return None
        err = compiled.run_error(exc)
        return f"stage {self.stage!r}, recipe {err}" if err.line is not None else None

    def _field_operations(self, compiled: "CompiledRecipe", df: "DataFrame") -> "FieldOperations":
        from ...model import InputField

        return compiled.field_operations(
            "", {c: InputField(_INPUT, c) for c in df.columns},
            filter_dependencies=self.config["indirectDependencies"]
            if self.config.get("filterDependencies") is None
            else self.config["filterDependencies"])

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        from ...directives.frame import plain_frame

        compiled, _ = self._compile(ctx, df)
        ctx.record(_stage_ops(self._field_operations(compiled, df).operations))
        # the runner names the stage and the recipe line itself (explain_failure)
        return plain_frame(compiled.dataframe)


def _ref(field: "InputField") -> "FieldRef":
    return StageField(field.name) if field.origin == _INPUT else \
        OperationField(field.origin, field.name)


def _stage_ops(operations) -> list[FieldTransformOperation]:
    ops = []
    for op in operations:
        tags = {i.name: t for i, t in op.transformations.items()}
        ops.append(FieldTransformOperation(op.name, op.description,
                                           tuple(_ref(i) for i in op.inputs), op.outputs, tags))
    return ops


#: the column naming the stage that sent a row to the error output (CDAP's errStage)
ERROR_STAGE = "errStage"


@register
class WranglerErrors(Wrangler):
    """The ``errors`` port of a wrangler stage: the rows its recipe's send-to-error lines
    took out, with ``errMsg``, ``errCode`` and ``errStage``.

    A spec never names this plugin: a connection ``{"from": "w", "to": "sink", "port":
    "errors"}`` creates the stage ``w.errors`` with w's properties and inputs. It runs
    the same recipe over the same input and records the same field operations, plus
    one identity per error column from the step that sent it, so the error sink's
    lineage is exact.
    """

    plugin_name = "wrangler-errors"

    @classmethod
    def validate(cls, config, inputs) -> None:
        from ...directives import Recipe

        super().validate(config, inputs)
        if config.get("recipe") is None:
            return   # a recipe file is read at run time
        text, prop = _recipe_text(config, None)
        recipe = Recipe.parse(text)
        if not recipe.sends_errors:
            raise PropertyError(prop, "the recipe has no send-to-error line (nor a parser "
                                "that sends bad rows there), so the 'errors' port would "
                                "never receive a row")

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
        from pyspark.sql import functions as F

        compiled, prop = self._compile(ctx, df)
        if compiled.errors is None:
            raise PipelineError(f"stage {ctx.stage!r}, property {prop!r}: the recipe has no "
                                f"send-to-error line, so the 'errors' port would never "
                                f"receive a row")
        fo = self._field_operations(compiled, df)
        ops = _stage_ops(fo.operations + fo.error_operations)
        origin = ctx.stage.rsplit(".", 1)[0]
        columns = list(compiled.errors.columns)
        if ERROR_STAGE in columns:
            raise PipelineError(f"stage {ctx.stage!r}: column {ERROR_STAGE!r} is reserved "
                                f"for the error output")
        for col in columns:
            ops.append(FieldTransformOperation(
                f"error-output.{col}", f"error output field {col}",
                (_ref(fo.error_outputs[col]),), (col,), {col: (Transformation("DIRECT", "IDENTITY"),)}))
        msg = fo.error_outputs["errMsg"]
        ops.append(FieldTransformOperation(
            f"error-output.{ERROR_STAGE}", f"the stage {origin!r} that sent the row",
            (_ref(msg),), (ERROR_STAGE,), {msg.name: (Transformation("INDIRECT", "FILTER"),)}))
        ctx.record(ops)
        return compiled.errors.withColumn(ERROR_STAGE, F.lit(origin))


Wrangler.error_plugin = WranglerErrors  # type: ignore[attr-defined]
