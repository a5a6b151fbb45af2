"""The built-in directives, one module per family, each registering its own.

Importing this package loads every family once; each module registers its
directives in `DEFAULT_REGISTRY` with `register_directive` as it is imported.
The registry and the recipe engine never import a family: `fll.directives`
loads this package, so a family's directives exist whenever the package does.

Each directive turns one statement into lazy DataFrame transformations and
declares its lineage labels (semantics §4). Behaviour follows CDAP Wrangler's
documentation and tests; every place where Spark makes fll differ is said in the
directive's docstring and in docs/directives.md. A directive must never run a
Spark action except the few that must learn data-dependent column names, which
say so and run exactly one small action.
"""
from . import (columns, datetime, documents, encoding, logs, masking,  # noqa: F401  (register)
               parsers, rows, text, types, variables)
