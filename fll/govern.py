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
from typing import Any, Iterable

from .errors import BadRequest, NotFound
from .model import DROPPED, EndPoint, EndPointField, Transformation
from .render import Names, field_id
from .store.tags import Assignment, TagDef, Tags, tag_name

MAX_HOPS = 100
MAX_FIELDS = 1_000_000

_CARRIED = ("IDENTITY", "TRANSFORMATION", "")

_Tagged = dict[EndPointField, list[Transformation]]


# -- the lineage of one range, one field at a time ----------------------------------

class RangeLineage:
    """Each field's sources and destinations over ``[start, end)``, with the
    transformation tags of every edge merged over the range's operation sets
    and the names of a dataset. Memoised per dataset (its sets, their
    summaries) and per field (each field asked once per direction)."""

    def __init__(self, store: Any, start: int, end: int, names: Names | None = None):
        self.store, self.start, self.end = store, start, end
        self.names = names or Names(store)
        self._sets: dict[tuple[EndPoint, str], list] = {}
        self._memo: dict[tuple[EndPointField, bool], _Tagged] = {}

    def _summaries(self, ep: EndPoint, direction: str) -> list:
        key = (ep, direction)
        hit = self._sets.get(key)
        if hit is None:
            sets = self.store.checksums(ep, self.start, self.end, direction)
            got = self.store.summaries(sets) if sets else {}
            hit = self._sets[key] = [got[c] for c in sets]
        return hit

    def edges(self, f: EndPointField, downstream: bool) -> _Tagged:
        """``f``'s destinations (downstream) or sources, each under one name, with
        the tags of the edge (``[]``: untagged). Shared: never change it."""
        key = (f, downstream)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        names = self.names
        parts = []
        for ep in names.equivalents(f.endpoint):
            here = f if ep == f.endpoint else EndPointField(ep, f.field)
            for s in self._summaries(ep, "outgoing" if downstream else "incoming"):
                got = s.outgoing_tags(here) if downstream else s.incoming_tags(here)
                if got:
                    parts.append(got)
        merged: _Tagged = parts[0] if len(parts) == 1 else {}
        if len(parts) > 1:
            for got in parts:
                for g, tags in got.items():
                    cur = merged.setdefault(g, [])
                    cur.extend(t for t in tags if t not in cur)
        out: _Tagged = {}
        for g, tags in merged.items():
            if g is DROPPED or g == DROPPED:
                continue
            g = names.field(g)
            if g == f:
                continue
            cur = out.get(g)
            if cur is None:
                out[g] = tags
            else:
                out[g] = cur + [t for t in tags if t not in cur]
        self._memo[key] = out
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
    """Where one tag reaches over one range (see the module doc)."""

    tag: TagDef
    start: int
    end: int
    origins: list[EndPointField]
    #: carried field -> the field it was first reached from (None: an origin)
    parent: dict[EndPointField, EndPointField | None] = dc_field(default_factory=dict)
    hops: dict[EndPointField, int] = dc_field(default_factory=dict)
    #: carried field -> the origins whose tag reaches it
    from_origins: dict[EndPointField, frozenset[EndPointField]] = \
        dc_field(default_factory=dict)
    #: field reached only through breaking edges -> (from field, breaking tags)
    stopped: dict[EndPointField, tuple[EndPointField, list[Transformation]]] = \
        dc_field(default_factory=dict)
    truncated: bool = False

    def path(self, f: EndPointField) -> list[EndPointField]:
        out = [f]
        at = self.parent.get(f)
        while at is not None:
            out.append(at)
            at = self.parent.get(at)
        return out[::-1]

    def carried(self) -> list[EndPointField]:
        return sorted(self.parent, key=_order)

    def field_json(self, f: EndPointField) -> dict:
        if f in self.parent:
            return {"field": field_id(f), "direct": self.parent[f] is None,
                    "origins": sorted(field_id(o) for o in self.from_origins.get(f, ())),
                    "path": [field_id(p) for p in self.path(f)], "stopped": False,
                    "hops": self.hops[f]}
        src, broke = self.stopped[f]
        return {"field": field_id(f), "direct": False,
                "origins": sorted(field_id(o) for o in self.from_origins.get(src, ())),
                "path": [field_id(p) for p in self.path(src)] + [field_id(f)],
                "stopped": True, "stoppedAt": field_id(src),
                "transformations": [_tag_json(t) for t in broke]}

    def fields_json(self) -> list[dict]:
        """Carried fields, then stopped ones, each sorted by name."""
        return [self.field_json(f) for f in self.carried()] + \
            [self.field_json(f) for f in sorted(self.stopped, key=_order)]

    def to_dict(self) -> dict:
        return {"tag": self.tag.to_dict(), "start": self.start // 1000,
                "end": self.end // 1000, "fields": self.fields_json(),
                "truncated": self.truncated}


def _order(f: EndPointField) -> tuple[str, str, str]:
    return (f.endpoint.namespace, f.endpoint.name, f.field)


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
    names = lineage.names
    tdef, placed = tag_origins(store, tag)
    origins = sorted({names.field(EndPointField(EndPoint(a.namespace, a.name), a.field))
                      for a in placed if a.field}, key=_order)
    reach = Reach(tdef, start, end, origins)
    parent, hops = reach.parent, reach.hops
    for o in origins:
        parent[o] = None
        hops[o] = 0
    passes = tdef.passes
    carried_by: dict[EndPointField, list[EndPointField]] = {}
    stopped: dict[EndPointField, tuple[EndPointField, list[Transformation]]] = {}
    verdicts: dict[tuple, tuple[bool, list[Transformation]]] = {}
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
            for g, tags in lineage.edges(f, True).items():
                key = tuple(tags)
                verdict = verdicts.get(key)
                if verdict is None:
                    verdict = verdicts[key] = carries(tags, passes)
                if verdict[0]:
                    outs.append(g)
                    if g not in parent:
                        parent[g] = f
                        hops[g] = hop
                        nxt.append(g)
                elif verdict[1] and g not in stopped:
                    stopped[g] = (f, verdict[1])
            if outs:
                carried_by[f] = outs
        frontier = nxt
    reach.stopped = {g: v for g, v in stopped.items() if g not in parent}
    reach.from_origins = _origins(origins, carried_by)
    return reach


def _origins(origins: list[EndPointField], carried_by: dict[EndPointField, list[EndPointField]]
             ) -> dict[EndPointField, frozenset[EndPointField]]:
    """Per carried field, every origin with a carrying path to it: sets pushed
    along the carrying edges until nothing grows (a field reached by one origin
    costs one visit; cycles end when their sets stop growing)."""
    shared: dict[frozenset, frozenset] = {}
    got: dict[EndPointField, frozenset[EndPointField]] = {}
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
    for tag in sorted(placed):
        reach = propagate(store, tag, start, end, lineage=lineage)
        for f in reach.parent:
            if f.endpoint != ep or reach.parent[f] is None:
                continue
            entry = fields.setdefault(f.field, {"tags": [], "propagatedTags": []})
            if tag in entry["tags"]:
                continue
            entry["propagatedTags"].append(
                {"name": tag, "origins": sorted(field_id(o) for o in reach.from_origins[f])})
    for entry in fields.values():
        entry["tags"].sort()
    return {"namespace": ep.namespace, "name": ep.name,
            "tags": sorted({a.tag for a in mine if not a.field}), "fields": fields}


# -- diff ----------------------------------------------------------------------------

def neighbourhood(lineage: RangeLineage, roots: Iterable[EndPointField], depth: int
                  ) -> dict[tuple[EndPointField, EndPointField], list[Transformation]]:
    """Every edge (source, destination) within ``depth`` hops up and down of the roots."""
    edges: dict[tuple[EndPointField, EndPointField], list[Transformation]] = {}
    roots = [lineage.names.field(r) for r in roots]
    for downstream in (False, True):
        seen = set(roots)
        frontier = list(roots)
        for _ in range(depth):
            nxt = []
            for f in frontier:
                for g, tags in lineage.edges(f, downstream).items():
                    edges[(f, g) if downstream else (g, f)] = tags
                    if g not in seen:
                        seen.add(g)
                        nxt.append(g)
            frontier = nxt
            if not frontier:
                break
    return edges


def dataset_roots(store: Any, ep: EndPoint, ranges: Iterable[tuple[int, int]]
                  ) -> list[EndPointField]:
    """Every field of a dataset (under each of its names) with lineage in any of
    ``ranges``, under its one name: the roots of a dataset's diff."""
    names = Names(store)
    ep = names.canonical(ep)
    found = {f for e in names.equivalents(ep) for s, t in ranges
             for f in store.fields(e, s, t)}
    return [EndPointField(ep, f) for f in sorted(found)]


def _tag_set(tags: Iterable[Transformation]) -> tuple[tuple[str, str, bool], ...]:
    return tuple(sorted({(t.type, t.subtype, t.masking) for t in tags}))


def _edge_json(edge: tuple[EndPointField, EndPointField],
               tags: tuple[tuple[str, str, bool], ...]) -> dict:
    return {"source": field_id(edge[0]), "destination": field_id(edge[1]),
            "transformations": [{"type": a, "subtype": b, "masking": m} for a, b, m in tags]}


def diff(store: Any, roots: list[EndPointField], before: tuple[int, int],
         after: tuple[int, int], depth: int = 1) -> dict:
    """``{"added", "removed", "changed"}`` between the two ranges (module doc)."""
    if depth < 1 or depth > MAX_HOPS:
        raise BadRequest(f"depth must be between 1 and {MAX_HOPS}, got {depth}", "depth")
    names = Names(store)
    sides = [RangeLineage(store, *before, names), RangeLineage(store, *after, names)]
    found = [neighbourhood(side, roots, depth) for side in sides]
    out: dict[str, list] = {"added": [], "removed": [], "changed": []}
    every = set(found[0]) | set(found[1])
    for edge in sorted(every, key=lambda e: (_order(e[0]), _order(e[1]))):
        tags = []
        for side, seen in zip(sides, found, strict=True):
            hit = seen.get(edge)
            if hit is None:
                hit = side.edges(edge[1], False).get(edge[0])  # the edge in the other range
            tags.append(None if hit is None else _tag_set(hit))
        old, new = tags
        if old is None and new is not None:
            out["added"].append(_edge_json(edge, new))
        elif new is None and old is not None:
            out["removed"].append(_edge_json(edge, old))
        elif old != new and old is not None and new is not None:
            entry = _edge_json(edge, new)
            del entry["transformations"]
            out["changed"].append({"edge": entry,
                                   "before": _edge_json(edge, old)["transformations"],
                                   "after": _edge_json(edge, new)["transformations"]})
    return out


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
