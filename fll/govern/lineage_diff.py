"""How a field's (or dataset's) lineage changed between two time ranges
(`fll.govern`, diff)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..errors import BadRequest
from ..model import EndPoint, EndPointField
from ..render import Names
from ..timerange import now_ms, parse_time
from .lineage import MAX_HOPS, Key, RangeLineage, Tags_, Edges, fid, key_of

class Neighbourhood:
    """The edges within ``depth`` hops up and down of some roots, as whole maps:
    ``ins[f]`` every edge into a field the upward walk expanded, ``outs[f]``
    every edge out of one the downward walk expanded (a hop takes all of a
    field's edges, so no edge is copied one by one)."""

    def __init__(self, lineage: RangeLineage, roots: Iterable[EndPointField], depth: int,
                 skip_last: Callable[[Key, bool], bool] | None = None):
        """``skip_last(field, downstream)``: a field of the last hop whose edges are
        not wanted (a diff: those the other range has alike), so not read."""
        self.ins: dict[Key, Edges] = {}
        self.outs: dict[Key, Edges] = {}
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
