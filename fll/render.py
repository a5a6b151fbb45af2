"""A field's multi-hop lineage graph, and its renderings: tree, JSON, DOT, Mermaid.

`walk_lineage` follows a field across datasets: the sources of a field come
from the runs in ``[start, end)`` that wrote its dataset, their sources from
the runs in the same range that wrote theirs, and so on for ``depth`` hops.
Cycles across runs are cut (each field is expanded once per direction). The
renderers are pure functions of the graph; they must never touch a store.
Edges always point the way data flows: source field → destination field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .errors import BadRequest
from .model import EndPoint, EndPointField

DIRECTIONS = ("incoming", "outgoing", "both")


def parse_field_ref(text: str, parameter: str = "FIELD") -> EndPointField:
    """``NS:NAME:FIELD``: the namespace is up to the first ``:``, the field after
    the last one, and the dataset name is everything between (so names may hold
    ``:``; namespaces and field names may not)."""
    first, last = text.find(":"), text.rfind(":")
    if first < 0 or last == first:
        raise BadRequest(f"{parameter} {text!r} must look like NAMESPACE:DATASET:FIELD",
                         parameter)
    ns, name, fld = text[:first], text[first + 1:last], text[last + 1:]
    if not ns or not name or not fld:
        raise BadRequest(f"{parameter} {text!r} has an empty namespace, dataset or field "
                         f"(expected NAMESPACE:DATASET:FIELD)", parameter)
    return EndPointField(EndPoint(ns, name), fld)


def parse_dataset_ref(text: str, parameter: str = "DATASET") -> EndPoint:
    """``NS:NAME``: the namespace is up to the first ``:``, the rest is the name."""
    ns, sep, name = text.partition(":")
    if not sep or not ns or not name:
        raise BadRequest(f"{parameter} {text!r} must look like NAMESPACE:DATASET", parameter)
    return EndPoint(ns, name)


def field_id(f: EndPointField) -> str:
    return f"{f.endpoint.namespace}:{f.endpoint.name}:{f.field}"


@dataclass
class LineageGraph:
    """The fields reached from ``root`` and the data-flow edges between them."""

    root: EndPointField
    direction: str
    depth: int
    start_ms: int
    end_ms: int
    edges: set[tuple[EndPointField, EndPointField]] = field(default_factory=set)
    hops: dict[EndPointField, int] = field(default_factory=dict)
    truncated: set[EndPointField] = field(default_factory=set)  # more lineage past `depth`

    @property
    def nodes(self) -> list[EndPointField]:
        found = {self.root} | {a for a, _ in self.edges} | {b for _, b in self.edges}
        return sorted(found, key=lambda f: (f.endpoint.namespace, f.endpoint.name, f.field))

    def _adjacency(self) -> tuple[dict, dict]:
        # rebuilt only when edges changed, so rendering stays linear in the graph
        if getattr(self, "_adj_for", -1) != len(self.edges):
            ins: dict[EndPointField, set[EndPointField]] = {}
            outs: dict[EndPointField, set[EndPointField]] = {}
            for a, b in self.edges:
                ins.setdefault(b, set()).add(a)
                outs.setdefault(a, set()).add(b)
            self._adj = (ins, outs)
            self._adj_for = len(self.edges)
        return self._adj

    def sources_of(self, f: EndPointField) -> list[EndPointField]:
        return _sorted(self._adjacency()[0].get(f, ()))

    def destinations_of(self, f: EndPointField) -> list[EndPointField]:
        return _sorted(self._adjacency()[1].get(f, ()))

    def to_dict(self) -> dict:
        def node(f: EndPointField) -> dict:
            d = {"id": field_id(f), "namespace": f.endpoint.namespace,
                 "dataset": f.endpoint.name, "field": f.field, "hops": self.hops.get(f, 0)}
            if f in self.truncated:
                d["truncated"] = True
            return d
        return {"field": node(self.root), "direction": self.direction, "depth": self.depth,
                "start_ms": self.start_ms, "end_ms": self.end_ms,
                "nodes": [node(f) for f in self.nodes],
                "edges": [{"source": field_id(a), "destination": field_id(b)}
                          for a, b in sorted(self.edges, key=lambda e: (field_id(e[0]),
                                                                        field_id(e[1])))]}


def _sorted(items: Iterable[EndPointField]) -> list[EndPointField]:
    return sorted(set(items), key=field_id)


def walk_lineage(store, root: EndPointField, direction: str, depth: int, start_ms: int,
                 end_ms: int) -> LineageGraph:
    """Breadth-first walk of ``depth`` hops; one store question per field and direction."""
    if direction not in DIRECTIONS:
        raise BadRequest(f"direction must be incoming, outgoing or both, got {direction!r}",
                         "direction")
    if depth < 1:
        raise BadRequest(f"depth must be at least 1, got {depth}", "depth")
    graph = LineageGraph(root, direction, depth, start_ms, end_ms)
    graph.hops[root] = 0
    for d in ("incoming", "outgoing"):
        if direction not in (d, "both"):
            continue
        seen = {root}
        frontier = [root]
        for hop in range(1, depth + 2):
            nxt: list[EndPointField] = []
            for f in frontier:
                if d == "incoming":
                    found = store.incoming(f, start_ms, end_ms)
                else:
                    found = store.outgoing(f, start_ms, end_ms)
                if hop > depth:  # one look past the limit, only to mark the cut
                    if found:
                        graph.truncated.add(f)
                    continue
                for other in _sorted(found):
                    graph.edges.add((other, f) if d == "incoming" else (f, other))
                    graph.hops.setdefault(other, hop)
                    if other not in seen:  # a cycle or a shared ancestor: expand once
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
            if not frontier:
                break
    return graph


# -- renderings ------------------------------------------------------------------

def render_tree(graph: LineageGraph) -> str:
    """Box-drawing trees: sources (``←``) and/or destinations (``→``) of the root.

    A field already shown is printed again with ``(see above)`` and not
    expanded; one on the current path with ``(cycle)``.
    """
    lines: list[str] = []
    for d, arrow in (("incoming", "←"), ("outgoing", "→")):
        if graph.direction not in (d, "both"):
            continue
        children = graph.sources_of if d == "incoming" else graph.destinations_of
        title = "built from" if d == "incoming" else "used by"
        lines.append(f"{field_id(graph.root)}  ({d}: {title}, up to {graph.depth} hop"
                     f"{'s' if graph.depth != 1 else ''})")
        lines.extend(_tree_lines(graph.root, children, arrow, graph.truncated))
        if not children(graph.root):
            lines.append(f"└── (no {d} lineage in the time range)")
    return "\n".join(lines) + "\n"


def _tree_lines(root: EndPointField, children, arrow: str,
                truncated: set[EndPointField]) -> list[str]:
    # an explicit stack, not recursion: a long chain must not hit Python's limit
    out: list[str] = []
    shown = {root}
    stack: list[tuple[EndPointField, str, bool, frozenset]] = [
        (kid, "", i == 0, frozenset({root})) for i, kid in enumerate(reversed(children(root)))]
    while stack:
        node, prefix, last, path = stack.pop()
        mark, expand = "", False
        if node in path:
            mark = "  (cycle)"
        elif node in shown:
            mark = "  (see above)"
        else:
            expand = True
            if node in truncated:
                mark = "  …"
        out.append(f"{prefix}{'└── ' if last else '├── '}{arrow} {field_id(node)}{mark}")
        if expand:
            shown.add(node)
            kids = children(node)
            inner = prefix + ("    " if last else "│   ")
            stack.extend((kid, inner, i == 0, path | {node})
                         for i, kid in enumerate(reversed(kids)))
    return out


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _by_dataset(graph: LineageGraph) -> dict[EndPoint, list[EndPointField]]:
    groups: dict[EndPoint, list[EndPointField]] = {}
    for f in graph.nodes:
        groups.setdefault(f.endpoint, []).append(f)
    return groups


def render_dot(graph: LineageGraph) -> str:
    """Graphviz: one cluster per dataset, one box per field, the root in bold."""
    out = ["digraph lineage {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
    for i, (ep, fields) in enumerate(sorted(_by_dataset(graph).items())):
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f"    label={_dot_quote(str(ep))};")
        for f in fields:
            style = ', style="bold,filled", fillcolor="#ffe9a8"' if f == graph.root else ""
            out.append(f"    {_dot_quote(field_id(f))} [label={_dot_quote(f.field)}{style}];")
        out.append("  }")
    for a, b in sorted(graph.edges, key=lambda e: (field_id(e[0]), field_id(e[1]))):
        out.append(f"  {_dot_quote(field_id(a))} -> {_dot_quote(field_id(b))};")
    out.append("}")
    return "\n".join(out) + "\n"


def _mermaid_label(text: str) -> str:
    # Mermaid has no backslash escapes; entity codes are its way to quote
    return '"' + text.replace("&", "#amp;").replace('"', "#quot;") \
        .replace("<", "#lt;").replace(">", "#gt;") + '"'


def render_mermaid(graph: LineageGraph) -> str:
    """A Mermaid ``flowchart LR``: a subgraph per dataset, nodes ``n0``, ``n1``…"""
    ids = {f: f"n{i}" for i, f in enumerate(graph.nodes)}
    out = ["flowchart LR"]
    for i, (ep, fields) in enumerate(sorted(_by_dataset(graph).items())):
        out.append(f"  subgraph d{i}[{_mermaid_label(str(ep))}]")
        for f in fields:
            out.append(f"    {ids[f]}[{_mermaid_label(f.field)}]")
        out.append("  end")
    for a, b in sorted(graph.edges, key=lambda e: (field_id(e[0]), field_id(e[1]))):
        out.append(f"  {ids[a]} --> {ids[b]}")
    out.append("  classDef root stroke-width:3px,fill:#ffe9a8")
    out.append(f"  class {ids[graph.root]} root")
    return "\n".join(out) + "\n"


RENDERERS = {"tree": render_tree, "dot": render_dot, "mermaid": render_mermaid}
