"""The values of column lineage in a Spark plan: transformation tags and how
they compose along a path, source columns (with the `UNKNOWN` stand-in for
what a walk cannot see), and what a walk (`fll.spark.lineage.walk`) returns.

Plain Python values, no Spark: the walk, the facet (`fll.spark.facet`) and
`track()` share them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping

__all__ = ["Tag", "Source", "Lineage", "compose", "indirect", "Column", "PlanLineage",
           "IDENTITY", "TRANSFORMATION", "AGGREGATION", "MASKED_TRANSFORMATION", "CONDITIONAL",
           "WINDOW", "UNKNOWN", "unknown_reasons", "READS_NO_DATASET", "nothing_read"]

#: (type, subtype, masking)
Tag = tuple[str, str, bool]
#: (namespace, name, field) of a source column
Source = tuple[str, str, str]
#: source column → the tags of every path from it
Lineage = Mapping[Source, frozenset[Tag]]

IDENTITY: Tag = ("DIRECT", "IDENTITY", False)
TRANSFORMATION: Tag = ("DIRECT", "TRANSFORMATION", False)
AGGREGATION: Tag = ("DIRECT", "AGGREGATION", False)
MASKED_TRANSFORMATION: Tag = ("DIRECT", "TRANSFORMATION", True)


def indirect(subtype: str) -> Tag:
    return ("INDIRECT", subtype, False)


CONDITIONAL = indirect("CONDITIONAL")
WINDOW = indirect("WINDOW")
_DIRECT_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}


@lru_cache(maxsize=None)
def compose(outer: Tag, inner: Tag) -> Tag:
    """The tag of a path made of ``inner`` (nearer the source) then ``outer``.

    INDIRECT beats DIRECT (between two INDIRECT the outer one says how the
    value finally acts on the output); among DIRECT, AGGREGATION beats
    TRANSFORMATION beats IDENTITY; masking is sticky.
    """
    masking = outer[2] or inner[2]
    if outer[0] == "INDIRECT":
        return ("INDIRECT", outer[1], masking)
    if inner[0] == "INDIRECT":
        return ("INDIRECT", inner[1], masking)
    sub = outer[1] if _DIRECT_RANK[outer[1]] >= _DIRECT_RANK[inner[1]] else inner[1]
    return ("DIRECT", sub, masking)


#: namespace of the stand-in source that marks a field's lineage as unknown (an RDD, a
#: plan node fll does not understand); its ``name`` is the reason. It composes and
#: propagates like any source, so exactly the fields it reaches carry the reason, and
#: `fll.spark.facet.build_facet` turns it into the field's ``reason``, never an input.
UNKNOWN = "_unknown"


def unknown_reasons(lineage: Mapping[Source, object]) -> list[str]:
    """The reasons, sorted, why part of a field's lineage is unknown."""
    return sorted(src[1] for src in lineage if src[0] == UNKNOWN)


#: why a write that reads no dataset records nothing, when nothing in it is unknown
READS_NO_DATASET = "the data written reads no dataset (inline rows, range)"


def nothing_read(result: "PlanLineage") -> str:
    """Why a plan that reads no dataset has nothing to record: its unknown parts
    (``unknown: built from an RDD (LogicalRDD)``), else `READS_NO_DATASET`."""
    return "; ".join(result.unknown) if result.unknown else READS_NO_DATASET


@dataclass
class Column:
    """One output attribute of a plan node."""

    expr_id: int | None
    name: str
    lineage: Lineage


@dataclass
class PlanLineage:
    """What the walk found: per output column its lineage, plus whole-dataset dependencies."""

    columns: list[Column]
    dataset: dict[Source, frozenset[Tag]]
    #: why part of the lineage is unknown (sorted reasons, each naming the plan node):
    #: a field's own reasons are the `UNKNOWN` sources in its lineage
    unknown: list[str] = field(default_factory=list)
