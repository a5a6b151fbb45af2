"""The ``fll run`` command: run a pipeline spec and record its lineage.

Defines the click command only; the ``fll`` group (`fll.cli.root`) loads it when called. It
must never print a stack trace for an error a user can cause; its exit codes
are the CLI's (2 for a bad spec or a failing stage, 3 for a store error).
"""
from __future__ import annotations

import click

from ..cli.common import (STORE_HELP, CliError, announce_new_store, configured_store_url,
                          exit_code_for, new_store)
from ..errors import FllError


@click.command("run")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--store", "store_url", metavar="URL", default=None,
              help=STORE_HELP)
@click.option("--run-id", default=None, help="run id to record (default: a new UUIDv7)")
@click.option("--master", default=None, help="Spark master (default: local[*])")
@click.option("--create", is_flag=True, default=False,
              help="Also create a missing SQLite store's directory (else refused: a typo).")
def run(spec: str, store_url: str | None, run_id: str | None, master: str | None,
        create: bool) -> None:
    """Run the pipeline SPEC (JSON or YAML) on Spark and record its field lineage."""
    from .runner import run_pipeline

    try:
        url = configured_store_url(store_url)
        new = new_store(url, create)  # before Spark starts: a typo costs nothing
        run_pipeline(spec, store_url=url, run_id=run_id, master=master, echo=click.echo)
        if new:
            announce_new_store(url)
    except FllError as e:
        # exit codes as every fll command: 1 not found, 2 bad input, 3 store error
        raise CliError(f"fll run: error: {e}", exit_code_for(e)) from e
