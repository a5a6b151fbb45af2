"""``fll scan``, ``fll get`` and ``fll stats``: the store's raw rows, decoded
(keys with times as ISO 8601, msgpack values as JSON), in any row format.
"""
from __future__ import annotations

from typing import Any, Iterator

import click

from ..errors import BadRequest, NotFound
from .common import (State, echo_json, end_option, format_option, pass_state, start_option,
                     stream_json_array, stream_lines, time_range)
from .root import main


def _table_line(key: bytes, cols: dict[str, bytes]) -> str:
    from ..store import admin

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
    from ..store.admin import printable_key

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
    from ..render import parse_dataset_ref
    from ..store import admin

    ds = None
    if dataset:
        ep = parse_dataset_ref(dataset, "--dataset")
        ds = (ep.namespace, ep.name)
    lo = hi = None
    if start is not None or end is not None:
        lo, hi = time_range(start, end)
    table = state.table()
    kind, key_prefix = _scan_prefix(prefix)
    rows = admin.scan_rows(table, kinds=[kind] if kind else None, dataset=ds,
                           start_ms=lo, end_ms=hi, limit=None if key_prefix else limit,
                           reverse=reverse)
    if key_prefix:
        rows = _prefixed(table, rows, key_prefix, ds is None and lo is None, limit, reverse)
    if fmt == "json":
        stream_json_array(admin.describe_row(k, c) for k, c in rows)
        return
    line = _table_line if fmt == "table" else _raw_line
    stream_lines(line(key, cols) for key, cols in rows)


def _scan_prefix(prefix: str | None) -> tuple[bytes | None, bytes | None]:
    """(row kind, longer key prefix or None) of `scan --prefix`: a bare kind
    (``b``), the kind with its separator (``b|``), or a printed key prefix
    (``b|default|Employee``; parts stay %-escaped as printed, ``\\xNN`` for bytes)."""
    from .. import rowkeys as rk
    from ..store.admin import parse_printable_key

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
    from .. import rowkeys as rk

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
    from ..store import admin, redact

    key = admin.parse_row_key(rowkey, hex_form=hex_form)
    table = state.table()
    cols = table.get(key)
    if cols is None:
        raise NotFound(f"row {admin.printable_key(key)!r} not found in store "
                       f"{redact(table.url)}")
    if fmt == "json":
        echo_json(admin.describe_row(key, cols))
    elif fmt == "table":
        click.echo(_table_line(key, cols))
    else:
        click.echo(_raw_line(key, cols))


@main.command()
@format_option("table", "json")
@pass_state
def stats(state: State, fmt: str) -> None:
    """Rows and bytes per row kind, distinct operation sets, datasets, runs (one full
    scan). Runs whose START was received but that never completed are counted apart."""
    from ..store import admin, redact

    result = admin.stats(state.table())
    result["store"] = redact(result["store"])
    if fmt == "json":
        echo_json(result)
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
