"""The ``fll`` group itself: global options, lazy commands, one-line usage errors.

Entry point `main` (a click group). Command modules of this package add
their commands to it (`fll.cli` imports them); `serve`, `run` and
`spark-conf` are their packages' commands (`fll.server.cli`,
`fll.pipeline.cli`, `fll.spark.cli`) and `tag`/`diff` (`fll.cli.govern`)
are imported only when called, so ``fll --help`` stays fast and a missing
optional piece breaks only its own command. This module must never import
Spark or the server at import time, and never print a traceback unless
asked.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from .common import EXIT_OK, EXIT_USAGE, STORE_HELP, CliError, FllGroup, State

# name -> (module, attribute, one-line help shown without importing the module)
_LAZY: dict[str, tuple[str, str, str]] = {
    "serve": ("fll.server.cli", "serve", "Serve the REST API and the lineage explorer page."),
    "run": ("fll.pipeline.cli", "run", "Run a pipeline spec and record its field lineage."),
    "tag": ("fll.cli.govern", "tag", "Classification tags (PII…) and where they reach along "
            "lineage."),
    "diff": ("fll.cli.govern", "diff", "How a field's lineage changed between two time ranges."),
    "spark-conf": ("fll.spark.cli", "spark_conf_command",
                   "Print the spark-submit flags that send every write to fll serve."),
}


class RootGroup(FllGroup):
    """The ``fll`` group: lazy `serve`/`run`, and one-line usage errors."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        names.update(n for n, (mod, _, _) in _LAZY.items() if _module_present(mod))
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in _LAZY:
            return cmd
        module, attr, _ = _LAZY[cmd_name]
        if not _module_present(module):
            return None
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise click.UsageError(f"'fll {cmd_name}' is unavailable here: cannot load "
                                   f"{module}.{attr} ({e})", ctx) from None
        if not isinstance(found, click.Command):
            raise click.UsageError(f"'fll {cmd_name}': {module}.{attr} is not a click command",
                                   ctx)
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # like click's, but lazy commands show their static help: no import for --help
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                cmd = self.commands[name]
                if cmd.hidden:
                    continue
                rows.append((name, cmd.get_short_help_str(limit=formatter.width - 20)))
            else:
                rows.append((name, _LAZY[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except CliError as e:
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:
            path = e.ctx.command_path if e.ctx else (prog_name or "fll")
            click.echo(f"{path}: usage error: {e.format_message()} (see '{path} --help')",
                       err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as e:
            click.echo(f"{prog_name or 'fll'}: error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("fll: aborted", err=True)
            sys.exit(130)  # the shell's code for an interrupt, not "not found"
        except BrokenPipeError:
            # the reader went away (`fll scan | head`): stop quietly, and keep
            # Python from complaining when it flushes stdout at exit
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            sys.exit(EXIT_OK)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else EXIT_OK)


def _module_present(module: str) -> bool:
    """Whether a lazy command's module file exists, without importing anything."""
    rel = Path(*module.split(".")[1:]).with_suffix(".py")
    return (Path(__file__).parent.parent / rel).is_file()


# -- the group ---------------------------------------------------------------------

@click.group(cls=RootGroup, name="fll", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", "store_url", metavar="URL", help=STORE_HELP)
@click.option("--verbose", "-v", is_flag=True, help="Log progress and show tracebacks on errors.")
@click.option("--create", is_flag=True, help="Let a command that records (record, admin init, "
              "serve, run) create a new SQLite store whose directory does not exist yet "
              "(without it, that is refused as a likely typo).")
@click.version_option(__version__, prog_name="fll")
@click.pass_context
def main(ctx: click.Context, store_url: str | None, verbose: bool, create: bool) -> None:
    """Field-level lineage store: scan rows, query lineage, record, export, repair."""
    ctx.obj = State(store_url, verbose, create)
    if ctx.invoked_subcommand in _LAZY:
        # hand --store (or FLL_STORE, or the config file) and --create to the lazily
        # loaded command, whose own options still win
        url = ctx.obj.url
        ctx.default_map = {ctx.invoked_subcommand: {"store": url, "store_url": url,
                                                    "create": create}}
