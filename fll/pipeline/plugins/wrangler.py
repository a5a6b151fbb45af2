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
from ..api import (FieldTransformOperation, OperationField, Property, PropertyError,
                   StageContext, StageField, Transform, register)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

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

    def transform(self, ctx: StageContext, df: "DataFrame") -> "DataFrame":
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
        from ...model import InputField

        fo = compiled.field_operations(
            "", {c: InputField(_INPUT, c) for c in df.columns},
            filter_dependencies=self.config["indirectDependencies"]
            if self.config.get("filterDependencies") is None
            else self.config["filterDependencies"])
        ops = []
        for op in fo.operations:
            refs = [StageField(i.name) if i.origin == _INPUT else OperationField(i.origin, i.name)
                    for i in op.inputs]
            tags = {i.name: t for i, t in op.transformations.items()}
            ops.append(FieldTransformOperation(op.name, op.description, tuple(refs),
                                               op.outputs, tags))
        ctx.record(ops)
        return compiled.dataframe
