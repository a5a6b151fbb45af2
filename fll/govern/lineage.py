"""Each field's lineage over one time range, as governance walks it: the
edges of a field both ways with their transformation tags merged over the
range's operation sets, each dataset under one name (`fll.render.Names`).

Read from the summaries stored with each operation set (tags composed at
record time); each set's edges are kept across requests when the store is a
request's `ReadView` (a set never changes under its checksum). This module
never writes to the store.
"""
from __future__ import annotations

from typing import Any, Iterable

from ..model import EndPoint, EndPointField, Transformation
from ..render import Names

#: no walk goes further than this many hops
MAX_HOPS = 100

#: a field inside this package: (namespace, dataset, field), hashed and compared
#: as plain strings (a walk of 100k fields hashes its keys millions of times)
Key = tuple[str, str, str]
#: an edge's tags, one shared tuple per distinct list in a set
Tags_ = tuple[Transformation, ...]
Edges = dict[Key, Tags_]


def key_of(f: EndPointField) -> Key:
    return (f.endpoint.namespace, f.endpoint.name, f.field)


def fid(k: Key) -> str:
    """``ns:dataset:field``, as every answer names a field."""
    return f"{k[0]}:{k[1]}:{k[2]}"


class SetEdges:
    """One operation set's field edges both ways, with their tags (composed along
    every path of the set when it was recorded, read from its summaries). Each
    field's map is built when first asked and kept (so a wide all-to-all set
    costs the fields a question reaches, not its n x n edges); kept by
    checksum across requests (a set never changes under it). Shared between
    threads: two threads building one map build equal ones."""

    __slots__ = ("_s", "_fields", "_maps", "_shared", "endpoints", "_written")

    def __init__(self, summaries: Any):
        self._s = summaries
        self._fields: dict[Key, EndPointField] = {key_of(f): f for f in summaries.fields}
        self._maps: tuple[dict[Key, Edges | None], dict[Key, Edges | None]] = ({}, {})
        self._shared: dict[Tags_, Tags_] = {}
        self.endpoints = frozenset((k[0], k[1]) for k in self._fields)
        self._written: frozenset[tuple[str, str]] | None = None

    def written(self) -> frozenset[tuple[str, str]]:
        """The datasets this set writes (the destinations of every edge)."""
        if self._written is None:
            self._written = frozenset((f.endpoint.namespace, f.endpoint.name)
                                      for f in self._s.destination_fields)
        return self._written

    def get(self, k: Key, downstream: bool) -> Edges | None:
        """``k``'s destinations (downstream) or sources in this set, or None."""
        maps = self._maps[downstream]
        try:
            return maps[k]
        except KeyError:
            pass
        f = self._fields.get(k)
        found: Edges | None = None
        if f is not None:
            got = self._s.outgoing_tags(f) if downstream else self._s.incoming_tags(f)
            if got:
                shared = self._shared
                found = {}
                for g, tags in got.items():
                    t = tuple(tags)
                    found[key_of(g)] = shared.setdefault(t, t)
        maps[k] = found
        return found


class RangeLineage:
    """Each field's sources and destinations over ``[start, end)``, with the
    transformation tags of every edge merged over the range's operation sets
    and the names of a dataset (aliases). Memoised per dataset (its sets)
    and per field (each field asked once per direction); each set's edges
    kept across requests when the store is a request's `ReadView`."""

    def __init__(self, store: Any, start: int, end: int, names: Names | None = None,
                 merged: dict | None = None):
        """``merged``: maps merged from several sets, shared with another range's
        `RangeLineage` (a diff's two sides), so a field whose edges come from
        the same sets in both ranges gets the same map in both."""
        self.store, self.start, self.end = store, start, end
        self.names = names or Names(store)
        self._merged: dict[tuple[int, ...], tuple[tuple[Edges, ...], Edges]] = \
            {} if merged is None else merged
        # per direction (True: downstream): a dataset's sets, a field's edges
        self._sets: dict[bool, dict[tuple[str, str], list[tuple[SetEdges, bool]]]] = \
            {True: {}, False: {}}
        self._memo: dict[bool, dict[Key, Edges]] = {True: {}, False: {}}
        self._canon: dict[tuple[str, str], tuple[str, str]] = {}
        self._equiv: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
        self._own: dict[str, SetEdges] = {}
        self._plans: dict[tuple[str, str], tuple[Any, ...]] = {}

    def canonical(self, ds: tuple[str, str]) -> tuple[str, str]:
        hit = self._canon.get(ds)
        if hit is None:
            c = self.names.canonical(EndPoint(*ds))
            hit = self._canon[ds] = (c.namespace, c.name)
        return hit

    def field(self, k: Key) -> Key:
        """``k`` under its dataset's one name."""
        c = self.canonical((k[0], k[1]))
        return k if c == (k[0], k[1]) else (c[0], c[1], k[2])

    def _equivalents(self, ds: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        hit = self._equiv.get(ds)
        if hit is None:
            hit = self._equiv[ds] = tuple((e.namespace, e.name)
                                          for e in self.names.equivalents(EndPoint(*ds)))
        return hit

    def _set_edges(self, checksum: str, summaries: Any) -> SetEdges:
        merges = getattr(self.store, "merges", None)
        if merges is None:
            hit = self._own.get(checksum)
            if hit is None:
                hit = self._own[checksum] = SetEdges(summaries)
            return hit
        return merges.get(("set-edges", checksum), lambda: SetEdges(summaries))

    def sets_key(self, ds: tuple[str, str], downstream: bool) -> tuple[tuple[str, ...], ...]:
        """The operation sets (checksums) a dataset's fields have edges from, under
        each of its names: equal in two ranges, its fields' edges are equal."""
        direction = "outgoing" if downstream else "incoming"
        return tuple(tuple(self.store.checksums(EndPoint(*n), self.start, self.end, direction))
                     for n in self._equivalents(ds))

    def read_ahead(self, datasets: Iterable[tuple[str, str]], downstream: bool = True) -> None:
        """Read what a hop of a walk will ask of ``datasets`` at once when the
        store is a request's `ReadView` (`ReadView.prefetch`): their names and
        sets in the range, then the names and sets of the datasets those sets
        write or read, so a hop costs a bounded number of store round trips
        whatever the number of datasets it touches. Only reads ahead."""
        prefetch = getattr(self.store, "prefetch", None)
        todo = [ds for ds in dict.fromkeys(datasets) if ds not in self._sets[downstream]]
        if prefetch is None or not todo:
            return
        direction = "outgoing" if downstream else "incoming"
        prefetch([EndPoint(*ds) for ds in todo], self.start, self.end, direction)
        sets = {c for ds in todo
                for c in self.store.checksums(EndPoint(*ds), self.start, self.end, direction)}
        got = self.store.summaries(sets) if sets else {}
        reached = {e for c in sets for e in self._set_edges(c, got[c]).endpoints}
        prefetch([EndPoint(*e) for e in reached], self.start, self.end, direction)

    def _sets_of(self, ds: tuple[str, str], downstream: bool) -> list[tuple[SetEdges, bool]]:
        hit = self._sets[downstream].get(ds)
        if hit is None:
            ep = EndPoint(*ds)
            sets = self.store.checksums(ep, self.start, self.end,
                                        "outgoing" if downstream else "incoming")
            got = self.store.summaries(sets) if sets else {}
            hit = []
            for c in sets:
                edges = self._set_edges(c, got[c])
                # whether any endpoint of the set is known by another name
                renamed = any(self.canonical(e) != e for e in edges.endpoints)
                hit.append((edges, renamed))
            self._sets[downstream][ds] = hit
        return hit

    def edges(self, k: Key, downstream: bool) -> Edges:
        """``k``'s destinations (downstream) or sources, each under one name, with
        the tags of the edge (``()``: untagged). Shared: never change it."""
        memo = self._memo[downstream]
        out: Edges
        hit = memo.get(k)
        if hit is not None:
            return hit
        ds = (k[0], k[1])
        names = self._equiv.get(ds)
        if names is None:
            names = self._equivalents(ds)
        sets = self._sets[downstream].get(ds)
        if sets is None:
            sets = self._sets_of(ds, downstream)
        if len(names) == 1 and not sets:
            out = memo[k] = {}
            return out
        if len(names) == 1 and len(sets) == 1 and not sets[0][1]:
            # the common case: one name, one set, no renamed endpoint: the set's own map
            got = sets[0][0].get(k, downstream)
            if got is None:
                out = {}
            elif k in got:  # a set that reads and writes one field
                out = {g: t for g, t in got.items() if g != k}
            else:
                out = got
            memo[k] = out
            return out
        parts = []
        renamed = False
        for name in names:
            here = k if name == ds else (name[0], name[1], k[2])
            for edges, other_names in self._sets_of(name, downstream):
                got = edges.get(here, downstream)
                if got:
                    parts.append(got)
                    renamed = renamed or other_names
        if len(parts) == 1 and not renamed:
            out = parts[0] if k not in parts[0] else \
                {g: t for g, t in parts[0].items() if g != k}
        else:
            # maps of the same sets merged before (the other side of a diff) are
            # reused: the identity of the parts is the key, checked on a hit
            ident = None if renamed else tuple(map(id, parts))
            prior = None if ident is None else self._merged.get(ident)
            if prior is not None and all(a is b for a, b in zip(prior[0], parts, strict=True)):
                out = prior[1]
            else:
                out = self._merge(k, parts, renamed)
                if ident is not None:
                    self._merged[ident] = (tuple(parts), out)
        memo[k] = out
        return out


    def downstream_plan(self, ds: tuple[str, str]) -> tuple[Any, ...]:
        """Where the destinations of ``ds``'s fields come from, for a walk that asks
        many of them: each an object whose ``get(field, True)`` is a map as
        `edges` answers, the field's map being their concatenation (the maps
        of one field are disjoint) in `edges`'s order. ``()``: no field of
        ``ds`` has a destination. The sets themselves when the dataset has one
        name, no set names an aliased dataset and no two sets (nor ``ds``)
        share a written dataset, so no map need be merged or renamed; else
        `edges` itself, merging per field."""
        hit = self._plans.get(ds)
        if hit is None:
            names = self._equivalents(ds)
            sets = self._sets_of(ds, True)
            if len(names) == 1 and not any(r for _, r in sets):
                seen = {ds}
                plain = True
                for edges, _ in sets:
                    wrote = edges.written()
                    if not seen.isdisjoint(wrote):
                        plain = False
                        break
                    seen.update(wrote)
                if plain:
                    hit = self._plans[ds] = tuple(e for e, _ in sets)
                    return hit
            hit = self._plans[ds] = (_Downstream(self),)
        return hit

    def _merge(self, k: Key, parts: list[Edges], renamed: bool) -> Edges:
        """Several sets' maps of one field as one, tags merged, under one name each."""
        out: Edges = {}
        field = self.field
        for got in parts:
            if not renamed and out.keys().isdisjoint(got):
                out.update(got)  # sets writing other fields: no tags to merge
                continue
            for g, tags in got.items():
                if renamed:
                    g = field(g)
                cur = out.get(g)
                if cur is None:
                    out[g] = tags
                elif cur is not tags:
                    extra = tuple(t for t in tags if t not in cur)
                    if extra:
                        out[g] = cur + extra
        out.pop(k, None)
        return out




class _Downstream:
    """A range's merged destination maps, as one part of a `RangeLineage.downstream_plan`."""

    __slots__ = ("_lineage",)

    def __init__(self, lineage: RangeLineage):
        self._lineage = lineage

    def get(self, k: Key, downstream: bool) -> Edges:
        return self._lineage.edges(k, downstream)
