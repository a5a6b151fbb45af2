"""``fll datasets``, ``fll runs``, ``fll fields`` and ``fll lineage``: the
questions a store answers about datasets, their runs and fields, and a
field's lineage across datasets.
"""
from __future__ import annotations


import click


from .common import (State, echo_json, end_option, format_option, include_failed_option,
                     name_options, named_dataset, pass_state, start_option, time_range)
from .root import main


@main.command()
@click.option("--namespace", "namespace", metavar="NS", help="Only datasets in this namespace.")
@click.option("--prefix", metavar="P", help="Only dataset names starting with P "
              "(case-insensitive).")
@format_option("table", "json")
@pass_state
def datasets(state: State, namespace: str | None, prefix: str | None, fmt: str) -> None:
    """Datasets some run read or wrote, or an OpenLineage event reported the schema
    of, as NS:NAME (what lineage, runs and fields take)."""
    store = state.store()
    found = [d for d in store.datasets(with_schemas=True)
             if (namespace is None or d.namespace == namespace)
             and (prefix is None or d.name.lower().startswith(prefix.lower()))]
    # the other names each dataset answers to (a pipeline file's referenceName)
    every = store.all_aliases()
    aliases = {d: [f"{a}:{b}" for a, b in every.get((d.namespace, d.name), ())] for d in found}
    if fmt == "json":
        echo_json([{"namespace": d.namespace, "name": d.name, "aliases": aliases[d]}
                   for d in found])
        return
    for d in found:
        also = f"  (also {', '.join(aliases[d])})" if aliases[d] else ""
        click.echo(f"{d.namespace}:{d.name}{also}")


@main.command()
@click.argument("dataset", metavar="[NS:NAME]", required=False)
@name_options()
@start_option
@end_option
@click.option("--direction", type=click.Choice(["both", "incoming", "outgoing"]),
              default="both", show_default=True,
              help="Runs that wrote (incoming) and/or read (outgoing) the dataset.")
@click.option("--limit", type=click.IntRange(min=1), help="At most N runs (newest first).")
@include_failed_option
@format_option("table", "json")
@pass_state
def runs(state: State, dataset: str | None, namespace: str | None, ds_name: str | None,
         start: str | None, end: str | None, direction: str, limit: int | None,
         include_failed: bool, fmt: str) -> None:
    """Runs that read or wrote a dataset in [start, end), newest first, each
    with its state (an OpenLineage run's final state; COMPLETE for a run
    recorded otherwise). FAIL and ABORT runs only with --include-failed.

    NS:NAME is split at the colon that names a known dataset; with URI
    namespaces use --namespace and --dataset."""
    from ..store.admin import iso_ms
    from ..store.runs import run_states

    from ..render import Names

    store, ep = named_dataset(state, dataset, namespace, ds_name, include_failed=include_failed)
    lo, hi = time_range(start, end)
    # the dataset under every name it has (runs recorded under an alias before it was one)
    by_id = {r.run_id: r for e in Names(store).equivalents(ep)
             for r in store.runs(e, lo, hi, direction=direction, limit=limit)}
    found = sorted(by_id.values(), key=lambda r: (-r.start_ms, r.run_id))
    found = found[:limit] if limit else found
    states = run_states(store, [r.run_id for r in found])
    if fmt == "json":
        echo_json([{"run_id": r.run_id, "start_ms": r.start_ms, "start": iso_ms(r.start_ms),
                    "program": r.program, "checksum": r.checksum,
                    "state": states.get(r.run_id, "COMPLETE")} for r in found])
        return
    for r in found:
        click.echo(f"{iso_ms(r.start_ms)}  {r.run_id}  {states.get(r.run_id, 'COMPLETE'):<8}  "
                   f"{r.program or '-'}  {r.checksum}")


@main.command()
@click.argument("dataset", metavar="[NS:NAME]", required=False)
@name_options()
@click.option("--prefix", help="Only fields starting with this (case-insensitive).")
@start_option
@end_option
@include_failed_option
@format_option("table", "json")
@pass_state
def fields(state: State, dataset: str | None, namespace: str | None, ds_name: str | None,
           prefix: str | None, start: str | None, end: str | None, include_failed: bool,
           fmt: str) -> None:
    """Fields of a dataset read or written by runs in [start, end), and the
    fields of the schema an OpenLineage event reported for it in the range."""
    from ..render import Names

    store, ep = named_dataset(state, dataset, namespace, ds_name, include_failed=include_failed)
    lo, hi = time_range(start, end)
    found: set[str] = set()
    low = (prefix or "").lower()
    for e in Names(store).equivalents(ep):
        found.update(store.fields(e, lo, hi, prefix))
        found.update(n for n in store.schema(e.namespace, e.name, lo, hi) or {}
                     if n.lower().startswith(low))
    names = sorted(found)
    if fmt == "json":
        echo_json(names)
    else:
        for n in names:
            click.echo(n)


# -- lineage ---------------------------------------------------------------------------

@main.command()
@click.argument("field_ref", metavar="[NS:NAME:FIELD]", required=False)
@name_options(field=True)
@click.option("--direction", type=click.Choice(["incoming", "outgoing", "both"]),
              default="incoming", show_default=True)
@click.option("--depth", type=click.IntRange(min=1), default=5, show_default=True,
              help="Hops across datasets.")
@start_option
@end_option
@format_option("tree", "json", "dot", "mermaid")
@click.option("--indirect", type=click.Choice(["show", "hide"]), default="show",
              show_default=True, help="INDIRECT edges (filter, join, group-by, sort, window, "
              "condition columns): shown tagged, or left out and not walked past.")
@click.option("--direct-only", is_flag=True, help="Same as --indirect hide.")
@click.option("--ops", "show_ops", is_flag=True, default=None,
              help="Under each field, the operations of the hop into it.")
@click.option("--runs", "show_runs", is_flag=True, default=None,
              help="Under each field, the runs of the hop into it, newest first.")
@include_failed_option
@pass_state
def lineage(state: State, field_ref: str | None, namespace: str | None, ds_name: str | None,
            field_name: str | None, direction: str, depth: int, start: str | None,
            end: str | None, fmt: str, indirect: str, direct_only: bool,
            show_ops: bool | None, show_runs: bool | None, include_failed: bool) -> None:
    """A field's lineage across datasets, through the runs in [start, end).

    NS:NAME:FIELD is split at the colons that name a known dataset and field
    (namespaces such as postgres://db:5432 hold colons); an ambiguous form is
    refused. --namespace, --dataset and --field name it whole. Every edge
    carries its OpenLineage tags, e.g. [DIRECT/AGGREGATION] (the value is
    built from it) or [INDIRECT/FILTER] (it only decides which rows); edges
    without tags come from producers that record none. The tree lists each
    hop's runs by default when the graph is small (up to 12 fields);
    --ops/--runs ask for them always (json: an "operations" key).
    """
    from .. import render
    from ..names import resolve_field
    from ..store.reads import ReadView, SetMerges

    # every store read of the walk done once (a hop past the depth asks each
    # reached field's sets: one read per dataset, not per field)
    plain = state.store()
    store = ReadView(plain.including_failed() if include_failed else plain, SetMerges())
    root = resolve_field(store, field_ref, namespace, ds_name, field_name)
    lo, hi = time_range(start, end)
    show = not direct_only and render.parse_indirect(indirect, "--indirect")
    asked = bool(show_ops or show_runs)
    graph = render.walk_lineage(store, root, direction, depth, lo, hi, show_indirect=show,
                                with_operations=asked or fmt == "tree")
    graph.aliases = [f"{a}:{b}" for a, b in store.aliases(graph.root.endpoint.namespace,
                                                          graph.root.endpoint.name)]
    if fmt == "json":
        if not asked:
            graph.operations.clear()
        echo_json(graph.to_dict())
    elif fmt == "tree":
        small = len(graph.nodes) <= 12
        click.echo(render.render_tree(graph, ops=bool(show_ops),
                                      runs=bool(show_runs) or (not asked and small)),
                   nl=False)
    else:
        click.echo(render.RENDERERS[fmt](graph), nl=False)
