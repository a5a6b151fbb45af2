"""Which directives exist: names, signatures and the functions that apply them.

A directive is a function ``fn(step, df, args) -> Outcome`` plus a usage
string that is both its documentation and its argument signature. The
built-ins register themselves here; users add their own with
`register_directive` (or a private `Registry`) without touching the engine.
This module must never apply a directive or parse a recipe.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .labels import Decl
from .parser import Args, Signature, parse_signature

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from .context import StepContext

__all__ = ["Outcome", "DirectiveSpec", "Registry", "DEFAULT_REGISTRY", "register_directive"]


@dataclass
class Outcome:
    """What a directive returns: the new DataFrame and its label declarations.

    ``identity``: the READ columns are copied unchanged (copy) — tagged
    DIRECT/IDENTITY instead of DIRECT/TRANSFORMATION in lineage.
    ``masking``: values pass through a hash or mask (OpenLineage ``masking``).
    ``note``: a human remark, e.g. which data-dependent action was run.
    ``errors``: rows this step sends to the recipe's error output (send-to-error):
    the step's input columns plus ``errMsg`` and ``errCode``.
    ``probe``: the rows that make this step stop the run (``fail``), read only after a
    run failed, to show the whole first failing row (`CompiledRecipe.run_error`).
    """

    df: "DataFrame"
    labels: Sequence[Decl] = ()
    identity: bool = False
    masking: bool = False
    note: str = ""
    errors: "DataFrame | None" = None
    probe: "DataFrame | None" = None


DirectiveFn = Callable[["StepContext", "DataFrame", Args], Outcome]


@dataclass(frozen=True)
class DirectiveSpec:
    name: str
    signature: Signature
    fn: DirectiveFn = field(compare=False)
    description: str = ""
    checks: dict[str, Callable[[Any], str | None]] = field(default_factory=dict, compare=False)

    @property
    def usage(self) -> str:
        return self.signature.usage()


_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


class Registry:
    """A set of directives by name. `copy()` one to add private directives."""

    def __init__(self, specs: Iterable[DirectiveSpec] = ()):
        self._specs: dict[str, DirectiveSpec] = {}
        for s in specs:
            self._specs[s.name] = s

    def register(self, usage: str, fn: DirectiveFn, description: str = "",
                 checks: dict[str, Callable[[Any], str | None]] | None = None,
                 replace: bool = False) -> DirectiveSpec:
        """Add ``fn`` under the name and arguments of ``usage``.

        ``checks`` maps an argument name to ``value -> reason or None``, run
        at parse time so a bad value stops the whole recipe before it runs.
        """
        sig = parse_signature(usage)
        if not _NAME.fullmatch(sig.name):
            raise ValueError(f"directive names are lowercase words joined by '-', "
                             f"got {sig.name!r}")
        if sig.name in self._specs and not replace:
            raise ValueError(f"directive {sig.name!r} is already registered; "
                             f"pass replace=True to override it")
        checks = dict(checks or {})
        unknown = set(checks) - {p.name for p in sig.params}
        if unknown:
            raise ValueError(f"checks given for unknown argument(s) {sorted(unknown)} "
                             f"of {sig.name!r}")
        params = tuple(type(p)(p.name, p.kind, p.optional, p.choices, checks.get(p.name))
                       for p in sig.params)
        spec = DirectiveSpec(sig.name, Signature(sig.name, params), fn,
                             description or (fn.__doc__ or "").strip().split("\n")[0], checks)
        self._specs[sig.name] = spec
        return spec

    def get(self, name: str) -> DirectiveSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """The closest known directive names (difflib), best first."""
        return difflib.get_close_matches(name.lower(), self.names(), n=n, cutoff=0.5)

    def copy(self) -> "Registry":
        return Registry(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self):
        return iter(self._specs[n] for n in self.names())


DEFAULT_REGISTRY = Registry()


def register_directive(usage: str, description: str = "",
                       checks: dict[str, Callable[[Any], str | None]] | None = None,
                       registry: Registry | None = None, replace: bool = False):
    """Decorator: register ``fn(step, df, args) -> Outcome`` as a directive.

    Example::

        @register_directive("lowercase-all")
        def lowercase_all(step, df, args):
            out = df.select([F.lower(step.col(c)).alias(c) for c in df.columns])
            return Outcome(out, labels.modify(labels.all_columns()))
    """
    def deco(fn: DirectiveFn) -> DirectiveFn:
        (registry or DEFAULT_REGISTRY).register(usage, fn, description, checks, replace)
        return fn
    return deco
