"""Classification tags kept in the store: what a tag is and where people put it.

Two row kinds, additive in format 6 (an fll that does not know them ignores
them): ``T|<tag>`` defines a tag (its description, its propagation policy,
who made it and when) and ``t|<ns>|<name>|<field>|<tag>`` says who put the
tag on a field (``<field>`` empty: on the dataset itself) and when. Tags are
not lineage: they have no time range, `fll admin purge` leaves them, and
`fll admin migrate` copies them. Where a tag *reaches* along lineage is a
question of a time range, answered at question time by `fll.govern`, never
stored.

Tag names are case-insensitive and kept upper-case (Marquez upper-cases the
tags it puts on fields). Tags are put by people, so there are few: listing
them all is one scan of the ``t|`` rows. This module must never read lineage
rows and never depend on a backend.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .. import rowkeys as rk
from ..errors import BadRequest, StoreError
from ..timerange import now_ms
from .base import Table

#: what a tag's policy may let it pass besides IDENTITY and TRANSFORMATION
PASSABLE = ("AGGREGATION", "MASKING")
MAX_TAG_LENGTH = 128


def tag_name(value: object, parameter: str = "tag") -> str:
    """A tag name as stored (upper-case); BadRequest naming ``parameter`` if it is
    empty, too long or holds control characters."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{parameter} must be a non-empty name, got {value!r}", parameter)
    text = value.strip()
    if len(text) > MAX_TAG_LENGTH:
        raise BadRequest(f"{parameter} {text[:20]!r}… is longer than {MAX_TAG_LENGTH} "
                         f"characters", parameter)
    if not text.isprintable():
        raise BadRequest(f"{parameter} {text!r} holds control characters", parameter)
    return text.upper()


def policy_of(passes: Iterable[str], parameter: str = "policy") -> frozenset[str]:
    out = set()
    for p in passes:
        name = str(p).strip().upper()
        if name == "MASKED":
            name = "MASKING"
        if name not in PASSABLE:
            raise BadRequest(f"{parameter}: a tag may be let pass {' or '.join(PASSABLE)}, "
                             f"not {p!r}", parameter)
        out.add(name)
    return frozenset(out)


@dataclass(frozen=True)
class TagDef:
    """A tag's definition. ``passes``: what it crosses besides IDENTITY and
    TRANSFORMATION edges (AGGREGATION, MASKING); empty by default."""

    name: str
    description: str = ""
    passes: frozenset[str] = frozenset()
    by: str = ""
    at_ms: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description or None,
                "propagation": {"aggregation": "AGGREGATION" in self.passes,
                                "masking": "MASKING" in self.passes},
                "createdBy": self.by or None, "createdAt": self.at_ms}


@dataclass(frozen=True)
class Assignment:
    """A tag put on a field (``field == ""``: on the dataset)."""

    tag: str
    namespace: str
    name: str
    field: str
    by: str = ""
    at_ms: int = 0

    def to_dict(self) -> dict:
        return {"tag": self.tag, "namespace": self.namespace, "dataset": self.name,
                "field": self.field or None, "taggedBy": self.by or None,
                "taggedAt": self.at_ms}


def _text(cols: dict[str, bytes], column: str) -> str:
    return cols.get(column, b"").decode("utf-8")


def _ms(cols: dict[str, bytes], column: str) -> int:
    raw = cols.get(column, b"0")
    if not raw.isdigit():
        raise ValueError(f"column {column} is not a time")
    return int(raw)


def decode_def(key: bytes, cols: dict[str, bytes]) -> TagDef:
    """A ``T|`` row; ValueError (or UnicodeDecodeError) when it does not decode."""
    k = rk.decode(key)
    passes = [p for p in _text(cols, "p").split(",") if p]
    if any(p not in PASSABLE for p in passes):
        raise ValueError("an unknown policy")
    return TagDef(k.tag or "", _text(cols, "d"), frozenset(passes), _text(cols, "by"),
                  _ms(cols, "at"))


def decode_assignment(key: bytes, cols: dict[str, bytes]) -> Assignment:
    """A ``t|`` row; ValueError (or UnicodeDecodeError) when it does not decode."""
    k = rk.decode(key)
    return Assignment(k.tag or "", k.namespace or "", k.name or "", k.field or "",
                      _text(cols, "by"), _ms(cols, "at"))


class Tags:
    """The tag rows of one store (its `Table`)."""

    def __init__(self, table: Table):
        self.table = table

    def _corrupt(self, key: bytes) -> StoreError:
        return StoreError(f"store {self.table.url}: row {key!r} is corrupt (run "
                          f"`fll admin fsck`)")

    # -- definitions -------------------------------------------------------------
    def get(self, name: str) -> TagDef | None:
        key = rk.tag(tag_name(name))
        row = self.table.get(key)
        if row is None:
            return None
        try:
            return decode_def(key, row)
        except (ValueError, UnicodeDecodeError):
            raise self._corrupt(key) from None

    def define(self, name: str, description: str | None = None,
               passes: Iterable[str] | None = None, by: str = "") -> TagDef:
        """Create the tag or change what is given of it (None: kept as it is)."""
        name = tag_name(name)
        if description is not None and not isinstance(description, str):
            raise BadRequest(f"description must be a string, got {description!r}",
                             "description")
        policy = None if passes is None else policy_of(passes)
        old = self.get(name)
        cols: dict[str, bytes] = {}
        if old is None:
            cols = {"by": by.encode(), "at": str(now_ms()).encode(), "d": b"", "p": b""}
        if description is not None:
            cols["d"] = description.encode()
        if policy is not None:
            cols["p"] = ",".join(sorted(policy)).encode()
        if cols:
            self.table.put({rk.tag(name): cols})
        found = self.get(name)
        assert found is not None
        return found

    def all(self) -> list[TagDef]:
        prefix = rk.TAG + rk.SEP
        out = []
        for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
            try:
                out.append(decode_def(key, cols))
            except (ValueError, UnicodeDecodeError):
                raise self._corrupt(key) from None
        return sorted(out, key=lambda t: t.name)

    # -- where tags are put --------------------------------------------------------
    def add(self, namespace: str, name: str, field: str, tag: str, by: str = "") -> bool:
        """Put ``tag`` on ``namespace:name`` (``field`` "": the dataset) and define
        the tag if it is new; False when it was already there (who and when kept)."""
        tag = tag_name(tag)
        key = rk.tagged(namespace, name, field, tag)
        if self.table.get(key) is not None:
            return False
        if self.get(tag) is None:
            self.define(tag, by=by)
        self.table.put({key: {"by": by.encode(), "at": str(now_ms()).encode()}})
        return True

    def remove(self, namespace: str, name: str, field: str, tag: str) -> bool:
        key = rk.tagged(namespace, name, field, tag_name(tag))
        if self.table.get(key) is None:
            return False
        self.table.delete([key])
        return True

    def _scan(self, prefix: bytes) -> list[Assignment]:
        out = []
        for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
            try:
                out.append(decode_assignment(key, cols))
            except (ValueError, UnicodeDecodeError):
                raise self._corrupt(key) from None
        return out

    def assignments(self, tag: str | None = None) -> list[Assignment]:
        """Every tag put anywhere (or only ``tag``), in key order."""
        found = self._scan(rk.TAGGED + rk.SEP)
        if tag is None:
            return found
        wanted = tag_name(tag)
        return [a for a in found if a.tag == wanted]

    def of_dataset(self, namespace: str, name: str) -> list[Assignment]:
        return self._scan(rk.dataset_prefix(rk.TAGGED, namespace, name))
