"""Maintenance of a lineage table: row display, stats, fsck, purge and migrate.

Everything here works on the raw `Table` rows described in `fll.rowkeys`, so
it sees (and can repair) what the query paths of `LineageStore` would trip
over. Work is streamed in key order and done in batches: memory grows with
the number of distinct operation sets (and the problems found), never with
the number of rows. This module must never print or depend on click: the CLI
passes a ``progress`` callback and renders the reports.

Repair and purge delete rows, each re-checked inside the transaction that
deletes it on SQLite, so they are safe beside writers there; on backends
without transactions they take the ``v|lease`` row and refuse to start while
a writer announced itself (`maintenance`). Upgrade and run-by-run migration
of store formats live here too.
"""
from __future__ import annotations

import functools
import json
import re
import struct
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import msgpack
import xxhash

from ... import rowkeys as rk
from ...codec import Summaries, decode_canonical
from ...errors import BadRequest, FllError, StoreError
from ...model import EndPoint
from .. import runs as run_model
from ..base import Table
from ..lineage import (FIRST_OF_RUN, RUN_OF_BUCKET, RUN_OF_FIRST, SHAPED, WIDE_PREFIXES,
                      LineageStore, data_parts, data_row, decode_data, has_lineage_rows,
                      unstamped_format, run_failed,
                      join_shape, row_sets, run_cells, SCHEMA_REF, set_used_since, shape_ref,
                      unused_buckets)
from ..tags import decode_assignment, decode_def
from .rows import (Progress, _T, _EPOCH, _INDEX_KINDS, _RUN_ROWS, _BATCH, _BUCKETS, _BY_SET, _BUCKET_OF, Cell, iso_ms, parse_iso_ms, _PRINTABLE, printable_key, parse_printable_key, human_key, parse_human_key, parse_row_key, _jsonable, decode_column, describe_row, row_time, timed_columns, row_bytes, dump_json)
from .scan import (scan_rows, stats)
from .lease import (maintenance, atomically, _delete)
from .unused import (_bucket_kept_since, _by_row, _set_endpoints, _shapes_used, drop_unused_shapes, drop_unused_schemas)
from .fsck_report import (FsckReport)
from .fsck_confirm import (SETTLE_S, _still_stray_failed, _still_present, _still_dangling, _still_dangling_cells, _still_missing_runs, _still_missing_twins, _still_stale, _still_stray_firsts, _still_unfinished, _still_dangling_schemas, _still_unused_schemas, _still_corrupt, _unused_data_rows, _still_orphans, _confirm, _row_checksum, _bucket_children, _bucket_kept, _shape_parts, _BODY_ERRORS, _DATA_ERRORS, _body_digest, _check_data)
from .fsck_repair import (_repair, _apply)
from .format_upgrade import (UpgradeReport, store_format, count_upgrade_rows, _older_rows, upgrade, _upgrade_schema_rows, _put_replacing, _older_data_parts, _upgrade_data_rows)
from .fsck_scans import (fsck, _transactional, _read_view, _find_problems, _bucket_cells)
from .purge_runs import (PurgeReport, count_runs_before, purge, _purge, _unused_shapes, _purge_in_txn, _purge_batch)
from .migration import (MigrateReport, resume_point, migrate, _first_run_buckets, RunMigrateReport, migrate_runs)  # noqa: F401

# -- showing keys and rows -----------------------------------------------------


# -- scan ----------------------------------------------------------------------


# -- stats ---------------------------------------------------------------------


# -- fsck ----------------------------------------------------------------------


# -- confirming what the scans found ---------------------------------------------
#
# Each `_still_*` takes problems of one kind as the scans listed them and returns
# those a fresh read of exactly what the problem depends on still shows: the
# scans read the store at different moments (on SQLite one snapshot, elsewhere
# as they go, beside writers between two of their writes). `_confirm` runs them
# before anything is reported; the repair runs them again inside the transaction
# (SQLite) or under the lease (elsewhere) that applies each fix.


# -- purge ---------------------------------------------------------------------


# -- migrate -------------------------------------------------------------------


def init(table: Table) -> str:
    """Create the table where the backend needs it; returns what was done."""
    for name in ("create_table", "create", "ensure_table"):
        fn = getattr(table, name, None)
        if callable(fn):
            fn()
            return f"created {table.url}"
    # SQLite (and backends that create on open) made it when the table was opened
    next(iter(table.scan(limit=1)), None)
    return f"ready {table.url}"


# -- format upgrade ------------------------------------------------------------


# -- logical migration -----------------------------------------------------------
