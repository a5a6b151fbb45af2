"""The ``fll`` command line: range scans, lineage at the terminal, record/export, admin.

Entry point `main` (a click group). The store comes from ``--store``, else
``FLL_STORE``, else the config file (``$FLL_CONFIG`` or ``./conf/fll.yaml``,
key ``store``), else ``sqlite:///fll-data/fll.db``. Exit codes: 0 ok,
1 not found, 2 usage error (bad option, time, file or lineage), 3 store or
internal error. Every error is one line on stderr saying what failed and in
which command; a traceback only with ``--verbose``.

`serve` and `run` live in other modules and are imported only when called,
so ``fll --help`` stays fast and a missing optional piece breaks only its own
command. This module must never import Spark or the server at import time,
and never print a traceback unless asked.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from . import __version__
from .errors import (BadRequest, FllError, InvalidLineageError, NotFound, PipelineError,
                     RecipeError, StoreError)

if TYPE_CHECKING:  # pragma: no cover - the store is imported on first use, for startup time
    from .store.lineage import LineageStore

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3
#: the one statement of how every command finds its store (see `configured_store_url`)
STORE_HELP = ("Store URL (sqlite:///path.db, hbase://…, bigtable://…). Default: $FLL_STORE, "
              "then 'store' in $FLL_CONFIG or ./conf/fll.yaml, then sqlite:///fll-data/fll.db.")
CONFIG_ENV = "FLL_CONFIG"
DEFAULT_CONFIG = Path("conf") / "fll.yaml"

# name -> (module, attribute, one-line help shown without importing the module)
_LAZY: dict[str, tuple[str, str, str]] = {
    "serve": ("fll.server.cli", "serve", "Serve the REST API and the lineage explorer page."),
    "run": ("fll.pipeline.cli", "run", "Run a pipeline spec and record its field lineage."),
    "tag": ("fll.govern_cli", "tag", "Classification tags (PII…) and where they reach along "
            "lineage."),
    "diff": ("fll.govern_cli", "diff", "How a field's lineage changed between two time ranges."),
    "spark-conf": ("fll.spark.listener", "spark_conf_command",
                   "Print the spark-submit flags that send every write to fll serve."),
}


# -- configuration -----------------------------------------------------------------

def load_config(path: str | os.PathLike | None = None) -> dict:
    """The config file as a dict: ``path``, else ``$FLL_CONFIG``, else ``./conf/fll.yaml``
    if it exists (else ``{}``). A named file that is missing or malformed is a BadRequest."""
    named = path or os.environ.get(CONFIG_ENV)
    p = Path(named) if named else DEFAULT_CONFIG
    if not p.is_file():
        if named:
            raise BadRequest(f"config file {p} (from {CONFIG_ENV if not path else 'path'}) "
                             f"does not exist", "config")
        return {}
    import yaml

    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise BadRequest(f"config file {p}: cannot read it: {e}".replace("\n", " "),
                         "config") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadRequest(f"config file {p}: expected a mapping of settings, got "
                         f"{type(data).__name__}", "config")
    store = data.get("store")
    if store is not None and not isinstance(store, str):
        raise BadRequest(f"config file {p}: 'store' must be a store URL string", "config")
    return data


def configured_store_url(option: str | None = None) -> str:
    """``--store``, else ``FLL_STORE``, else the config file's ``store``, else the default."""
    if option:
        return option
    if os.environ.get("FLL_STORE"):
        return os.environ["FLL_STORE"]
    from .store import DEFAULT_URL

    return load_config().get("store") or DEFAULT_URL


# -- errors ------------------------------------------------------------------------

class CliError(click.ClickException):
    """An error already phrased as its one output line, with its exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(" ".join(message.split("\n")))
        # click declares exit_code a ClassVar but reads it from the instance
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        click.echo(self.message, err=True)


def exit_code_for(error: FllError) -> int:
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    # a pipeline spec that does not check out, or a stage that fails on its input,
    # is bad input to `fll run`, as a malformed option is to every other command
    if isinstance(error, (BadRequest, InvalidLineageError, RecipeError, PipelineError)):
        return EXIT_USAGE
    return EXIT_STORE


def _verbose(ctx: click.Context) -> bool:
    obj = ctx.find_root().obj
    return bool(getattr(obj, "verbose", False))


class FllGroup(click.Group):
    """A group that turns every fll error raised below it into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except FllError as e:
            where = " ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))
            if _verbose(ctx):
                traceback.print_exc()
            raise CliError(f"{where}: error: {e}", exit_code_for(e)) from None
        except Exception as e:  # a bug: still one line, the traceback on request
            where = " ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))
            if _verbose(ctx):
                traceback.print_exc()
            raise CliError(f"{where}: internal error: {type(e).__name__}: {e} (rerun with "
                           f"--verbose for the traceback)", EXIT_STORE) from None


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
    return (Path(__file__).parent / rel).is_file()


# -- shared state ------------------------------------------------------------------

class State:
    """Global options and the store, opened on first use and closed with the context."""

    def __init__(self, store_option: str | None, verbose: bool, create: bool = False):
        self.store_option = store_option
        self.verbose = verbose
        self.create = create
        self._url: str | None = None
        self._store: LineageStore | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = configured_store_url(self.store_option)
        return self._url

    def store(self, *, create: bool = False):
        if self._store is None:
            from .store import open_store

            if not create:
                require_existing(self.url)
            new = create and new_store(self.url, self.create)
            self._store = open_store(self.url)
            click.get_current_context().find_root().call_on_close(self._store.close)
            if new:
                announce_new_store(self.url)
        return self._store

    def table(self):
        """The store's rows without reading them as lineage: what the commands
        over raw rows (scan, get, stats, fsck, upgrade) need, in any format."""
        if self._store is not None:
            return self._store.table
        from .store import open_rows

        require_existing(self.url)
        table = open_rows(self.url)
        click.get_current_context().find_root().call_on_close(table.close)
        return table

    def log(self, message: str) -> None:
        if self.verbose:
            click.echo(message, err=True)


def _sqlite_file(url: str) -> str | None:
    """The file an SQLite store URL names (as the backend opens it), else None."""
    if not url.lower().startswith("sqlite://"):
        return None
    path = url.split("://", 1)[1][1:].partition("?")[0]
    return path if path and path != ":memory:" else None


def new_store(url: str, create: bool) -> bool:
    """Whether opening ``url`` makes a new, empty SQLite store (its file is not
    there). Its directory must exist: a missing directory is a typo in the store
    path, not a first start, and is refused in one line naming it (`StoreError`)
    unless ``create`` (``--create``) or ``url`` is the built-in default
    (``./fll-data/fll.db``, which nobody types)."""
    from .store import DEFAULT_URL, redact

    path = _sqlite_file(url)
    if path is None or Path(path).exists():
        return False
    parent = Path(os.path.abspath(path)).parent
    if not parent.is_dir() and not create and url != DEFAULT_URL:
        raise StoreError(f"store {redact(url)}: directory {parent} does not exist (a typo in "
                         f"the store path?); give --create to create it and a new store")
    return True


def announce_new_store(url: str) -> None:
    """The one line that says a command created a new, empty store."""
    from .store import redact

    click.echo(f"fll: created a new, empty store {redact(url)}", err=True)


def require_existing(url: str) -> None:
    """Refuse to read an SQLite store that is not there (opening would create it empty)."""
    from .store import redact

    if not url.lower().startswith("sqlite://"):
        return
    path = url.split("://", 1)[1][1:].partition("?")[0]
    if path and not Path(path).exists():
        raise StoreError(f"store {redact(url)} does not exist (create it with "
                         f"'fll admin init' or by recording a run)")


pass_state = click.make_pass_decorator(State)


def _range(start: str | None, end: str | None) -> tuple[int, int]:
    from .timerange import parse_range

    return parse_range(start, end, allow_iso=True)


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


class _Lines:
    """stdout for long outputs: the first line goes out at once, later ones at least
    every 0.2 s; one flush per line (what click.echo does) would cost more than the scan."""

    def __init__(self) -> None:
        self.out = sys.stdout
        self.last = 0.0

    def write(self, text: str) -> None:
        self.out.write(text)
        now = time.monotonic()
        if now - self.last > 0.2:
            self.out.flush()
            self.last = now

    def close(self) -> None:
        self.out.flush()


def _stream_lines(lines: Iterator[str]) -> None:
    out = _Lines()
    try:
        for line in lines:
            out.write(line + "\n")
    finally:
        out.close()


def _stream_json_array(items: Iterator[Any]) -> None:
    """A JSON array written item by item, so long scans print at once and use flat memory."""
    def lines() -> Iterator[str]:
        yield "["
        first = True
        for item in items:
            yield ("" if first else ",") + json.dumps(item, ensure_ascii=False)
            first = False
        yield "]"
    _stream_lines(lines())


def _progress(label: str, length: int):
    return click.progressbar(length=length, label=label, file=sys.stderr,
                             show_pos=True)


start_option = click.option("--start", metavar="T", help="Range start, inclusive: epoch "
                            "seconds, now-7d, now-1d+4h or ISO 8601 (default: 0).")
end_option = click.option("--end", metavar="T", help="Range end, exclusive, same forms "
                          "(default: now).")


def format_option(*choices: str, default: str | None = None) -> Callable:
    return click.option("--format", "fmt", type=click.Choice(list(choices)),
                        default=default or choices[0], show_default=True,
                        help="Output format.")


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


# -- rows ----------------------------------------------------------------------------

def _table_line(key: bytes, cols: dict[str, bytes]) -> str:
    from .store import admin

    row = admin.describe_row(key, cols)
    shown = []
    for c, v in row["columns"].items():
        if row["kind"] == "data" or isinstance(v, dict):
            shown.append(f"{c}=<{len(cols[c])} bytes>")
        elif row["kind"] == "run" and c == "t":
            shown.append(f"t={admin.iso_ms(v)}")
        else:
            shown.append(f"{c}={v}")
    return f"{row['kind']:<15} {admin.human_key(key)}  {' '.join(shown)}"


def _raw_line(key: bytes, cols: dict[str, bytes]) -> str:
    from .store.admin import printable_key

    return printable_key(key) + "\t" + " ".join(
        f"{c}={printable_key(v)}" for c, v in sorted(cols.items()))


@main.command()
@click.option("--prefix", metavar="P", help="A row kind (d data, b/f backward/forward index, "
              "B/F the same by operation set, r runs, s schemas, a/A aliases), or a key "
              "prefix as keys are printed, e.g. 'b|' or 'b|default|Employee' (default: all).")
@click.option("--dataset", metavar="NS:NAME", help="Only index rows of this dataset.")
@start_option
@end_option
@click.option("--limit", type=click.IntRange(min=1), help="Stop after N rows.")
@click.option("--reverse", is_flag=True, help="Descending key order.")
@format_option("table", "json", "raw")
@pass_state
def scan(state: State, prefix: str | None, dataset: str | None, start: str | None,
         end: str | None, limit: int | None, reverse: bool, fmt: str) -> None:
    """Range-scan raw rows, decoding keys (times as ISO 8601) and values (msgpack as JSON).

    With --start/--end only rows that carry a run start time (index and run
    rows) are shown. Output streams: it starts at once and memory stays flat.
    """
    from .render import parse_dataset_ref
    from .store import admin

    ds = None
    if dataset:
        ep = parse_dataset_ref(dataset, "--dataset")
        ds = (ep.namespace, ep.name)
    lo = hi = None
    if start is not None or end is not None:
        lo, hi = _range(start, end)
    table = state.table()
    kind, key_prefix = _scan_prefix(prefix)
    rows = admin.scan_rows(table, kinds=[kind] if kind else None, dataset=ds,
                           start_ms=lo, end_ms=hi, limit=None if key_prefix else limit,
                           reverse=reverse)
    if key_prefix:
        rows = _prefixed(table, rows, key_prefix, ds is None and lo is None, limit, reverse)
    if fmt == "json":
        _stream_json_array(admin.describe_row(k, c) for k, c in rows)
        return
    line = _table_line if fmt == "table" else _raw_line
    _stream_lines(line(key, cols) for key, cols in rows)


def _scan_prefix(prefix: str | None) -> tuple[bytes | None, bytes | None]:
    """(row kind, longer key prefix or None) of `scan --prefix`: a bare kind
    (``b``), the kind with its separator (``b|``), or a printed key prefix
    (``b|default|Employee``; parts stay %-escaped as printed, ``\\xNN`` for bytes)."""
    from . import rowkeys as rk
    from .store.admin import parse_printable_key

    if not prefix:
        return None, None
    raw = parse_printable_key(prefix)
    kind = raw[:1]
    if kind not in rk.KINDS or (len(raw) > 1 and raw[1:2] != rk.SEP):
        raise BadRequest(f"--prefix {prefix!r} starts with no row kind: use one of "
                         f"{', '.join(k.decode() for k in rk.KINDS)} or a key prefix such "
                         f"as 'b|' or 'b|default|Employee'", "prefix")
    return kind, raw if len(raw) > 2 else None


def _prefixed(table: Any, rows: Iterator[tuple[bytes, dict[str, bytes]]], key_prefix: bytes,
              direct: bool, limit: int | None, reverse: bool
              ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
    """Rows whose key starts with ``key_prefix``: one key range when nothing else
    filters, else the kind's rows filtered."""
    from . import rowkeys as rk

    if direct:
        yield from table.scan(key_prefix, rk.prefix_end(key_prefix), limit=limit,
                              reverse=reverse)
        return
    n = 0
    for key, cols in rows:
        if key.startswith(key_prefix):
            yield key, cols
            n += 1
            if limit is not None and n >= limit:
                return


@main.command()
@click.argument("rowkey")
@click.option("--hex", "hex_form", is_flag=True, help="ROWKEY is hexadecimal.")
@format_option("json", "table", "raw")
@pass_state
def get(state: State, rowkey: str, hex_form: bool, fmt: str) -> None:
    r"""Show one row. ROWKEY as `fll scan` prints it: the table form (ISO time), the
    raw form (\xNN escapes), or hex with --hex."""
    from .store import admin, redact

    key = admin.parse_row_key(rowkey, hex_form=hex_form)
    table = state.table()
    cols = table.get(key)
    if cols is None:
        raise NotFound(f"row {admin.printable_key(key)!r} not found in store "
                       f"{redact(table.url)}")
    if fmt == "json":
        _echo_json(admin.describe_row(key, cols))
    elif fmt == "table":
        click.echo(_table_line(key, cols))
    else:
        click.echo(_raw_line(key, cols))


def _dataset(state: State, text: str | None, namespace: str | None = None,
             dataset: str | None = None, parameter: str = "NS:NAME",
             include_failed: bool = False):
    """The store and the dataset named compactly or by --namespace/--dataset
    (fll.names); ``include_failed``: a store that answers from failed runs too
    (`LineageStore.including_failed`), so a dataset only they wrote is known."""
    from .names import resolve_dataset

    store = state.store()
    if include_failed:
        store = store.including_failed()
    return store, resolve_dataset(store, text, namespace, dataset, parameter)


def name_options(field: bool = False) -> Callable:
    """--namespace/--dataset (and --field): names holding ':' (URI namespaces)
    given whole, instead of the compact argument."""
    def deco(f: Callable) -> Callable:
        if field:
            f = click.option("--field", "field_name", metavar="F",
                             help="Field name (with --namespace and --dataset).")(f)
        f = click.option("--dataset", "ds_name", metavar="NAME",
                         help="Dataset name, whole (with --namespace).")(f)
        return click.option("--namespace", metavar="NS",
                            help="Namespace, whole: e.g. postgres://db:5432.")(f)
    return deco


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
        _echo_json([{"namespace": d.namespace, "name": d.name, "aliases": aliases[d]}
                    for d in found])
        return
    for d in found:
        also = f"  (also {', '.join(aliases[d])})" if aliases[d] else ""
        click.echo(f"{d.namespace}:{d.name}{also}")


include_failed_option = click.option(
    "--include-failed", is_flag=True,
    help="Also answer from runs that ended FAIL or ABORT (left out by default).")


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
    from .store.admin import iso_ms
    from .store.runs import run_states

    from .render import Names

    store, ep = _dataset(state, dataset, namespace, ds_name, include_failed=include_failed)
    lo, hi = _range(start, end)
    # the dataset under every name it has (runs recorded under an alias before it was one)
    by_id = {r.run_id: r for e in Names(store).equivalents(ep)
             for r in store.runs(e, lo, hi, direction=direction, limit=limit)}
    found = sorted(by_id.values(), key=lambda r: (-r.start_ms, r.run_id))
    found = found[:limit] if limit else found
    states = run_states(store, [r.run_id for r in found])
    if fmt == "json":
        _echo_json([{"run_id": r.run_id, "start_ms": r.start_ms, "start": iso_ms(r.start_ms),
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
    from .render import Names

    store, ep = _dataset(state, dataset, namespace, ds_name, include_failed=include_failed)
    lo, hi = _range(start, end)
    found: set[str] = set()
    low = (prefix or "").lower()
    for e in Names(store).equivalents(ep):
        found.update(store.fields(e, lo, hi, prefix))
        found.update(n for n in store.schema(e.namespace, e.name, lo, hi) or {}
                     if n.lower().startswith(low))
    names = sorted(found)
    if fmt == "json":
        _echo_json(names)
    else:
        for n in names:
            click.echo(n)


@main.command()
@format_option("table", "json")
@pass_state
def stats(state: State, fmt: str) -> None:
    """Rows and bytes per row kind, distinct operation sets, datasets, runs (one full
    scan). Runs whose START was received but that never completed are counted apart."""
    from .store import admin, redact

    result = admin.stats(state.table())
    result["store"] = redact(result["store"])
    if fmt == "json":
        _echo_json(result)
        return
    click.echo(f"store           {result['store']}")
    click.echo(f"rows            {result['rows']}  ({result['bytes']} bytes)")
    for name, v in result["kinds"].items():
        if v["rows"] or name != "unknown":
            click.echo(f"  {name:<14}{v['rows']:>10} rows {v['bytes']:>14} bytes")
    click.echo(f"operation sets  {result['operation_sets']}")
    click.echo(f"datasets        {result['datasets']}")
    click.echo(f"runs            {result['runs']}")
    if result.get("started_only_runs"):
        # an OpenLineage START was received and no COMPLETE (yet): not a recorded run
        click.echo(f"started only    {result['started_only_runs']}  (START received, "
                   f"never completed)")
    if "file_bytes" in result:
        click.echo(f"file size       {result['file_bytes']} bytes")


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
    from . import render
    from .names import resolve_field
    from .store.reads import ReadView, SetMerges

    # every store read of the walk done once (a hop past the depth asks each
    # reached field's sets: one read per dataset, not per field)
    plain = state.store()
    store = ReadView(plain.including_failed() if include_failed else plain, SetMerges())
    root = resolve_field(store, field_ref, namespace, ds_name, field_name)
    lo, hi = _range(start, end)
    show = not direct_only and render.parse_indirect(indirect, "--indirect")
    asked = bool(show_ops or show_runs)
    graph = render.walk_lineage(store, root, direction, depth, lo, hi, show_indirect=show,
                                with_operations=asked or fmt == "tree")
    graph.aliases = [f"{a}:{b}" for a, b in store.aliases(graph.root.endpoint.namespace,
                                                          graph.root.endpoint.name)]
    if fmt == "json":
        if not asked:
            graph.operations.clear()
        _echo_json(graph.to_dict())
    elif fmt == "tree":
        small = len(graph.nodes) <= 12
        click.echo(render.render_tree(graph, ops=bool(show_ops),
                                      runs=bool(show_runs) or (not asked and small)),
                   nl=False)
    else:
        click.echo(render.RENDERERS[fmt](graph), nl=False)


# -- record / export -------------------------------------------------------------------

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
    from .store.runs import STATES

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
    from .openlineage import _iso

    return rid, {"eventType": state, "eventTime": _iso(at),
                 "run": {"runId": rid, "facets": facets[0]},
                 "job": {"namespace": job["namespace"], "name": job["name"],
                         "facets": facets[1]}}, at


def start_ms_or(start: str | None, default: int) -> int:
    from .timerange import parse_time

    return default if start is None else parse_time(start, "--start")


def _run_from_record(item: Any, where: str, run_id: str | None, start: str | None,
                     program: str | None):
    from .opset import FieldLineageInfo
    from .timerange import parse_time

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
        from .spark.events import record_spool, select_spool

        select_spool(spool, server)  # a missing or ambiguous spool: said before opening a store
        done = record_spool(state.store(create=True), spool, server)
        if fmt == "json":
            _echo_json(done)
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
            from . import openlineage as ol
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
    from .store import runs as run_model
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
        _echo_json(result)
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
    from .openlineage import record_facts

    schemas = aliases = 0
    for facts, owner, at in facts_:
        if at is None:
            run = store.run(owner)
            at = run.start_ms if run is not None else starts[owner]
        kept = record_facts(store, facts, owner, at)
        schemas, aliases = schemas + kept[0], aliases + kept[1]
    return schemas, aliases


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
    from .store.admin import iso_ms

    from .render import Names

    # failed runs are exported too (with their state): a dataset only they wrote as well
    store, ep = _dataset(state, dataset, namespace, ds_name, include_failed=True)
    lo, hi = _range(start, end)
    # the dataset under every name it has: runs recorded under a reference name
    # before it became an alias are exported too, as they were recorded
    names = Names(store).equivalents(ep)
    if fmt == "openlineage":
        try:
            from .openlineage import export_events
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
        from .store import runs as run_model

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
        _echo_json(docs)


# -- admin ---------------------------------------------------------------------------

@main.group(cls=FllGroup)
def admin() -> None:
    """Repair, retention, migration and creation of a store."""


@admin.command()
@pass_state
def init(state: State) -> None:
    """Create the store's table (SQLite: the file) if it does not exist."""
    from .store import admin as adm, redact

    click.echo(redact(adm.init(state.store(create=True).table)))


@admin.command()
@click.option("--repair", is_flag=True, help="Delete dangling and orphaned rows, rebuild "
              "lost run rows and index twins.")
@format_option("text", "json")
@pass_state
def fsck(state: State, repair: bool, fmt: str) -> None:
    """Find index rows whose data row is missing, data rows nothing references,
    index rows without their twins and bucket rows no run keeps.

    Exit status: 0 when the store is clean or every problem was repaired, 1 when
    problems remain (found without --repair, or corrupt and unknown rows, which
    are reported and never changed), 3 when the store cannot be read.
    Each repair is re-checked in the transaction that applies it, so it is safe
    beside writers on SQLite.
    """
    from .store import admin as adm

    report = adm.fsck(state.table(), repair=repair)
    if fmt == "json":
        _echo_json(report.to_dict())
        click.get_current_context().exit(report.exit_code)
    d = report.to_dict()
    labels = [("dangling_index_rows", "dangling index row (data row missing)"),
              ("orphaned_data_rows", "orphaned data or shape row (nothing references it)"),
              ("missing_run_rows", "run row missing (index rows present)"),
              ("missing_index_twins", "index twin missing"),
              ("stale_bucket_rows", "bucket row no run keeps"),
              ("first_run_cells_without_their_run", "first-run cell without its run cell"),
              ("unfinished_runs", "run whose index rows were never all written"),
              ("schema_rows_without_their_schema", "schema row naming a missing schema"),
              ("unused_schemas", "schema no schema row names"),
              ("older_format_rows", "row of an older format left by an upgrade"),
              ("corrupt_rows", "corrupt row"),
              ("unknown_rows", "row of no fll shape")]
    for name, label in labels:
        for key in d[name]:
            click.echo(f"{label}: {key}")
    n = report.problems
    if report.clean:
        click.echo(f"clean: {report.rows} rows checked")
    elif report.repaired:
        left = f"; {report.unrepaired} left (corrupt and unknown rows are reported, " \
               f"not changed)" if report.unrepaired else ""
        gone = n - report.unrepaired
        click.echo(f"found {gone} problem(s) in {report.rows} rows, repaired {report.fixed} "
                   f"(the rest a writer had already finished){left}"
                   if report.fixed < gone else
                   f"repaired {report.fixed} problem(s) in {report.rows} rows{left}")
    else:
        click.echo(f"found {n} problem(s) in {report.rows} rows; run with --repair to fix")
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
    from .store import admin as adm
    from .timerange import parse_time

    cut = parse_time(before, "--before")
    store = state.store()
    total = adm.count_runs_before(store.table, cut)
    label = "counting old runs" if dry_run else "purging runs"
    with _progress(label, total) as bar:
        report = adm.purge(store, cut, dry_run=dry_run, progress=bar.update)
    if fmt == "json":
        _echo_json(report.to_dict())
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
    from .store import admin as adm

    table = state.table()
    from .store.lineage import FORMAT

    total = adm.count_upgrade_rows(table) if 0 < adm.store_format(table) < FORMAT else 0
    with _progress("counting rows" if dry_run else "upgrading", total) as bar:
        report = adm.upgrade(table, dry_run=dry_run, batch_size=batch_size,
                             progress=bar.update)
    if fmt == "json":
        _echo_json(report.to_dict())
        return
    if report.from_format in (0, report.to_format):
        click.echo(f"already format {report.to_format}: nothing to do")
        return
    verb = "would convert" if dry_run else "converted"
    click.echo(f"{verb} format {report.from_format} to {report.to_format}: "
               f"{report.index_rows} index rows read, {report.bucket_rows} bucket rows "
               f"{'to write' if dry_run else 'written'}, {report.data_rows} operation sets "
               f"and shapes and {report.schema_rows} schema rows "
               f"{'to rewrite' if dry_run else 'rewritten'}")


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
    from .store import LineageStore, admin as adm, open_table, redact

    require_existing(source)
    src = open_table(source)
    dst = open_table(destination)
    try:
        if not raw:
            src_store, dst_store = LineageStore(src), LineageStore(dst)
            total = adm.count_runs_before(src, 2**63 - 1)
            with _progress("copying runs", total) as bar:
                runs = adm.migrate_runs(src_store, dst_store, batch_size=batch_size,
                                        progress=bar.update)
            runs.source, runs.destination = redact(source), redact(destination)
            if fmt == "json":
                _echo_json(runs.to_dict())
            else:
                click.echo(f"copied {runs.runs} runs ({runs.new_runs} new) from "
                           f"{runs.source} to {runs.destination}")
            return
        total = sum(1 for _ in src.scan())
        state.log(f"copying {total} rows from {redact(source)} to {redact(destination)}")
        with _progress("copying rows", total) as bar:
            report = adm.migrate(src, dst, batch_size=batch_size, progress=bar.update,
                                 total=total)
    finally:
        src.close()
        dst.close()
    report.source, report.destination = redact(source), redact(destination)
    if fmt == "json":
        _echo_json(report.to_dict())
        return
    resumed = "" if report.resumed_from is None else \
        f" (resumed near {adm.printable_key(report.resumed_from)})"
    click.echo(f"copied {report.copied} of {report.total} rows from {report.source} to "
               f"{report.destination}{resumed}")


if __name__ == "__main__":  # pragma: no cover
    main()
