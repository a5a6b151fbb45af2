"""Governance over stored lineage: where a classification tag reaches, and how a
field's lineage changed between two time ranges.

**Propagation.** A tag put on a field (`fll.store.tags`) follows DIRECT edges
downstream: it passes IDENTITY and TRANSFORMATION and stops at AGGREGATION
and at masked edges (hashes, ``mask()``, counts), unless the tag's policy
lets it pass those (`fll.store.tags.TagDef.passes`). INDIRECT edges (filter,
join, group-by… columns) never carry it. An edge with no tag at all comes
from a producer that says nothing about it: it carries the tag (a
classification must not be lost to a missing fact). An edge is the union of
every path between its two fields in every operation set of the range, so a
field reached by two paths of which one is broken still carries the tag.
The fields where a carrying field reached another only through breaking
DIRECT edges are listed as *stopped*, with the breaking transformations.

**Diff.** The edges of a field's (or dataset's) neighbourhood, ``depth`` hops
up and down, in a *before* and an *after* range: those only after are added,
those only before removed, and those in both with other transformations
changed. An edge met by one walk is looked up in the other range directly,
so an edge present in both ranges is never reported because a walk did not
reach it.

Both are computed from the summaries stored with each operation set (tags
composed at record time), at question time, for any range; a dataset known
under several names is walked as one (`fll.render.Names`). Linear in the
edges met; no cap below `MAX_HOPS` hops and `MAX_FIELDS` fields. This package
must never write to the store and never depend on the server.

Modules: `lineage` (a range's field edges both ways, merged over its sets),
`propagation` (where a tag reaches), `lineage_diff` (the diff); every name
is imported from ``fll.govern`` itself.
"""
from __future__ import annotations

from .lineage import MAX_HOPS, Key, RangeLineage, SetEdges, fid, key_of
from .lineage_diff import (Neighbourhood, dataset_roots, diff, diff_text, neighbourhood,
                           parse_span)
from .propagation import MAX_FIELDS, Reach, carries, dataset_tags, propagate, tag_origins

__all__ = ["MAX_FIELDS", "MAX_HOPS", "Key", "Neighbourhood", "RangeLineage", "Reach",
           "SetEdges", "carries", "dataset_roots", "dataset_tags", "diff", "diff_text",
           "fid", "key_of", "neighbourhood", "parse_span", "propagate", "tag_origins"]
