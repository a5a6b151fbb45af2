"""`FsckReport`: what `fll admin fsck` found, confirmed and repaired."""
from __future__ import annotations

from dataclasses import dataclass, field

from .rows import Cell, printable_key


@dataclass
class FsckReport:
    """What fsck found (keys are raw bytes) and what it repaired."""

    rows: int = 0
    format: int = 0
    dangling: list[bytes] = field(default_factory=list)   # index/run rows, data row missing
    #: cells of wide rows naming a set whose data row is missing (row, column)
    dangling_cells: list[tuple[bytes, str]] = field(default_factory=list)
    #: ``d|``/``p|`` rows nothing references: reclaimable, not wrong (a set a
    #: COMPLETE superseded, a write that stopped before its run row)
    orphans: list[bytes] = field(default_factory=list)
    missing_runs: dict[bytes, dict[str, bytes]] = field(default_factory=dict)  # r| to rebuild
    missing_twins: dict[bytes, dict[str, bytes]] = field(default_factory=dict)  # index rows
    stale_buckets: list[tuple[bytes, str]] = field(default_factory=list)  # g|/h| cells no run keeps
    #: ``i|``/``o|`` cells whose run cell is not the same (row, run)
    stray_firsts: list[tuple[bytes, str]] = field(default_factory=list)
    unfinished: list[bytes] = field(default_factory=list)  # r| rows still pending (w=0)
    #: ``s|`` rows naming a schema whose ``q|`` row is missing
    dangling_schemas: list[bytes] = field(default_factory=list)
    #: ``q|`` rows (schema bodies) no ``s|`` row names: reclaimable, not wrong
    unused_schemas: list[bytes] = field(default_factory=list)
    #: run-model rows (``e|`` events, ``J|`` job runs) their run's ``n|`` row does not name
    stray_run_rows: list[bytes] = field(default_factory=list)
    #: ``n|`` cells naming an event whose ``e|`` row is missing
    broken_event_refs: list[tuple[bytes, str]] = field(default_factory=list)
    #: failed-run rows (``x|``/``y|``) whose run row is gone or names another set
    stray_failed: list[bytes] = field(default_factory=list)
    corrupt: list[bytes] = field(default_factory=list)    # rows that do not decode
    unknown: list[bytes] = field(default_factory=list)    # keys of no fll shape
    #: rows of an older format left in an upgraded store (narrow run and bucket rows, B|/F|)
    legacy: list[bytes] = field(default_factory=list)
    repaired: bool = False
    #: problems a repair left (corrupt and unknown rows are reported, never changed)
    unrepaired: int = 0
    #: what the repair changed (rows or cells, as each list counts them): a problem
    #: a writer finished or removed before the repair reached it is not counted
    fixed: int = 0
    #: problems the scans suggested that a fresh re-read showed were not there
    #: (a writer was between two of its writes, or wrote after a scan passed)
    unconfirmed: int = 0
    #: what each suspected problem depends on, for that re-read: the run cell
    #: (row, run) behind a missing run row, the run cells (run row, run, value,
    #: first-run row) wanting a missing twin cell
    run_cell_of: dict[bytes, Cell] = field(default_factory=dict, repr=False)
    twin_wanters: dict[Cell, list[tuple[bytes, str, bytes, bytes]]] = field(
        default_factory=dict, repr=False)

    @property
    def problems(self) -> int:
        """What is wrong: rows that make (or could make) an answer wrong or
        unreadable. Rows nothing references are not counted (`reclaimable`)."""
        return (len(self.dangling) + len(self.dangling_cells)
                + len(self.missing_runs)
                + len(self.missing_twins) + len(self.stale_buckets) + len(self.unfinished)
                + len(self.stray_firsts)
                + len(self.dangling_schemas)
                + len(self.stray_run_rows) + len(self.broken_event_refs)
                + len(self.stray_failed)
                + len(self.legacy) + len(self.corrupt)
                + len(self.unknown))

    @property
    def reclaimable(self) -> int:
        """Rows nothing references: data and shape rows of sets no run has (the
        START's set a COMPLETE superseded, a write that stopped before its run
        row) and schema bodies no schema row names. No answer reads them;
        ``--repair`` (or a purge) removes them. A set's data row is kept when
        its run moves to another set, since another run may share it and, on a
        backend without transactions, checking that is a race with its writer."""
        return len(self.orphans) + len(self.unused_schemas)

    @property
    def sound(self) -> bool:
        """Nothing wrong (rows nothing references may be left)."""
        return self.problems == 0

    @property
    def clean(self) -> bool:
        """Nothing wrong and nothing to reclaim."""
        return self.problems == 0 and self.reclaimable == 0

    @property
    def exit_code(self) -> int:
        """0 when sound or fully repaired, 1 when problems remain (for scripts)."""
        if self.sound:
            return 0
        return 1 if (not self.repaired or self.unrepaired) else 0

    def to_dict(self) -> dict:
        def keys(items) -> list[str]:
            return [printable_key(k) for k in items]

        def cells(items) -> list[str]:
            return [f"{printable_key(k)} column {c}" for k, c in items]
        return {"rows": self.rows, "format": self.format, "clean": self.clean,
                "sound": self.sound, "reclaimable": self.reclaimable,
                "repaired": self.repaired, "unrepaired": self.unrepaired,
                "fixed": self.fixed, "unconfirmed": self.unconfirmed,
                "exit_code": self.exit_code,
                "dangling_index_rows": keys(self.dangling) + cells(self.dangling_cells),
                "orphaned_data_rows": keys(self.orphans),
                "missing_run_rows": keys(self.missing_runs),
                "missing_index_twins": keys(self.missing_twins),
                "stale_bucket_rows": cells(self.stale_buckets),
                "first_run_cells_without_their_run": cells(self.stray_firsts),
                "unfinished_runs": keys(self.unfinished),
                "schema_rows_without_their_schema": keys(self.dangling_schemas),
                "unused_schemas": keys(self.unused_schemas),
                "run_rows_not_named_by_their_run": keys(self.stray_run_rows),
                "run_events_missing": cells(self.broken_event_refs),
                "failed_run_rows_without_their_run": keys(self.stray_failed),
                "older_format_rows": keys(self.legacy),
                "corrupt_rows": keys(self.corrupt),
                "unknown_rows": keys(self.unknown)}
