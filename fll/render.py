"""A field's multi-hop lineage graph, and its renderings: tree, JSON, DOT, Mermaid.

`walk_lineage` follows a field across datasets: the sources of a field come
from the runs in ``[start, end)`` that wrote its dataset, their sources from
the runs in the same range that wrote theirs, and so on for ``depth`` hops.
Cycles across runs are cut (each field is expanded once per direction). Every
edge carries the OpenLineage transformation tags composed along its paths
(`EdgeTags`), and a dataset known under two names (an alias, e.g. a pipeline
file's location) is walked as one (`Names`). The renderers are pure functions
of the graph; they must never touch a store. Edges always point the way data
flows: source field → destination field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .errors import BadRequest
from .model import EndPoint, EndPointField, Transformation

DIRECTIONS = ("incoming", "outgoing", "both")
INDIRECT_CHOICES = ("show", "hide")


def edge_kind(tags: Iterable[Transformation]) -> str:
    """``DIRECT``, ``INDIRECT`` or ``""`` (untagged: a producer that does not say).

    An edge is INDIRECT only when every path along it is: a field that both
    feeds a value and filters rows is a DIRECT source first.
    """
    types = {t.type for t in tags}
    if not types:
        return ""
    return "DIRECT" if "DIRECT" in types else "INDIRECT"


def tag_labels(tags: Iterable[Transformation]) -> list[str]:
    """``TYPE/SUBTYPE`` once each, with ``+masked`` when the value was masked."""
    out: dict[str, None] = {}
    for t in tags:
        label = "/".join(filter(None, (t.type, t.subtype)))
        out[label + ("+masked" if t.masking else "")] = None
    return list(out)


def parse_indirect(value: str | None, parameter: str = "indirect") -> bool:
    """``show`` (default) or ``hide``, as the CLI and the REST API both take it;
    True when INDIRECT edges are to be shown."""
    v = (value or "show").lower()
    if v not in INDIRECT_CHOICES:
        raise BadRequest(f"{parameter} must be show or hide, got {value!r}", parameter)
    return v == "show"


class Names:
    """One name per dataset across aliases (a pipeline's ``referenceName`` and the
    file location it stands for): `canonical` is the dataset an alias stands
    for, `equivalents` every name the store may hold its runs under. Memoised;
    a store without aliases answers with the name itself."""

    def __init__(self, store):
        self.store = store
        self._canon: dict[EndPoint, EndPoint] = {}
        self._eq: dict[EndPoint, tuple[EndPoint, ...]] = {}

    def canonical(self, ep: EndPoint) -> EndPoint:
        hit = self._canon.get(ep)  # endpoints are equal by name, whatever their properties
        if hit is None:
            plain = EndPoint(ep.namespace, ep.name)
            resolve = getattr(self.store, "resolve_dataset", None)
            hit = EndPoint(*resolve(plain.namespace, plain.name)) if resolve else plain
            if hit == plain:
                hit = plain
            self._canon[plain] = hit
        return hit

    def field(self, f: EndPointField) -> EndPointField:
        target = self.canonical(f.endpoint)
        if target is f.endpoint or (target == f.endpoint and not f.endpoint.properties):
            return f  # its own name: the same field, not a copy
        return EndPointField(target, f.field)

    def equivalents(self, ep: EndPoint) -> tuple[EndPoint, ...]:
        target = self.canonical(ep)
        hit = self._eq.get(target)
        if hit is None:
            aliases = getattr(self.store, "aliases", None)
            others = [EndPoint(ns, n) for ns, n in aliases(target.namespace, target.name)] \
                if aliases else []
            hit = self._eq[target] = (target, *others)
        return hit


def prefetch(store: Any, endpoints: Iterable[EndPoint], start: int, end: int,
              direction: str, *, ahead: bool = False) -> None:
    """Read what a walk asks of these datasets in one go when the store is a
    request's `ReadView` (`ReadView.prefetch`; ``ahead``: the walk goes on
    past them); otherwise nothing."""
    prefetch = getattr(store, "prefetch", None)
    if prefetch is not None:
        prefetch(endpoints, start, end, direction, ahead=ahead)


def read_hop(store: Any, names: Names, frontier: list[EndPointField], start: int,
              end: int, direction: str, *, also_incoming: bool = False,
              ahead: bool = True, further: bool = True) -> None:
    """One hop of a walk read level by level: the frontier's datasets in one
    store read, then the datasets their fields reach (before their names are
    resolved one by one), so that a hop costs a bounded number of round trips
    whatever the number of datasets it touches. Only reads ahead: the walk
    itself asks as it always does and finds the answers remembered. Without
    ``ahead`` (a look past the walk's last hop) only the frontier is read;
    with ``further`` (the walk goes on past the datasets reached) what those
    lead to is read with their sets where that costs no more round trips."""
    if getattr(store, "prefetch", None) is None or not frontier:
        return
    eps = {f.endpoint for f in frontier}
    prefetch(store, eps, start, end, direction, ahead=ahead)
    if not ahead:
        return
    ask = store.incoming if direction == "incoming" else store.outgoing
    reached = {g.endpoint for f in frontier for ep in names.equivalents(f.endpoint)
               for g in ask(EndPointField(ep, f.field), start, end)}
    prefetch(store, reached, start, end, direction, ahead=further)
    if also_incoming:
        prefetch(store, reached, start, end, "incoming")


class EdgeTags:
    """Transformation tags of field edges, composed along each run's operation
    paths; one pass per (operation set, destination field), memoised, so a walk
    asks each destination once."""

    def __init__(self, store, start_ms: int, end_ms: int, names: Names | None = None):
        self.store, self.start_ms, self.end_ms = store, start_ms, end_ms
        self.names = names or Names(store)
        self._into: dict[EndPointField, dict[EndPointField, list[Transformation]]] = {}

    def into(self, dest: EndPointField) -> dict[EndPointField, list[Transformation]]:
        """Per source field of ``dest``, its distinct tags over every operation set."""
        hit = self._into.get(dest)
        if hit is not None:
            return hit
        merged: dict[EndPointField, list[Transformation]] = {}
        for ep in self.names.equivalents(dest.endpoint):
            here = EndPointField(ep, dest.field)
            sets = self.store.checksums(ep, self.start_ms, self.end_ms, "incoming")
            # the tags were composed when the sets were recorded: read, never rebuilt
            got = self.store.summaries(sets)
            for c in sets:
                for src, tags in got[c].incoming_tags(here).items():
                    # one name per dataset (endpoints also compare their properties)
                    key = self.names.field(src)
                    cur = merged.setdefault(key, [])
                    cur.extend(t for t in tags if t not in cur)
        self._into[dest] = merged
        return merged

    def of(self, src: EndPointField, dest: EndPointField) -> list[Transformation]:
        return self.into(self.names.field(dest)).get(self.names.field(src), [])


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
    # (source, destination) -> its transformation tags; absent or [] = untagged
    tags: dict[tuple[EndPointField, EndPointField], list[Transformation]] = \
        field(default_factory=dict)
    show_indirect: bool = True
    # destination field -> its operation groups (operations, runs newest first), when asked
    operations: dict[EndPointField, list] = field(default_factory=dict)
    # other names of the root's dataset (a pipeline file's referenceName), "NS:NAME"
    aliases: list[str] = field(default_factory=list)
    # run id -> its state, for the runs of `operations` (COMPLETE when absent)
    states: dict[str, str] = field(default_factory=dict)

    def edge_tags(self, a: EndPointField, b: EndPointField) -> list[Transformation]:
        return self.tags.get((a, b), [])

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
        def edge(a: EndPointField, b: EndPointField) -> dict:
            tags = self.edge_tags(a, b)
            return {"source": field_id(a), "destination": field_id(b),
                    "kind": edge_kind(tags) or None,
                    "transformations": [t.to_dict() for t in tags]}
        out = {"field": node(self.root), "direction": self.direction, "depth": self.depth,
               "start_ms": self.start_ms, "end_ms": self.end_ms,
               "indirect": "show" if self.show_indirect else "hide",
               "nodes": [node(f) for f in self.nodes],
               "edges": [edge(a, b) for a, b in sorted(self.edges, key=lambda e: (
                   field_id(e[0]), field_id(e[1])))]}
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.operations:
            out["operations"] = {field_id(f): [_group_json(g, self.states) for g in groups]
                                 for f, groups in sorted(self.operations.items(),
                                                         key=lambda kv: field_id(kv[0]))}
        return out


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _group_json(g, states: dict[str, str]) -> dict:
    return {"checksum": g.checksum,
            "operations": [{"name": op.name, "description": op.description}
                           for op in g.operations],
            "runs": [{"run_id": r.run_id, "start_ms": r.start_ms, "start": _iso(r.start_ms),
                      "program": r.program, "state": states.get(r.run_id, "COMPLETE")}
                     for r in g.runs]}


def _sorted(items: Iterable[EndPointField]) -> list[EndPointField]:
    return sorted(set(items), key=field_id)


def walk_lineage(store, root: EndPointField, direction: str, depth: int, start_ms: int,
                 end_ms: int, *, show_indirect: bool = True,
                 with_operations: bool = False) -> LineageGraph:
    """Breadth-first walk of ``depth`` hops; one store question per field and direction.

    Every edge gets its transformation tags. With ``show_indirect`` False an
    edge whose every path is INDIRECT (filter, join, group-by, sort…) is left
    out and not walked past; untagged edges are kept, since their producer
    did not say. ``with_operations`` also collects, per field reached by an
    edge, the operations and runs (newest first) of the hop into it.
    """
    if direction not in DIRECTIONS:
        raise BadRequest(f"direction must be incoming, outgoing or both, got {direction!r}",
                         "direction")
    if depth < 1:
        raise BadRequest(f"depth must be at least 1, got {depth}", "depth")
    graph = LineageGraph(root, direction, depth, start_ms, end_ms,
                         show_indirect=show_indirect)
    names = Names(store)
    root = names.field(root)
    graph.root = root
    graph.hops[root] = 0
    tagger = EdgeTags(store, start_ms, end_ms, names)

    def ask(f: EndPointField, d: str) -> set[EndPointField]:
        # the field under every name of its dataset, answers under one name each
        found: set[EndPointField] = set()
        for ep in names.equivalents(f.endpoint):
            here = EndPointField(ep, f.field)
            got = store.incoming(here, start_ms, end_ms) if d == "incoming" else \
                store.outgoing(here, start_ms, end_ms)
            found.update(names.field(g) for g in got)
        found.discard(f)
        return found
    for d in ("incoming", "outgoing"):
        if direction not in (d, "both"):
            continue
        seen = {root}
        frontier = [root]
        for hop in range(1, depth + 2):
            # the hop's datasets read at once; going downstream, the tags of an
            # edge are its destination's: the reached datasets' incoming sets too
            read_hop(store, names, frontier, start_ms, end_ms, d,
                     also_incoming=d == "outgoing", ahead=hop <= depth, further=hop < depth)
            nxt: list[EndPointField] = []
            for f in frontier:
                found = ask(f, d)
                if hop > depth:  # one look past the limit, only to mark the cut
                    if found:
                        graph.truncated.add(f)
                    continue
                for other in _sorted(found):
                    edge = (other, f) if d == "incoming" else (f, other)
                    tags = tagger.of(*edge)
                    if not show_indirect and edge_kind(tags) == "INDIRECT":
                        continue
                    graph.edges.add(edge)
                    if tags:
                        graph.tags[edge] = tags
                    if with_operations and edge[1] not in graph.operations:
                        graph.operations[edge[1]] = store.operations(
                            edge[1], start_ms, end_ms, "incoming")
                    graph.hops.setdefault(other, hop)
                    if other not in seen:  # a cycle or a shared ancestor: expand once
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
            if not frontier:
                break
    if graph.operations:
        from .store.runs import run_states  # each listed run's state, in one read

        graph.states = run_states(store, [r.run_id for groups in graph.operations.values()
                                          for g in groups for r in g.runs])
    return graph


# -- renderings ------------------------------------------------------------------

def render_tree(graph: LineageGraph, *, ops: bool = False, runs: bool = False,
                max_runs: int = 5) -> str:
    """Box-drawing trees: sources (``←``) and/or destinations (``→``) of the root.

    Each edge carries its tags (``[DIRECT/AGGREGATION]``, ``[INDIRECT/FILTER]``;
    none when the producer gave none). With ``ops``/``runs`` (and the graph's
    operations collected), the hop into a field lists its operations and its
    runs, newest first, under that field. A field already shown is printed
    again with ``(see above)`` and not expanded; one on the current path with
    ``(cycle)``.
    """
    lines: list[str] = []
    if graph.aliases:  # the name the user may know it by (a pipeline's referenceName)
        lines.append(f"(its dataset is also named {', '.join(graph.aliases)})")
    for d, arrow in (("incoming", "←"), ("outgoing", "→")):
        if graph.direction not in (d, "both"):
            continue
        children = graph.sources_of if d == "incoming" else graph.destinations_of

        def tags_of(parent: EndPointField, kid: EndPointField, d: str = d) -> str:
            tags = graph.edge_tags(kid, parent) if d == "incoming" else \
                graph.edge_tags(parent, kid)
            labels = tag_labels(tags)
            return f" [{', '.join(labels)}]" if labels else ""

        def details(f: EndPointField, prefix: str) -> list[str]:
            return _hop_lines(graph.operations.get(f, []), prefix, ops, runs, max_runs,
                              graph.states)

        title = "built from" if d == "incoming" else "used by"
        lines.append(f"{field_id(graph.root)}  ({d}: {title}, up to {graph.depth} hop"
                     f"{'s' if graph.depth != 1 else ''}"
                     f"{', INDIRECT hidden' if not graph.show_indirect else ''})")
        if d == "incoming":
            lines.extend(details(graph.root, "│   " if children(graph.root) else "    "))
        lines.extend(_tree_lines(graph.root, children, arrow, graph.truncated, tags_of,
                                 details))
        if not children(graph.root):
            lines.append(f"└── (no {d} lineage in the time range)")
    return "\n".join(lines) + "\n"


def _run_label(r, state: str) -> str:
    """``<run> (<start>, <program>[, <state>])``: the state when not COMPLETE."""
    said = [_iso(r.start_ms)] + ([r.program] if r.program else []) + \
        ([state] if state != "COMPLETE" else [])
    return f"{r.run_id} ({', '.join(said)})"


def _hop_lines(groups: list, prefix: str, ops: bool, runs: bool, max_runs: int,
               states: dict[str, str] | None = None) -> list[str]:
    """One ``ops:`` and one ``runs:`` line per operation set of a hop (a run
    that did not complete says its state)."""
    states = states or {}
    out: list[str] = []
    for g in groups:
        if ops:
            out.append(f"{prefix}ops:  {' → '.join(op.name for op in g.operations)}")
        if runs:
            shown = [_run_label(r, states.get(r.run_id, "COMPLETE"))
                     for r in g.runs[:max_runs]]
            more = len(g.runs) - max_runs
            out.append(f"{prefix}runs: {', '.join(shown)}"
                       + (f", +{more} older" if more > 0 else ""))
    return out


def _tree_lines(root: EndPointField, children, arrow: str,
                truncated: set[EndPointField], tags_of, details) -> list[str]:
    # an explicit stack, not recursion: a long chain must not hit Python's limit
    out: list[str] = []
    shown = {root}
    stack: list[tuple[EndPointField, EndPointField, str, bool, frozenset]] = [
        (kid, root, "", i == 0, frozenset({root}))
        for i, kid in enumerate(reversed(children(root)))]
    while stack:
        node, parent, prefix, last, path = stack.pop()
        mark, expand = "", False
        if node in path:
            mark = "  (cycle)"
        elif node in shown:
            mark = "  (see above)"
        else:
            expand = True
            if node in truncated:
                mark = "  …"
        out.append(f"{prefix}{'└── ' if last else '├── '}{arrow} {field_id(node)}"
                   f"{tags_of(parent, node)}{mark}")
        if expand:
            shown.add(node)
            kids = children(node)
            inner = prefix + ("    " if last else "│   ")
            out.extend(details(node, inner + ("│   " if kids else "    ")))
            stack.extend((kid, node, inner, i == 0, path | {node})
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
        tags = graph.edge_tags(a, b)
        attrs = []
        if tags:
            attrs.append(f"label={_dot_quote(chr(10).join(tag_labels(tags)))}")
            attrs.append('fontsize=9')
        if edge_kind(tags) == "INDIRECT":
            attrs.append('style=dashed, color="#888888"')
        elif any(t.masking for t in tags):
            attrs.append('color="#b03060"')
        extra = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"  {_dot_quote(field_id(a))} -> {_dot_quote(field_id(b))}{extra};")
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
        tags = graph.edge_tags(a, b)
        # dotted arrows for INDIRECT edges, solid for DIRECT or untagged
        arrow = "-.->" if edge_kind(tags) == "INDIRECT" else "-->"
        labels = tag_labels(tags)
        label = f"|{_mermaid_label(', '.join(labels))}|" if labels else ""
        out.append(f"  {ids[a]} {arrow}{label} {ids[b]}")
    out.append("  classDef root stroke-width:3px,fill:#ffe9a8")
    out.append(f"  class {ids[graph.root]} root")
    return "\n".join(out) + "\n"


RENDERERS = {"tree": render_tree, "dot": render_dot, "mermaid": render_mermaid}
