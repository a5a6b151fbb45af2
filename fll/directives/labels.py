"""Field-lineage labels of directives: READ, ADD, DROP, RENAME, MODIFY.

A directive declares, per column it touches, exactly one label (semantics
§4, seed wrangler-field-lineage-labels). READ/ADD/MODIFY may name columns
with a shorthand — ``all columns``, ``all columns minus a b``, ``all columns
formatted %s_%d`` — resolved against the columns present *after* the
directive. This module resolves and checks declarations; it must never
touch Spark or build lineage operations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence, Union, cast

from ..errors import RecipeError

__all__ = ["READ", "ADD", "DROP", "RENAME", "MODIFY", "KINDS", "Shorthand", "all_columns",
           "all_columns_minus", "all_columns_formatted", "shorthand", "Decl", "read", "add",
           "drop", "modify", "rename", "resolve", "Resolved"]

READ, ADD, DROP, RENAME, MODIFY = "READ", "ADD", "DROP", "RENAME", "MODIFY"
KINDS = (READ, ADD, DROP, RENAME, MODIFY)


@dataclass(frozen=True)
class Shorthand:
    """``all columns`` (no minus, no format), ``… minus a b`` or ``… formatted fmt``."""

    minus: tuple[str, ...] = ()
    formatted: str | None = None

    def matches(self, column: str) -> bool:
        if column in self.minus:
            return False
        if self.formatted is None:
            return True
        return _format_regex(self.formatted).fullmatch(column) is not None

    def __str__(self) -> str:
        if self.formatted is not None:
            return f"all columns formatted {self.formatted}"
        if self.minus:
            return "all columns minus " + " ".join(self.minus)
        return "all columns"


def _format_regex(fmt: str) -> re.Pattern:
    # %s = one or more characters, %d = one or more digits, everything else literal
    parts = re.split(r"(%s|%d)", fmt)
    body = "".join(".+" if p == "%s" else r"\d+" if p == "%d" else re.escape(p) for p in parts)
    return re.compile(body, re.DOTALL)


def all_columns() -> Shorthand:
    return Shorthand()


def all_columns_minus(*names: str) -> Shorthand:
    return Shorthand(minus=tuple(names))


def all_columns_formatted(fmt: str) -> Shorthand:
    return Shorthand(formatted=fmt)


def shorthand(text: str) -> Shorthand:
    """Parse the seed's wording: ``all columns [minus a b | formatted fmt]``."""
    words = text.split()
    if words[:2] != ["all", "columns"]:
        raise ValueError(f"not a shorthand: {text!r}")
    if len(words) == 2:
        return all_columns()
    if words[2] == "minus" and len(words) > 3:
        return all_columns_minus(*words[3:])
    if words[2] == "formatted" and len(words) == 4:
        return all_columns_formatted(words[3])
    raise ValueError(f"cannot read the shorthand {text!r}; expected 'all columns', "
                     f"'all columns minus a b' or 'all columns formatted %s_%d'")


Target = Union[str, Shorthand]


@dataclass(frozen=True)
class Decl:
    """One declared label: ``kind`` on ``target`` (``new`` is the new name of a RENAME)."""

    kind: str
    target: Target
    new: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown label {self.kind!r}; known: {', '.join(KINDS)}")
        if isinstance(self.target, Shorthand) and self.kind not in (READ, ADD, MODIFY):
            raise ValueError(f"{self.kind} cannot use the shorthand '{self.target}': "
                             f"only READ, ADD and MODIFY can")
        if (self.kind == RENAME) != (self.new is not None):
            raise ValueError("RENAME needs the old and the new name, other labels only one")

    def __str__(self) -> str:
        if self.kind == RENAME:
            return f"RENAME {self.target} -> {self.new}"
        return f"{self.kind} {self.target}"


def read(*targets: Target) -> list[Decl]:
    return [Decl(READ, t) for t in targets]


def add(*targets: Target) -> list[Decl]:
    return [Decl(ADD, t) for t in targets]


def modify(*targets: Target) -> list[Decl]:
    return [Decl(MODIFY, t) for t in targets]


def derive(source: str, destination: str) -> list[Decl]:
    """A value computed from ``source`` into ``destination``: MODIFY when they are
    the same column, else READ source and ADD destination."""
    return modify(source) if source == destination else read(source) + add(destination)


def drop(*targets: str) -> list[Decl]:
    return [Decl(DROP, t) for t in targets]


def rename(*pairs: tuple[str, str]) -> list[Decl]:
    """RENAME for each ``(old, new)`` pair whose names differ (a no-op rename has no label)."""
    return [Decl(RENAME, old, new) for old, new in pairs if old != new]


@dataclass(frozen=True)
class Resolved:
    """The per-column labels of one step, in column order, plus the rename pairs."""

    labels: dict[str, str]
    renames: tuple[tuple[str, str], ...]


def resolve(decls: Iterable[Decl], before: Sequence[str], after: Sequence[str],
            where: dict) -> Resolved:
    """Turn declarations into exactly one label per touched column and check them.

    Checks (a directive that breaks one is a bug, reported as `RecipeError`
    with ``where`` = line/column/directive): a column labelled twice; READ,
    DROP, MODIFY or a RENAME's old name that did not exist before; ADD,
    MODIFY or a RENAME's new name missing after; a column that appeared or
    disappeared without an ADD, RENAME or DROP saying so (a column READ by a step that
    ADDs columns may disappear: it was consumed into them).
    """
    before_set, after_set = set(before), set(after)
    labels: dict[str, str] = {}
    renames: list[tuple[str, str]] = []
    decls = list(decls)

    def put(col: str, kind: str) -> None:
        if col in labels and labels[col] != kind:
            raise RecipeError(f"directive labels column {col!r} both {labels[col]} and {kind}; "
                              f"a column gets exactly one label", **where)
        labels[col] = kind

    for d in decls:
        if isinstance(d.target, Shorthand):
            continue
        if d.kind == RENAME:
            new = cast(str, d.new)  # Decl.__post_init__ guarantees a RENAME has a new name
            renames.append((d.target, new))
            put(d.target, RENAME)
            put(new, RENAME)
        else:
            put(d.target, d.kind)
    explicit = set(labels)
    for d in decls:
        if isinstance(d.target, Shorthand):
            for col in after:
                if col not in explicit and d.target.matches(col):
                    put(col, d.kind)

    old_names = {o for o, _ in renames}
    new_names = {n for _, n in renames}
    for col, kind in labels.items():
        existed, exists = col in before_set, col in after_set
        if kind in (READ, DROP, MODIFY) and not existed:
            raise RecipeError(f"directive labels {col!r} {kind} but there was no such column "
                              f"before it", **where)
        if kind in (ADD, MODIFY) and not exists:
            raise RecipeError(f"directive labels {col!r} {kind} but there is no such column "
                              f"after it", **where)
        if kind == DROP and exists:
            raise RecipeError(f"directive labels {col!r} DROP but the column is still there",
                              **where)
    for old in old_names:
        if old not in before_set:
            raise RecipeError(f"directive renames {old!r}, which did not exist", **where)
    for new in new_names:
        if new not in after_set:
            raise RecipeError(f"directive renames to {new!r}, which is not there after it",
                              **where)
    for col in after:
        if col not in before_set and col not in labels:
            raise RecipeError(f"directive produced column {col!r} without declaring it "
                              f"(ADD or RENAME)", **where)
    # a column READ into the columns a step adds may be gone after it (parse-as-json
    # consumes its source): its lineage continues in the added columns, so it is no DROP
    consumes = ADD in labels.values()
    for col in before:
        if col not in after_set and labels.get(col) not in (DROP, RENAME) and not (
                consumes and labels.get(col) == READ):
            raise RecipeError(f"directive removed column {col!r} without declaring it "
                              f"(DROP, RENAME, or READ into a column it adds)", **where)

    order = {c: i for i, c in enumerate(list(before) + [c for c in after if c not in before_set])}
    ordered = dict(sorted(labels.items(), key=lambda kv: order.get(kv[0], len(order))))
    return Resolved(ordered, tuple(renames))
