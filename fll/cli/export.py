"""``fll export``: the runs that read or wrote a dataset, as run documents
(`fll record` reads them back) or as OpenLineage events.
"""
from __future__ import annotations

import json

import click

from ..errors import BadRequest
from .common import (State, echo_json, end_option, format_option, name_options, named_dataset,
                     pass_state, start_option, time_range)
from .root import main


@main.command()
@click.argument("dataset", metavar="[NS:NAME]", required=False)
@name_options()
@format_option("json", "openlineage")
@start_option
@end_option
@click.option("--lines", is_flag=True, help="One JSON document per line instead of an array.")
@pass_state
def export(state: State, dataset: str | None, namespace: str | None, ds_name: str | None,
           fmt: str, start: str | None, end: str | None, lines: bool) -> None:
    """Export the runs that read or wrote a dataset in [start, end).

    json: the shape `fll record` reads (round trip); openlineage: RunEvents
    with columnLineage and schema facets for Marquez or any OpenLineage
    consumer, and DatasetEvents for the schemas and aliases fll knows without
    a run, so `fll record` of them answers as this store does.
    """
    from ..render import Names
    from ..store.admin import iso_ms

    # failed runs are exported too (with their state): a dataset only they wrote as well
    store, ep = named_dataset(state, dataset, namespace, ds_name, include_failed=True)
    lo, hi = time_range(start, end)
    # the dataset under every name it has: runs recorded under a reference name
    # before it became an alias are exported too, as they were recorded
    names = Names(store).equivalents(ep)
    if fmt == "openlineage":
        try:
            from ..openlineage import export_events
        except ImportError as e:
            raise BadRequest(f"--format openlineage needs fll.openlineage ({e})",
                             "format") from None
        # a run under several names once; DatasetEvents (schemas known without a
        # run, aliases) once each
        events = {(e["run"]["runId"] if "run" in e else json.dumps(e, sort_keys=True)): e
                  for n in names for e in export_events(store, n, lo, hi)}
        docs = sorted(events.values(), key=lambda e: (e["eventTime"], "run" not in e,
                                                      e["run"]["runId"] if "run" in e
                                                      else json.dumps(e, sort_keys=True)))
    else:
        from ..store import runs as run_model

        docs = []
        # every run, failed ones included, with its final state, end and facets
        every = store.including_failed()
        runs = {r.run_id: r for n in names for r in every.runs(n, lo, hi)}
        models = run_model.run_models(store, sorted(runs))
        raw = run_model.events_of(store, models.values())
        for r in sorted(runs.values(), key=lambda r: (-r.start_ms, r.run_id)):
            info = store.operation_set(r.checksum)
            doc = {"run_id": r.run_id, "start_time_ms": r.start_ms,
                   "start": iso_ms(r.start_ms), "program": r.program,
                   "checksum": r.checksum, "operations": info.to_dict()["operations"]}
            m = models.get(r.run_id)
            if m is not None:
                run_facets, job_facets = run_model.merged_facets(m, raw)
                doc.update({"state": m.state, "end_time_ms": m.end_ms,
                            "job": {"namespace": m.job_namespace, "name": m.job_name},
                            "run_facets": run_facets, "job_facets": job_facets})
            docs.append(doc)
    if lines:
        for d in docs:
            click.echo(json.dumps(d, ensure_ascii=False))
    else:
        echo_json(docs)
