"""``fll record``: record runs from a file of run documents or OpenLineage
events (JSON, a list, or JSON Lines), or from the Spark listener's spool.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import BadRequest, InvalidLineageError
from .common import EXIT_USAGE, State, echo_json, format_option, pass_state
from .root import main


def _is_openlineage(item: Any) -> bool:
    """An OpenLineage event of any kind (a record document has none of these keys)."""
    return isinstance(item, dict) and (
        "eventType" in item or "schemaURL" in item or ("run" in item and "job" in item)
        or ("eventTime" in item and ("dataset" in item or "job" in item)))


def _load_json_file(file: str) -> Any:
    where = "stdin" if file == "-" else file
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as e:
        raise BadRequest(f"cannot read {where}: {e.strerror}", "FILE") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        # JSON Lines: one record or event per line
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as e:
                # one document broken at `first`, or JSON Lines broken at line n
                at = (f"line {first.lineno} column {first.colno}: {first.msg}" if n == 1
                      else f"line {n} column {e.colno}: {e.msg}")
                raise BadRequest(f"{where}: not JSON (nor JSON Lines): {at}", "FILE") from None
        if not items:
            raise BadRequest(f"{where}: empty file", "FILE") from None
        return items


def _has_column_lineage(event: dict) -> bool:
    outputs = event.get("outputs")
    return isinstance(outputs, list) and any(
        isinstance(o, dict) and isinstance(o.get("facets"), dict)
        and o["facets"].get("columnLineage") is not None for o in outputs)


def _state_event(item: dict, where: str, rid: str, start_ms: int) -> tuple[str, dict, int]:
    """The run-model event of a record carrying a run's ``state`` (and ``job``,
    ``end_time_ms``, ``run_facets``, ``job_facets``, as `fll export` writes
    them): (run id, an OpenLineage event saying so, its time)."""
    from ..store.runs import STATES

    state, job, end = item.get("state"), item.get("job"), item.get("end_time_ms")
    if state not in STATES:
        raise BadRequest(f"{where}: state must be one of {', '.join(STATES)}, got {state!r}",
                         "state")
    if not isinstance(job, dict) or not all(isinstance(job.get(k), str) and job[k]
                                            for k in ("namespace", "name")):
        raise BadRequest(f"{where}: a record with a state needs job: {{namespace, name}}",
                         "job")
    if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < 0):
        raise BadRequest(f"{where}: end_time_ms must be epoch milliseconds or null, got "
                         f"{end!r}", "end_time_ms")
    facets = [item.get(k) or {} for k in ("run_facets", "job_facets")]
    if not all(isinstance(f, dict) for f in facets):
        raise BadRequest(f"{where}: run_facets and job_facets must be objects", "run_facets")
    at = end if end is not None else start_ms
    from ..openlineage import _iso

    return rid, {"eventType": state, "eventTime": _iso(at),
                 "run": {"runId": rid, "facets": facets[0]},
                 "job": {"namespace": job["namespace"], "name": job["name"],
                         "facets": facets[1]}}, at


def start_ms_or(start: str | None, default: int) -> int:
    from ..timerange import parse_time

    return default if start is None else parse_time(start, "--start")


def _run_from_record(item: Any, where: str, run_id: str | None, start: str | None,
                     program: str | None):
    from ..opset import FieldLineageInfo
    from ..timerange import parse_time

    if not isinstance(item, dict):
        raise InvalidLineageError(f"{where}: expected an object with run_id, start and "
                                  f"operations, got {type(item).__name__}")
    rid = run_id or item.get("run_id") or item.get("runId")
    if not isinstance(rid, str) or not rid:
        raise BadRequest(f"{where}: no run id (give \"run_id\" in the file or --run-id)",
                         "run_id")
    if start is not None:
        start_ms = parse_time(start, "--start")
    elif "start_time_ms" in item or "startTimeMs" in item:
        given = item.get("start_time_ms", item.get("startTimeMs"))
        if isinstance(given, bool) or not isinstance(given, int):
            raise BadRequest(f"{where}: start_time_ms must be integer epoch milliseconds, got "
                             f"{given!r}", "start_time_ms")
        start_ms = given
    elif "start" in item:
        if isinstance(item["start"], bool) or not isinstance(item["start"], (str, int)):
            raise BadRequest(f"{where}: start must be a time expression or epoch seconds, got "
                             f"{item['start']!r}", "start")
        start_ms = parse_time(item["start"], f"{where}.start")
    else:
        raise BadRequest(f"{where}: no start time (give \"start_time_ms\" or \"start\" in the "
                         f"file, or --start)", "start")
    try:
        info = FieldLineageInfo.from_dict(item)
    except InvalidLineageError as e:
        raise InvalidLineageError(f"{where}: {e}") from None
    prog = program or item.get("program")
    if prog is not None and not isinstance(prog, str):
        raise BadRequest(f"{where}: program must be a string", "program")
    return info, rid, start_ms, prog


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True), required=False)
@click.option("--spool", metavar="DIR", help="Record the Spark listener's spooled events "
              "from DIR instead (each recorded file is deleted).")
@click.option("--server", metavar="URL", help="With --spool: record the events captured for "
              "this fll server (its spark.fll.url), into that server's store.")
@click.option("--run-id", help="Run id for a file that has none (overrides the file's).")
@click.option("--start", metavar="T", help="Run start time for a file that has none.")
@click.option("--program", help="Program (pipeline) name for the run.")
@format_option("text", "json")
@pass_state
def record(state: State, file: str | None, spool: str | None, server: str | None,
           run_id: str | None, start: str | None, program: str | None, fmt: str) -> None:
    """Record runs from FILE ('-' for stdin): JSON, a list, or JSON Lines of

    \b
    {"run_id": "r1", "start_time_ms": 1714557600000 (or "start": "now-1h"),
     "program": "nightly", "operations": [...FieldLineageInfo.to_dict() operations]}

    or OpenLineage RunEvents with columnLineage facets. All or nothing: one bad
    item stores nothing. `fll export --format json` writes this same shape.
    With --spool DIR --server URL: the events the Spark listener could not
    send to the fll server at URL, recorded into that server's store (without
    --server, the servers whose events wait in DIR are named).
    """
    if (file is None) == (spool is None):
        raise BadRequest("give either FILE or --spool DIR", "FILE")
    if server is not None and spool is None:
        raise BadRequest("--server goes with --spool DIR", "--server")
    if spool is not None:
        from ..spark.events import record_spool, select_spool

        select_spool(spool, server)  # a missing or ambiguous spool: said before opening a store
        done = record_spool(state.store(create=True), spool, server)
        if fmt == "json":
            echo_json(done)
        for r in done["rejected"]:
            click.echo(f"rejected {r['file']}: {r['error']}", err=True)
        meant = (f" (captured for {done['server']})" if done["server"] else
                 " (captured for an unknown server)" if done["recorded"] + done["unchanged"]
                 + done["empty"] + len(done["rejected"]) else "")
        click.echo(f"recorded {done['recorded']} new run(s) from {spool}{meant}, "
                   f"{done['unchanged']} already present, {done['empty']} without inputs, "
                   f"{len(done['rejected'])} rejected", err=True)
        if done["rejected"]:
            raise SystemExit(EXIT_USAGE)
        return
    assert file is not None
    data = _load_json_file(file)
    items = data if isinstance(data, list) else [data]
    where = "stdin" if file == "-" else file
    runs_: list = []
    skipped: list[str] = []
    # OpenLineage: several events of one run (START, COMPLETE…) make one run that
    # starts at the earliest eventTime and has the union of their lineage, as
    # `fll serve` records it (fll.openlineage)
    ol_runs: dict[str, list] = {}
    # what events say about datasets, kept beside lineage as `fll serve` keeps it:
    # (facts, owner, time or None for a run's stored start)
    facts_: list[tuple[list, str, int | None]] = []
    not_kept: list[str] = []
    # each RunEvent's run-model facts (fll.store.runs): (run id, event, its time)
    models_: list[tuple[str, dict, int]] = []
    for i, item in enumerate(items):
        w = where if len(items) == 1 and not isinstance(data, list) else f"{where}[{i}]"
        if not _is_openlineage(item):
            runs_.append(_run_from_record(item, w, run_id, start, program))
            if isinstance(item, dict) and "state" in item:  # as `fll export` writes a run
                models_.append(_state_event(item, w, runs_[-1][1], runs_[-1][2]))
            continue
        try:
            from .. import openlineage as ol
        except ImportError as e:
            raise BadRequest(f"{w}: is an OpenLineage event, but fll.openlineage is not "
                             f"available ({e})", "FILE") from None
        try:
            kind = ol.event_kind(item)
            if kind != "run":  # a DatasetEvent or JobEvent: schemas and symlinks only
                ol.check_static_event(item, kind)
                facts_.append((ol.dataset_facts(item, kind),
                               ol.schema_owner(item, kind) or ol.static_owner(item, kind),
                               ol.event_time_ms(item)))
                not_kept += [f"{w}: {p}" for p in ol.static_column_lineage(item, kind)]
                continue
            rid, t = ol.event_run_id(item), ol.event_time_ms(item)
            facts_.append((ol.dataset_facts(item, kind), run_id or rid, None))
            if not _has_column_lineage(item):
                models_.append((run_id or rid, item, t))
                skipped.append(w)
                if rid in ol_runs:
                    ol_runs[rid][2] = min(ol_runs[rid][2], t)
                else:
                    ol_runs[rid] = [None, rid, t, None]
                continue
            info, rid, t, prog = ol.run_event_to_lineage(item)
            models_.append((run_id or rid, item, ol.exported_end_ms(item, rid) or t))
        except (BadRequest, InvalidLineageError) as e:
            raise type(e)(f"{w}: {e}") from None
        old = ol_runs.get(rid)
        if old and old[0] is not None and old[0].checksum != info.checksum \
                and ol.normal_form(info) == info:
            info = ol.union(old[0], item) or info
        ol_runs[rid] = [info, rid, min(t, old[2]) if old else t, prog]
    starts: dict[str, int] = {}  # an OpenLineage run's start: its earliest eventTime
    for info, rid, t, prog in ol_runs.values():
        starts[run_id or rid] = start_ms_or(start, t)
        if info is not None:
            runs_.append((info, run_id or rid, start_ms_or(start, t), program or prog))
    if not runs_ and not any(f.schema is not None or f.symlinks
                             for facts, _, _ in facts_ for f in facts):
        raise BadRequest(f"{where}: nothing to record (no operations, no event with a "
                         f"columnLineage facet, no schema or symlinks facet)", "FILE")
    store = state.store(create=True)
    from ..store import runs as run_model
    # checked before anything is written: all or nothing
    model_facts = [run_model.event_facts(item, rid, at) for rid, item, at in models_]
    new = store.record_many(runs_) if runs_ else 0
    for facts in model_facts:  # after the lineage, as `fll serve` keeps them
        run_model.record_event(store, facts, store.claim_run_start(
            facts.run_id, starts.get(facts.run_id, facts.at_ms)))
    schemas, aliases = _keep_dataset_facts(store, facts_, starts)
    result = {"recorded": new, "unchanged": len(runs_) - new, "skipped": skipped,
              "schemas": schemas, "aliases": aliases, "notKept": not_kept,
              "runs": [{"run_id": r, "start_ms": s, "checksum": info.checksum}
                       for info, r, s, _ in runs_]}
    if fmt == "json":
        echo_json(result)
        return
    for info, r, _s, _p in runs_:
        click.echo(f"{r}  {info.checksum}")
    for w in skipped:
        click.echo(f"skipped {w}: event carries no columnLineage facet", err=True)
    for w in not_kept:
        click.echo(f"not kept {w}: a DatasetEvent's or JobEvent's column lineage is declared "
                   f"lineage outside any run; fll keeps column lineage per run", err=True)
    click.echo(f"recorded {new} new run(s), {len(runs_) - new} already present"
               + (f"; {schemas} schema(s), {aliases} alias(es)" if schemas or aliases else ""),
               err=True)


def _keep_dataset_facts(store: Any, facts_: list, starts: dict[str, int]) -> tuple[int, int]:
    """Record the schemas and symlinks events named, as `fll serve` does: a run's
    under the run's stored start (else its earliest event), a DatasetEvent's or
    JobEvent's at its time. (schemas, aliases) written."""
    from ..openlineage import record_facts

    schemas = aliases = 0
    for facts, owner, at in facts_:
        if at is None:
            run = store.run(owner)
            at = run.start_ms if run is not None else starts[owner]
        kept = record_facts(store, facts, owner, at)
        schemas, aliases = schemas + kept[0], aliases + kept[1]
    return schemas, aliases
