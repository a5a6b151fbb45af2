"""A field's neighbours and inputs, read under every name of its dataset.

The pieces the field walks share (`fll.server.views`' CDAP answers,
`fll.server.column_graph`'s Marquez graph): one hop of a walk, and a field's
source fields with their transformation tags merged over the operation sets
of a time range. A dataset is read under every name it has (`fll.render.Names`)
and answered under one. Merges are kept per list of sets when the store is a
request's `fll.store.reads.ReadView`.

This module must never write to the store, and never change an answer it
hands out (they are shared between requests).
"""
from __future__ import annotations

from typing import Callable

from ..model import EndPointField, Transformation
from ..render import EdgeTags, Names, edge_kind
from ..store.lineage import LineageStore


def field_step(store: LineageStore, names: Names, direction: str
               ) -> Callable[[EndPointField, int, int], set[EndPointField]]:
    """One hop of a walk, reading the field under every name of its dataset and
    answering each field under one name."""
    ask = store.incoming if direction == "incoming" else store.outgoing

    def step(f: EndPointField, start: int, end: int) -> set[EndPointField]:
        found: set[EndPointField] = set()
        for ep in names.equivalents(f.endpoint):
            found.update(names.field(g) for g in ask(EndPointField(ep, f.field), start, end))
        found.discard(f)
        return found
    return step


def set_inputs(store: LineageStore, checksum: str, ef: EndPointField
               ) -> dict[EndPointField, list[Transformation]]:
    """``ef``'s source fields and their tags in one operation set, from its
    stored summaries (composed at record time: nothing is rebuilt per read;
    kept with the decoded set, so bounded by the store's set cache). Shared:
    never change it."""
    return store.summaries([checksum])[checksum].incoming_tags(ef)


def merged_inputs(store: LineageStore, ef: EndPointField, start: int, end: int,
                  drop_indirect: bool = False) -> dict[EndPointField, list[Transformation]]:
    """``ef``'s source fields (as recorded, under the names the sets give them)
    with their tags merged over the range's operation sets, in set order; with
    ``drop_indirect`` an input only INDIRECT in a set is left out of that set.
    Kept per list of sets when the store is a request's `ReadView` (the list is
    the key, so a write that adds a set is a new key): a whole-history question
    over a dataset with a hundred sets merges them once, not per request.
    The answer is shared: never change it."""
    sets = tuple(store.checksums(ef.endpoint, start, end, "incoming"))
    if len(sets) == 1 and not drop_indirect:
        return set_inputs(store, sets[0], ef)  # one set: its own answer, not a copy

    def compute() -> dict[EndPointField, list[Transformation]]:
        merged: dict[EndPointField, list[Transformation]] = {}
        for c in sets:
            for src, tags in set_inputs(store, c, ef).items():
                if drop_indirect and edge_kind(tags) == "INDIRECT":
                    continue
                cur = merged.setdefault(src, [])
                cur.extend(t for t in tags if t not in cur)
        return merged
    merges = getattr(store, "merges", None)
    if merges is None:
        return compute()
    key = ("inputs", ef.endpoint.namespace, ef.endpoint.name, ef.field, drop_indirect, sets)
    return merges.get(key, compute)


def named_inputs(store: LineageStore, names: Names, f: EndPointField, start: int, end: int,
                 drop_indirect: bool = False) -> dict[EndPointField, list[Transformation]]:
    """``f``'s inputs over every name of its dataset, each source under one name,
    tags merged in the order the sets give them (a fresh dict)."""
    merged: dict[EndPointField, list[Transformation]] = {}
    kept = getattr(store, "merges", None) is not None
    for ep in names.equivalents(f.endpoint):
        here = EndPointField(ep, f.field)
        raw = merged_inputs(store, here, start, end, drop_indirect) if kept else None
        if raw is None or any(names.field(src) != src for src in raw):
            # set by set (without a request's ReadView, or when two sources are one
            # dataset under two names: their tags must interleave set by set)
            for c in store.checksums(ep, start, end, "incoming"):
                for src, tags in set_inputs(store, c, here).items():
                    if drop_indirect and edge_kind(tags) == "INDIRECT":
                        continue
                    cur = merged.setdefault(names.field(src), [])
                    cur.extend(t for t in tags if t not in cur)
            continue
        for src, tags in raw.items():
            cur = merged.setdefault(names.field(src), [])
            cur.extend(t for t in tags if t not in cur)
    return merged


class MergedTags(EdgeTags):
    """`EdgeTags` whose per-destination merge comes from `named_inputs` (kept
    per list of sets across requests) when the store is a request's view."""

    def into(self, dest: EndPointField) -> dict[EndPointField, list[Transformation]]:
        if getattr(self.store, "merges", None) is None:
            return super().into(dest)
        hit = self._into.get(dest)
        if hit is None:
            hit = self._into[dest] = named_inputs(self.store, self.names, dest,
                                                  self.start_ms, self.end_ms)
        return hit
