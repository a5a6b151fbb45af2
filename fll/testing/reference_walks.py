"""Plain reference walks that fast code is checked against (tests, benchmarks).

`plain_reach`: where a tag reaches by the plainest walk there is, what
`fll.govern.propagate` must answer, however it gets there.
"""
from __future__ import annotations

from typing import Any

from ..govern import RangeLineage, carries, tag_origins


def plain_reach(store: Any, tag: str, start: int, end: int) -> tuple[dict, dict, dict, dict]:
    """The tag's reach by the plainest walk: breadth first over each field's edges
    merged over the range's sets (`RangeLineage.edges`), each edge judged by
    `carries`, then every origin's carrying closure walked on its own; what
    `propagate` must answer: (parent, hops, stopped, origins per field)."""
    lineage = RangeLineage(store, start, end)
    tdef, placed = tag_origins(store, tag)
    origins = sorted({lineage.field((a.namespace, a.name, a.field)) for a in placed if a.field})
    parent: dict = dict.fromkeys(origins)
    hops = dict.fromkeys(origins, 0)
    stopped: dict = {}
    frontier, hop = list(origins), 0
    while frontier:
        hop += 1
        nxt = []
        for f in frontier:
            for g, tags in lineage.edges(f, True).items():
                ok, broke = carries(tags, tdef.passes)
                if ok and g not in parent:
                    parent[g], hops[g] = f, hop
                    nxt.append(g)
                elif not ok and broke and g not in stopped:
                    stopped[g] = (f, broke)
        frontier = nxt
    reached: dict = {}
    for o in origins:
        seen, stack = {o}, [o]
        while stack:
            for g, tags in lineage.edges(stack.pop(), True).items():
                if g not in seen and carries(tags, tdef.passes)[0]:
                    seen.add(g)
                    stack.append(g)
        for f in seen:
            reached.setdefault(f, set()).add(o)
    return (parent, hops, {g: v for g, v in stopped.items() if g not in parent},
            {f: frozenset(o) for f, o in reached.items()})
