"""Where a classification tag reaches (`fll.govern`, propagation)."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Iterable

from ..errors import NotFound
from ..model import EndPoint, Transformation
from ..render import Names
from ..store.tags import Assignment, TagDef, Tags, tag_name
from .lineage import MAX_HOPS, Key, RangeLineage, Tags_, fid

MAX_FIELDS = 1_000_000

_CARRIED = ("IDENTITY", "TRANSFORMATION", "")

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
    """Where ``tag`` reaches through the lineage of ``[start, end)``: breadth first,
    each field's destinations read from its dataset's plan
    (`RangeLineage.downstream_plan`: the sets' own maps when none need
    merging), each distinct tag tuple judged once."""
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
    # who carried the tag to whom: only needed to tell several origins apart
    carried_by: dict[Key, list[Key]] | None = {} if len(origins) > 1 else None
    stopped: dict[Key, tuple[Key, list[Transformation]]] = {}
    # the verdict per distinct tag tuple, by identity (tuples are shared per set);
    # the tuple is kept beside its verdict so an id is never reused meanwhile
    verdicts: dict[int, tuple[Tags_, bool, list[Transformation]]] = {}
    plans: dict[tuple[str, str], tuple[Any, ...]] = {}
    plan_of = lineage.downstream_plan
    frontier = list(origins)
    hop = 0
    while frontier:
        if hop >= max_hops or len(parent) >= max_fields:
            reach.truncated = True
            break
        hop += 1
        nxt: list[Key] = []
        lineage.read_ahead((f[0], f[1]) for f in frontier if (f[0], f[1]) not in plans)
        for f in frontier:
            ds = (f[0], f[1])
            plan = plans.get(ds)
            if plan is None:
                plan = plans[ds] = plan_of(ds)
            outs: list[Key] | None = None if carried_by is None else []
            for part in plan:
                got = part.get(f, True)
                if not got:
                    continue
                for g, tags in got.items():
                    v = verdicts.get(id(tags))
                    if v is None or v[0] is not tags:
                        v = verdicts[id(tags)] = (tags, *carries(tags, passes))
                    if v[1]:
                        if outs is not None:
                            outs.append(g)
                        if g not in parent:
                            parent[g] = f
                            nxt.append(g)
                    elif v[2] and g not in stopped:
                        stopped[g] = (f, v[2])
            if outs and carried_by is not None:
                carried_by[f] = outs
        hops.update(dict.fromkeys(nxt, hop))
        order.extend(nxt)
        frontier = nxt
    reach.stopped = {g: v for g, v in stopped.items() if g not in parent}
    if carried_by is None:  # one origin: every carried field has it
        reach.from_origins = dict.fromkeys(parent, frozenset(origins))
    else:
        reach.from_origins = _origins(origins, carried_by)
    return reach


def _origins(origins: list[Key], carried_by: dict[Key, list[Key]]
             ) -> dict[Key, frozenset[Key]]:
    """Per carried field, every origin with a carrying path to it: sets pushed
    along the carrying edges until nothing grows (a field reached by one origin
    costs one visit; cycles end when their sets stop growing)."""
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


