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
edges met; no cap below `MAX_HOPS` hops and `MAX_FIELDS` fields. This module
must never write to the store and never depend on the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Callable, Iterable

from .errors import BadRequest, NotFound
from .model import EndPoint, EndPointField, Transformation
from .render import Names
from .store.tags import Assignment, TagDef, Tags, tag_name

MAX_HOPS = 100
MAX_FIELDS = 1_000_000

_CARRIED = ("IDENTITY", "TRANSFORMATION", "")

#: a field inside this module: (namespace, dataset, field), hashed and compared
#: as plain strings (a walk of 100k fields hashes its keys millions of times)
Key = tuple[str, str, str]
#: an edge's tags, one shared tuple per distinct list in a set
Tags_ = tuple[Transformation, ...]
_Edges = dict[Key, Tags_]

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

    __slots__ = ("_s", "_fields", "_maps", "_shared", "endpoints")

    def __init__(self, summaries: Any):
        self._s = summaries
        self._fields: dict[Key, EndPointField] = {key_of(f): f for f in summaries.fields}
        self._maps: tuple[dict[Key, _Edges | None], dict[Key, _Edges | None]] = ({}, {})
        self._shared: dict[Tags_, Tags_] = {}
        self.endpoints = frozenset((k[0], k[1]) for k in self._fields)

    def get(self, k: Key, downstream: bool) -> _Edges | None:
        """``k``'s destinations (downstream) or sources in this set, or None."""
        maps = self._maps[downstream]
        try:
            return maps[k]
        except KeyError:
            pass
        f = self._fields.get(k)
        found: _Edges | None = None
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
        self._merged: dict[tuple[int, ...], tuple[tuple[_Edges, ...], _Edges]] = \
            {} if merged is None else merged
        # per direction (True: downstream): a dataset's sets, a field's edges
        self._sets: dict[bool, dict[tuple[str, str], list[tuple[SetEdges, bool]]]] = \
            {True: {}, False: {}}
        self._memo: dict[bool, dict[Key, _Edges]] = {True: {}, False: {}}
        self._canon: dict[tuple[str, str], tuple[str, str]] = {}
        self._equiv: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
        self._own: dict[str, SetEdges] = {}

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

    def edges(self, k: Key, downstream: bool) -> _Edges:
        """``k``'s destinations (downstream) or sources, each under one name, with
        the tags of the edge (``()``: untagged). Shared: never change it."""
        memo = self._memo[downstream]
        out: _Edges
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


    def _merge(self, k: Key, parts: list[_Edges], renamed: bool) -> _Edges:
        """Several sets' maps of one field as one, tags merged, under one name each."""
        out: _Edges = {}
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


# -- propagation ---------------------------------------------------------------------

def carries(tags: Iterable[Transformation], passes: frozenset[str] = frozenset()
            ) -> tuple[bool, list[Transformation]]:
    """Whether an edge tagged ``tags`` carries a classification whose policy lets it
    pass ``passes`` (AGGREGATION, MASKING), and, when it does not, the DIRECT
    tags that broke it (none: the edge is INDIRECT only, which carries nothing
    and stops nothing)."""
    tags = list(tags)
    if not tags:
        return True, []  # a producer that says nothing: the value may flow
    broke = []
    for t in tags:
        if t.type != "DIRECT":
            continue
        subtype_ok = t.subtype in _CARRIED or (t.subtype == "AGGREGATION"
                                               and "AGGREGATION" in passes)
        if subtype_ok and (not t.masking or "MASKING" in passes):
            return True, []
        broke.append(t)
    return False, broke


@dataclass
class Reach:
    """Where one tag reaches over one range (see the module doc); fields are
    `Key` tuples."""

    tag: TagDef
    start: int
    end: int
    origins: list[Key]
    #: carried field -> the field it was first reached from (None: an origin)
    parent: dict[Key, Key | None] = dc_field(default_factory=dict)
    hops: dict[Key, int] = dc_field(default_factory=dict)
    #: carried field -> the origins whose tag reaches it
    from_origins: dict[Key, frozenset[Key]] = dc_field(default_factory=dict)
    #: field reached only through breaking edges -> (from field, breaking tags)
    stopped: dict[Key, tuple[Key, list[Transformation]]] = dc_field(default_factory=dict)
    truncated: bool = False
    #: carried fields in the order they were reached (origins first)
    order: list[Key] = dc_field(default_factory=list)

    def path(self, f: Key) -> list[Key]:
        out = [f]
        at = self.parent.get(f)
        while at is not None:
            out.append(at)
            at = self.parent.get(at)
        return out[::-1]

    def field_json(self, f: Key) -> dict:
        if f in self.parent:
            return {"field": fid(f), "direct": self.parent[f] is None,
                    "origins": sorted(fid(o) for o in self.from_origins.get(f, ())),
                    "path": [fid(p) for p in self.path(f)], "stopped": False,
                    "hops": self.hops[f]}
        src, broke = self.stopped[f]
        return {"field": fid(f), "direct": False,
                "origins": sorted(fid(o) for o in self.from_origins.get(src, ())),
                "path": [fid(p) for p in self.path(src)] + [fid(f)],
                "stopped": True, "stoppedAt": fid(src),
                "transformations": [_tag_json(t) for t in broke]}

    def fields_json(self) -> list[dict]:
        """Carried fields, then stopped ones, each sorted by name (as `field_json`,
        built in one pass: each path extends its parent's, each origin list is
        made once per distinct set of origins)."""
        ids: dict[Key, str] = {f: fid(f) for f in self.parent}
        paths: dict[Key, list[str]] = {}
        for f in self.order:  # parents before children
            up = self.parent[f]
            paths[f] = [ids[f]] if up is None else paths[up] + [ids[f]]
        lists: dict[int, tuple[frozenset, list[str]]] = {}

        def origins(f: Key) -> list[str]:
            found = self.from_origins.get(f, frozenset())
            hit = lists.get(id(found))
            if hit is None or hit[0] is not found:
                hit = lists[id(found)] = (found, sorted(fid(o) for o in found))
            return hit[1]
        out = [{"field": ids[f], "direct": self.parent[f] is None, "origins": origins(f),
                "path": paths[f], "stopped": False, "hops": self.hops[f]}
               for f in sorted(self.parent)]
        for f in sorted(self.stopped):
            src, broke = self.stopped[f]
            out.append({"field": fid(f), "direct": False, "origins": origins(src),
                        "path": paths[src] + [fid(f)], "stopped": True, "stoppedAt": ids[src],
                        "transformations": [_tag_json(t) for t in broke]})
        return out

    def to_dict(self) -> dict:
        return {"tag": self.tag.to_dict(), "start": self.start // 1000,
                "end": self.end // 1000, "fields": self.fields_json(),
                "truncated": self.truncated}


def _tag_json(t: Transformation) -> dict:
    return {"type": t.type, "subtype": t.subtype, "masking": t.masking}


def tag_origins(store: Any, tag: str) -> tuple[TagDef, list[Assignment]]:
    """The tag's definition and where people put it; NotFound for an unknown tag."""
    tags = Tags(store.table)
    found = tags.get(tag)
    if found is None:
        raise NotFound(f"tag {tag_name(tag)!r} is unknown (fll tag list shows the tags)")
    return found, tags.assignments(found.name)


def propagate(store: Any, tag: str, start: int, end: int, *, max_hops: int = MAX_HOPS,
              max_fields: int = MAX_FIELDS, lineage: RangeLineage | None = None) -> Reach:
    """Where ``tag`` reaches through the lineage of ``[start, end)``."""
    lineage = lineage or RangeLineage(store, start, end)
    tdef, placed = tag_origins(store, tag)
    origins = sorted({lineage.field((a.namespace, a.name, a.field)) for a in placed if a.field})
    reach = Reach(tdef, start, end, origins)
    parent, hops = reach.parent, reach.hops
    for o in origins:
        parent[o] = None
        hops[o] = 0
    order = reach.order
    order.extend(origins)
    passes = tdef.passes
    carried_by: dict[Key, list[Key]] = {}
    stopped: dict[Key, tuple[Key, list[Transformation]]] = {}
    # the verdict per distinct tag tuple, by identity (tuples are shared per set);
    # the tuple is kept beside its verdict so an id is never reused meanwhile
    verdicts: dict[int, tuple[Tags_, bool, list[Transformation]]] = {}
    edges = lineage.edges
    frontier = list(origins)
    hop = 0
    while frontier:
        if hop >= max_hops or len(parent) >= max_fields:
            reach.truncated = True
            break
        hop += 1
        nxt = []
        for f in frontier:
            outs = []
            for g, tags in edges(f, True).items():
                v = verdicts.get(id(tags))
                if v is None or v[0] is not tags:
                    v = verdicts[id(tags)] = (tags, *carries(tags, passes))
                if v[1]:
                    outs.append(g)
                    if g not in parent:
                        parent[g] = f
                        hops[g] = hop
                        nxt.append(g)
                        order.append(g)
                elif v[2] and g not in stopped:
                    stopped[g] = (f, v[2])
            if outs:
                carried_by[f] = outs
        frontier = nxt
    reach.stopped = {g: v for g, v in stopped.items() if g not in parent}
    reach.from_origins = _origins(origins, carried_by)
    return reach


def _origins(origins: list[Key], carried_by: dict[Key, list[Key]]
             ) -> dict[Key, frozenset[Key]]:
    """Per carried field, every origin with a carrying path to it: sets pushed
    along the carrying edges until nothing grows (a field reached by one origin
    costs one visit; cycles end when their sets stop growing)."""
    if len(origins) == 1:  # every carried field has the one origin
        return dict.fromkeys(_closure(origins[0], carried_by), frozenset(origins))
    shared: dict[frozenset, frozenset] = {}
    got: dict[Key, frozenset[Key]] = {}
    for o in origins:
        got[o] = shared.setdefault(frozenset((o,)), frozenset((o,)))
    stack = list(reversed(origins))
    while stack:
        f = stack.pop()
        mine = got[f]
        for g in carried_by.get(f, ()):
            theirs = got.get(g)
            if theirs is None:
                got[g] = mine
                stack.append(g)
            elif theirs is not mine and not mine <= theirs:
                union = theirs | mine
                got[g] = shared.setdefault(union, union)
                stack.append(g)
    return got


def _closure(origin: Key, carried_by: dict[Key, list[Key]]) -> set[Key]:
    seen = {origin}
    stack = [origin]
    while stack:
        for g in carried_by.get(stack.pop(), ()):
            if g not in seen:
                seen.add(g)
                stack.append(g)
    return seen


def dataset_tags(store: Any, namespace: str, name: str, start: int, end: int,
                 ) -> dict[str, Any]:
    """A dataset's tags for its Marquez JSON: ``tags`` (put on the dataset) and,
    per field, ``tags`` put on it and ``propagatedTags`` reaching it through the
    lineage of ``[start, end)`` (``{"name", "origins"}``), told apart. Asked
    under an alias, answered for the dataset it stands for."""
    names = Names(store)
    ep = names.canonical(EndPoint(namespace, name))
    tags = Tags(store.table)
    mine = [a for e in names.equivalents(ep) for a in tags.of_dataset(e.namespace, e.name)]
    fields: dict[str, dict[str, list]] = {}
    for a in mine:
        if a.field:
            entry = fields.setdefault(a.field, {"tags": [], "propagatedTags": []})
            if a.tag not in entry["tags"]:
                entry["tags"].append(a.tag)
    placed = {a.tag for a in tags.assignments() if a.field}
    lineage = RangeLineage(store, start, end, names)
    here = (ep.namespace, ep.name)
    for tag in sorted(placed):
        reach = propagate(store, tag, start, end, lineage=lineage)
        for f, came_from in reach.parent.items():
            if (f[0], f[1]) != here or came_from is None:
                continue
            entry = fields.setdefault(f[2], {"tags": [], "propagatedTags": []})
            if tag in entry["tags"]:
                continue
            entry["propagatedTags"].append(
                {"name": tag, "origins": sorted(fid(o) for o in reach.from_origins[f])})
    for entry in fields.values():
        entry["tags"].sort()
    return {"namespace": ep.namespace, "name": ep.name,
            "tags": sorted({a.tag for a in mine if not a.field}), "fields": fields}


# -- diff ----------------------------------------------------------------------------

class Neighbourhood:
    """The edges within ``depth`` hops up and down of some roots, as whole maps:
    ``ins[f]`` every edge into a field the upward walk expanded, ``outs[f]``
    every edge out of one the downward walk expanded (a hop takes all of a
    field's edges, so no edge is copied one by one)."""

    def __init__(self, lineage: RangeLineage, roots: Iterable[EndPointField], depth: int,
                 skip_last: Callable[[Key, bool], bool] | None = None):
        """``skip_last(field, downstream)``: a field of the last hop whose edges are
        not wanted (a diff: those the other range has alike), so not read."""
        self.ins: dict[Key, _Edges] = {}
        self.outs: dict[Key, _Edges] = {}
        keys = [lineage.field(key_of(r)) for r in roots]
        for downstream, kept in ((False, self.ins), (True, self.outs)):
            seen = set(keys)
            frontier = list(keys)
            for hop in range(depth):
                nxt = []
                last = hop == depth - 1
                for f in frontier:
                    if last and skip_last is not None and skip_last(f, downstream):
                        continue
                    found = lineage.edges(f, downstream)
                    if found:
                        kept[f] = found
                        if last:
                            continue  # no hop after this one: no frontier to build
                        for g in found:
                            if g not in seen:
                                seen.add(g)
                                nxt.append(g)
                frontier = nxt
                if not frontier:
                    break

    def edges(self) -> dict[tuple[Key, Key], Tags_]:
        """Every edge (source, destination) once, with its tags."""
        out = {(g, f): t for f, m in self.ins.items() for g, t in m.items()}
        out.update(((f, g), t) for f, m in self.outs.items() for g, t in m.items())
        return out

    def __len__(self) -> int:
        return len(self.edges())


def neighbourhood(lineage: RangeLineage, roots: Iterable[EndPointField], depth: int
                  ) -> dict[tuple[Key, Key], Tags_]:
    """Every edge (source, destination) within ``depth`` hops up and down of the roots."""
    return Neighbourhood(lineage, roots, depth).edges()


def dataset_roots(store: Any, ep: EndPoint, ranges: Iterable[tuple[int, int]]
                  ) -> list[EndPointField]:
    """Every field of a dataset (under each of its names) with lineage in any of
    ``ranges``, under its one name: the roots of a dataset's diff."""
    names = Names(store)
    ep = names.canonical(ep)
    found = {f for e in names.equivalents(ep) for s, t in ranges
             for f in store.fields(e, s, t)}
    return [EndPointField(ep, f) for f in sorted(found)]


_TAG_SETS: dict[Tags_, tuple] = {}


def _tag_set(tags: Tags_) -> tuple[tuple[str, str, bool], ...]:
    """An edge's tags as compared and answered: (type, subtype, masking), sorted."""
    hit = _TAG_SETS.get(tags)
    if hit is None:
        if len(_TAG_SETS) > 4096:
            _TAG_SETS.clear()
        hit = _TAG_SETS[tags] = tuple(sorted({(t.type, t.subtype, t.masking) for t in tags}))
    return hit


def _json_tags(tags: tuple[tuple[str, str, bool], ...]) -> list[dict]:
    return [{"type": a, "subtype": b, "masking": m} for a, b, m in tags]


def _edge_json(edge: tuple[Key, Key], tags: tuple[tuple[str, str, bool], ...]) -> dict:
    return {"source": fid(edge[0]), "destination": fid(edge[1]),
            "transformations": _json_tags(tags)}


def diff(store: Any, roots: list[EndPointField], before: tuple[int, int],
         after: tuple[int, int], depth: int = 1) -> dict:
    """``{"added", "removed", "changed"}`` between the two ranges (module doc).

    Compared map by map: a field's whole in- (or out-) map in one range
    against the same field's whole map in the other (read there when that
    walk did not reach the field), so a field whose edges come from the same
    operation sets in both ranges is one identity check."""
    if depth < 1 or depth > MAX_HOPS:
        raise BadRequest(f"depth must be between 1 and {MAX_HOPS}, got {depth}", "depth")
    names = Names(store)
    merged: dict = {}
    sides = (RangeLineage(store, *before, names, merged),
             RangeLineage(store, *after, names, merged))
    alike: dict[tuple[str, str, bool], bool] = {}

    def same_sets(f: Key, downstream: bool) -> bool:
        """Whether f's dataset has its edges from the same sets in both ranges: its
        edges are then the same, and the last hop need not read them."""
        key = (f[0], f[1], downstream)
        hit = alike.get(key)
        if hit is None:
            hit = alike[key] = sides[0].sets_key(key[:2], downstream) == \
                sides[1].sets_key(key[:2], downstream)
        return hit

    walks = (Neighbourhood(sides[0], roots, depth, same_sets),
             Neighbourhood(sides[1], roots, depth, same_sets))
    added: dict[tuple[Key, Key], Tags_] = {}
    removed: dict[tuple[Key, Key], Tags_] = {}
    changed: dict[tuple[Key, Key], tuple[Tags_, Tags_]] = {}
    for downstream in (False, True):
        old_maps = walks[0].outs if downstream else walks[0].ins
        new_maps = walks[1].outs if downstream else walks[1].ins
        for f in old_maps.keys() | new_maps.keys():
            old = old_maps.get(f)
            if old is None:
                old = sides[0].edges(f, downstream)
            new = new_maps.get(f)
            if new is None:
                new = sides[1].edges(f, downstream)
            if old is new:
                continue  # the same sets' edges in both ranges
            for g, tags in new.items():
                edge = (f, g) if downstream else (g, f)
                was = old.get(g)
                if was is None:
                    added[edge] = tags
                elif was is not tags and _tag_set(was) != _tag_set(tags):
                    changed[edge] = (was, tags)
            for g, tags in old.items():
                if g not in new:
                    removed[(f, g) if downstream else (g, f)] = tags
    return {"added": [_edge_json(e, _tag_set(added[e])) for e in sorted(added)],
            "removed": [_edge_json(e, _tag_set(removed[e])) for e in sorted(removed)],
            "changed": [{"edge": {"source": fid(e[0]), "destination": fid(e[1])},
                         "before": _json_tags(_tag_set(changed[e][0])),
                         "after": _json_tags(_tag_set(changed[e][1]))}
                        for e in sorted(changed)]}


def diff_text(answer: dict) -> str:
    """The diff for people: ``+`` added, ``-`` removed, ``~`` changed edges."""
    def tags(items: list[dict]) -> str:
        shown = ["/".join(filter(None, (t["type"], t["subtype"])))
                 + ("+masked" if t["masking"] else "") for t in items]
        return "[" + ", ".join(shown) + "]" if shown else "[untagged]"

    lines = []
    for e in answer["added"]:
        lines.append(f"+ {e['source']} -> {e['destination']} {tags(e['transformations'])}")
    for e in answer["removed"]:
        lines.append(f"- {e['source']} -> {e['destination']} {tags(e['transformations'])}")
    for c in answer["changed"]:
        lines.append(f"~ {c['edge']['source']} -> {c['edge']['destination']} "
                     f"{tags(c['before'])} => {tags(c['after'])}")
    n = (len(answer["added"]), len(answer["removed"]), len(answer["changed"]))
    lines.append(f"{n[0]} added, {n[1]} removed, {n[2]} changed")
    return "\n".join(lines) + "\n"


def parse_span(text: str | None, parameter: str, *, separator: str = "..") -> tuple[int, int]:
    """``START..END`` (CLI) or ``START,END`` (REST) as ``[start, end)`` ms; each end
    a time expression as everywhere (epoch seconds, now-7d, ISO 8601 at the CLI)."""
    from .timerange import now_ms, parse_time

    if not text or separator not in text:
        raise BadRequest(f"{parameter} must look like START{separator}END (e.g. "
                         f"now-2d{separator}now-1d), got {text!r}", parameter)
    a, _, b = text.partition(separator)
    clock = now_ms()
    s = parse_time(a, parameter, now=clock, default=0)
    e = parse_time(b, parameter, now=clock, default=clock + 1)
    if s > e:
        raise BadRequest(f"{parameter}: start must not be after end, got {text!r}", parameter)
    return s, e
