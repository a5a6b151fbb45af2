"""A Wrangler-like directive engine on Spark with field-lineage labels.

``Recipe.parse(text)`` checks a whole recipe; ``recipe.apply(df)`` is one
lazy Spark plan; ``recipe.compile(df)`` also gives every step's labels
(READ/ADD/DROP/RENAME/MODIFY) and turns them into CDAP field operations.
Custom directives register with `register_directive`. Nothing in this
package writes lineage to a store.
"""
from . import labels
from . import families  # noqa: F401  (loads the built-in directives, once)
from .context import StepContext, quote
from .labels import ADD, DROP, MODIFY, READ, RENAME
from .parser import Args
from .recipe import CompiledRecipe, FieldOperations, Recipe, StepLabels
from .registry import DEFAULT_REGISTRY, DirectiveSpec, Outcome, Registry, register_directive

__all__ = ["Recipe", "CompiledRecipe", "StepLabels", "FieldOperations", "Outcome", "Args",
           "StepContext", "Registry", "DirectiveSpec", "DEFAULT_REGISTRY", "register_directive",
           "labels", "quote", "READ", "ADD", "DROP", "RENAME", "MODIFY"]
