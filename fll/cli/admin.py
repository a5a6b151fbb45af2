"""``fll admin``: creation, repair (fsck), retention (purge), format upgrade
and migration of a store (the work is `fll.store.admin`'s).
"""
from __future__ import annotations


import click


from .common import (FllGroup, State, echo_json, format_option, pass_state, progress_bar,
                     require_existing)
from .root import main


@main.group(cls=FllGroup)
def admin() -> None:
    """Repair, retention, migration and creation of a store."""


@admin.command()
@pass_state
def init(state: State) -> None:
    """Create the store's table (SQLite: the file) if it does not exist."""
    from ..store import admin as adm, redact

    click.echo(redact(adm.init(state.store(create=True).table)))


@admin.command()
@click.option("--repair", is_flag=True, help="Delete dangling rows and the rows nothing "
              "references, rebuild lost run rows and index twins.")
@format_option("text", "json")
@pass_state
def fsck(state: State, repair: bool, fmt: str) -> None:
    """Find index rows whose data row is missing, index rows without their
    twins, bucket rows no run keeps, and the rows nothing references.

    Rows nothing references (the set of a START its COMPLETE superseded, a
    schema no run names any more) are reclaimable, not wrong: no answer reads
    them, and --repair removes them.

    Exit status: 0 when the store is sound (or every problem was repaired), 1
    when problems remain (found without --repair, or corrupt and unknown rows,
    which are reported and never changed), 3 when the store cannot be read.
    Each repair is re-checked in the transaction that applies it, so it is safe
    beside writers on SQLite.
    """
    from ..store import admin as adm

    report = adm.fsck(state.table(), repair=repair)
    if fmt == "json":
        echo_json(report.to_dict())
        click.get_current_context().exit(report.exit_code)
    d = report.to_dict()
    labels = [("dangling_index_rows", "dangling index row (data row missing)"),
              ("missing_run_rows", "run row missing (index rows present)"),
              ("missing_index_twins", "index twin missing"),
              ("stale_bucket_rows", "bucket row no run keeps"),
              ("first_run_cells_without_their_run", "first-run cell without its run cell"),
              ("unfinished_runs", "run whose index rows were never all written"),
              ("schema_rows_without_their_schema", "schema report naming a missing schema"),
              ("older_format_rows", "row of an older format left by an upgrade"),
              ("corrupt_rows", "corrupt row"),
              ("unknown_rows", "row of no fll shape"),
              ("orphaned_data_rows", "reclaimable: data or shape row nothing references"),
              ("unused_schemas", "reclaimable: schema no schema report names")]
    for name, label in labels:
        for key in d[name]:
            click.echo(f"{label}: {key}")
    n = report.problems
    spare = (f"{report.reclaimable} row(s) nothing references"
             if report.reclaimable and not report.repaired else "")
    if report.clean:
        click.echo(f"clean: {report.rows} rows checked")
    elif report.repaired:
        left = f"; {report.unrepaired} left (corrupt and unknown rows are reported, " \
               f"not changed)" if report.unrepaired else ""
        gone = n + report.reclaimable - report.unrepaired
        click.echo(f"found {gone} problem(s) or reclaimable row(s) in {report.rows} rows, "
                   f"repaired {report.fixed} (the rest a writer had already finished){left}"
                   if report.fixed < gone else
                   f"repaired {report.fixed} problem(s) or reclaimable row(s) in "
                   f"{report.rows} rows{left}")
    elif report.sound:
        click.echo(f"sound: {report.rows} rows checked, no problem; {spare}, "
                   f"reclaimable with --repair")
    else:
        also = f" (and {spare}, reclaimable)" if spare else ""
        click.echo(f"found {n} problem(s) in {report.rows} rows{also}; "
                   f"run with --repair to fix")
    click.get_current_context().exit(report.exit_code)


@admin.command()
@click.option("--before", required=True, metavar="T",
              help="Remove runs that started before T (epoch seconds, now-30d, ISO 8601).")
@click.option("--dry-run", is_flag=True, help="Count what would go; change nothing.")
@format_option("text", "json")
@pass_state
def purge(state: State, before: str, dry_run: bool, fmt: str) -> None:
    """Retention: remove old runs (index rows first, then run rows), then the data rows
    no remaining run uses. Safe to rerun after an interruption."""
    from ..store import admin as adm
    from ..timerange import parse_time

    cut = parse_time(before, "--before")
    store = state.store()
    total = adm.count_runs_before(store.table, cut)
    label = "counting old runs" if dry_run else "purging runs"
    with progress_bar(label, total) as bar:
        report = adm.purge(store, cut, dry_run=dry_run, progress=bar.update)
    if fmt == "json":
        echo_json(report.to_dict())
        return
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{verb} {report.runs} run(s) started before {adm.iso_ms(cut)}: "
               f"{report.index_rows} index rows, {report.data_rows} data rows, "
               f"{report.shape_rows} shape rows")


@admin.command()
@click.option("--dry-run", is_flag=True, help="Count what would be converted; change nothing.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True)
@format_option("text", "json")
@pass_state
def upgrade(state: State, dry_run: bool, batch_size: int, fmt: str) -> None:
    """Convert the store to this fll's row format, in place, resumable (rerun after
    an interruption and it continues). Stop the older fll's writers first: this
    fll reads and writes the store only once it is converted."""
    from ..store import admin as adm

    table = state.table()
    from ..store.lineage import FORMAT

    total = adm.count_upgrade_rows(table) if 0 < adm.store_format(table) < FORMAT else 0
    with progress_bar("counting rows" if dry_run else "upgrading", total) as bar:
        report = adm.upgrade(table, dry_run=dry_run, batch_size=batch_size,
                             progress=bar.update)
    if fmt == "json":
        echo_json(report.to_dict())
        return
    if report.from_format in (0, report.to_format):
        click.echo(f"already format {report.to_format}: nothing to do")
        return
    verb = "would convert" if dry_run else "converted"
    click.echo(f"{verb} format {report.from_format} to {report.to_format}: "
               f"{report.index_rows} index rows read, {report.bucket_rows} bucket rows "
               f"{'to write' if dry_run else 'written'}, {report.data_rows} operation sets "
               f"and shapes and {report.schema_rows} schema rows "
               f"{'to rewrite' if dry_run else 'rewritten'}, {report.schema_refs} schema "
               f"reports and {report.alias_rows} aliases {'to move' if dry_run else 'moved'} "
               f"to their dataset's row")


@admin.command()
@click.option("--from", "source", required=True, metavar="URL", help="Store to copy from.")
@click.option("--to", "destination", required=True, metavar="URL", help="Store to copy into "
              "(empty, or a partial copy from an interrupted run: it resumes).")
@click.option("--raw", is_flag=True, help="Copy raw rows in key order (same format only) "
              "instead of runs.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True)
@format_option("text", "json")
@pass_state
def migrate(state: State, source: str, destination: str, raw: bool, batch_size: int,
            fmt: str) -> None:
    """Copy every run between stores (e.g. SQLite to HBase or Bigtable, or an old
    format to the current one), resumable: rerun it after an interruption."""
    from ..store import LineageStore, admin as adm, open_table, redact

    require_existing(source)
    src = open_table(source)
    dst = open_table(destination)
    try:
        if not raw:
            src_store, dst_store = LineageStore(src), LineageStore(dst)
            total = adm.count_runs_before(src, 2**63 - 1)
            with progress_bar("copying runs", total) as bar:
                runs = adm.migrate_runs(src_store, dst_store, batch_size=batch_size,
                                        progress=bar.update)
            runs.source, runs.destination = redact(source), redact(destination)
            if fmt == "json":
                echo_json(runs.to_dict())
            else:
                click.echo(f"copied {runs.runs} runs ({runs.new_runs} new) from "
                           f"{runs.source} to {runs.destination}")
            return
        total = sum(1 for _ in src.scan())
        state.log(f"copying {total} rows from {redact(source)} to {redact(destination)}")
        with progress_bar("copying rows", total) as bar:
            report = adm.migrate(src, dst, batch_size=batch_size, progress=bar.update,
                                 total=total)
    finally:
        src.close()
        dst.close()
    report.source, report.destination = redact(source), redact(destination)
    if fmt == "json":
        echo_json(report.to_dict())
        return
    resumed = "" if report.resumed_from is None else \
        f" (resumed near {adm.printable_key(report.resumed_from)})"
    click.echo(f"copied {report.copied} of {report.total} rows from {report.source} to "
               f"{report.destination}{resumed}")
