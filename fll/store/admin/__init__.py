"""Maintenance of a lineage table: row display, stats, fsck, purge, migrate and upgrade.

Everything here works on the raw `Table` rows described in `fll.rowkeys`, so
it sees (and can repair) what the query paths of `LineageStore` would trip
over. Work is streamed in key order and done in batches: memory grows with
the number of distinct operation sets (and the problems found), never with
the number of rows. This package must never print or depend on click: the CLI
passes a ``progress`` callback and renders the reports.

Repair and purge delete rows, each re-checked inside the transaction that
deletes it on SQLite, so they are safe beside writers there; on backends
without transactions they take the ``v|lease`` row and refuse to start while
a writer announced itself (`maintenance`).

One module per operation, each importing the shared helpers and never the
other way round:

- `rows`: showing and parsing keys and rows (shared), `lease`: the maintenance
  lease and transactions (shared), `unused`: what no run uses any more (shared)
- `scan`: `scan_rows`, `stats`
- `fsck_scans`: `fsck` itself; `fsck_report`: `FsckReport`; `fsck_confirm`:
  the re-reads that confirm a problem; `fsck_repair`: the fixes
- `purge_runs`: `purge`
- `migration`: `migrate` (rows as they are) and `migrate_runs` (run by run)
- `format_upgrade`: `upgrade` of older store formats, `store_format`
- `init_table`: `init`

The names below are re-exported so callers write ``admin.fsck(...)``.
"""
from __future__ import annotations

from .format_upgrade import UpgradeReport, count_upgrade_rows, store_format, upgrade
from .fsck_report import FsckReport
from .fsck_scans import fsck
from .init_table import init
from .lease import atomically, maintenance
from .migration import MigrateReport, RunMigrateReport, migrate, migrate_runs, resume_point
from .purge_runs import PurgeReport, count_runs_before, purge
from .rows import (Cell, Progress, decode_column, describe_row, dump_json, human_key, iso_ms,
                   parse_human_key, parse_iso_ms, parse_printable_key, parse_row_key,
                   printable_key, row_bytes, row_time, timed_columns)
from .scan import scan_rows, stats
from .unused import drop_unused_schemas, drop_unused_shapes

__all__ = [
    "Cell", "Progress", "decode_column", "describe_row", "dump_json", "human_key", "iso_ms",
    "parse_human_key", "parse_iso_ms", "parse_printable_key", "parse_row_key",
    "printable_key", "row_bytes", "row_time", "timed_columns",
    "scan_rows", "stats",
    "atomically", "maintenance", "drop_unused_schemas", "drop_unused_shapes",
    "FsckReport", "fsck",
    "PurgeReport", "count_runs_before", "purge",
    "MigrateReport", "RunMigrateReport", "migrate", "migrate_runs", "resume_point",
    "UpgradeReport", "count_upgrade_rows", "store_format", "upgrade",
    "init",
]
