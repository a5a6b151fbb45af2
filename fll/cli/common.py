"""What every ``fll`` command shares: where the store is (config file, ``--store``,
``FLL_STORE``), the global state the root group hands down, one-line errors
with their exit codes (0 ok, 1 not found, 2 usage error, 3 store or internal
error), and the common options and output helpers.

This module must never import Spark or the server, and opens the store only
when a command asks for it.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from ..errors import (BadRequest, FllError, InvalidLineageError, NotFound, PipelineError,
                      RecipeError, StoreError)

if TYPE_CHECKING:  # pragma: no cover - the store is imported on first use, for startup time
    from ..store.lineage import LineageStore

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3
#: the one statement of how every command finds its store (see `configured_store_url`)
STORE_HELP = ("Store URL (sqlite:///path.db, hbase://…, bigtable://…). Default: $FLL_STORE, "
              "then 'store' in $FLL_CONFIG or ./conf/fll.yaml, then sqlite:///fll-data/fll.db.")
CONFIG_ENV = "FLL_CONFIG"
DEFAULT_CONFIG = Path("conf") / "fll.yaml"


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
    from ..store import DEFAULT_URL

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


def verbose_requested(ctx: click.Context) -> bool:
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
            if verbose_requested(ctx):
                traceback.print_exc()
            raise CliError(f"{where}: error: {e}", exit_code_for(e)) from None
        except Exception as e:  # a bug: still one line, the traceback on request
            where = " ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))
            if verbose_requested(ctx):
                traceback.print_exc()
            raise CliError(f"{where}: internal error: {type(e).__name__}: {e} (rerun with "
                           f"--verbose for the traceback)", EXIT_STORE) from None


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
            from ..store import open_store

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
        from ..store import open_rows

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
    from ..store import DEFAULT_URL, redact

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
    from ..store import redact

    click.echo(f"fll: created a new, empty store {redact(url)}", err=True)


def require_existing(url: str) -> None:
    """Refuse to read an SQLite store that is not there (opening would create it empty)."""
    from ..store import redact

    if not url.lower().startswith("sqlite://"):
        return
    path = url.split("://", 1)[1][1:].partition("?")[0]
    if path and not Path(path).exists():
        raise StoreError(f"store {redact(url)} does not exist (create it with "
                         f"'fll admin init' or by recording a run)")


pass_state = click.make_pass_decorator(State)


def time_range(start: str | None, end: str | None) -> tuple[int, int]:
    from ..timerange import parse_range

    return parse_range(start, end, allow_iso=True)


def echo_json(value: Any) -> None:
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


def stream_lines(lines: Iterator[str]) -> None:
    out = _Lines()
    try:
        for line in lines:
            out.write(line + "\n")
    finally:
        out.close()


def stream_json_array(items: Iterator[Any]) -> None:
    """A JSON array written item by item, so long scans print at once and use flat memory."""
    def lines() -> Iterator[str]:
        yield "["
        first = True
        for item in items:
            yield ("" if first else ",") + json.dumps(item, ensure_ascii=False)
            first = False
        yield "]"
    stream_lines(lines())


def progress_bar(label: str, length: int):
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


def named_dataset(state: State, text: str | None, namespace: str | None = None,
                  dataset: str | None = None, parameter: str = "NS:NAME",
                  include_failed: bool = False):
    """The store and the dataset named compactly or by --namespace/--dataset
    (fll.names); ``include_failed``: a store that answers from failed runs too
    (`LineageStore.including_failed`), so a dataset only they wrote is known."""
    from ..names import resolve_dataset

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


include_failed_option = click.option(
    "--include-failed", is_flag=True,
    help="Also answer from runs that ended FAIL or ABORT (left out by default).")
