"""A small demo lineage store for the explorer page (and for trying the REST API).

It records, at times relative to "now":

* the seed design's example (cdap-field-lineage-storage-design): `HR File` and
  `Person File` are read, their `body` parsed, and `GenerateID` builds
  `Employee Data.ID` from Employee_Name, Dept_Name and SSN — three days ago,
  without OpenLineage transformation tags (as CDAP records it);
* a newer run of the same pipeline (30 minutes ago) whose `GenerateID` takes
  Dept_Name, a masked SSN and Start_Date, with OpenLineage transformation tags,
  so the graph of `ID` differs between "last hour" and "last week";
* `Employee Data` → `Employee Directory` (forward lineage for `ID`);
* `Audit Log`: read by a run that drops all its fields — a dataset with no lineage;
* in namespace `analytics`, a wide table (`Clickstream Raw` → `Clickstream Wide`
  → `Clickstream Sessions`, hundreds of fields) to try large graphs.

    .venv/bin/python -m fll.demo_data --store sqlite:///fll-data/demo.db
    .venv/bin/fll serve --store sqlite:///fll-data/demo.db   # then open http://127.0.0.1:8080/

This module must never write anywhere but the store it is given, and never
record a run twice (recording is idempotent by run id).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import NamedTuple

from .model import (EndPoint, InputField, Operation, ReadOperation, Transformation,
                    TransformOperation, WriteOperation)
from .opset import FieldLineageInfo
from .store.lineage import LineageStore

NS = "MyNamespace"
HR = EndPoint(NS, "HR File", {"inputPath": "/data/2017/hr", "regex": "*.csv"})
PERSON = EndPoint(NS, "Person File", {"inputPath": "/data/2017/persons", "regex": "*.csv"})
EMPLOYEE = EndPoint(NS, "Employee Data", {"rowid": "ID"})
DIRECTORY = EndPoint(NS, "Employee Directory", {"format": "parquet"})
AUDIT = EndPoint(NS, "Audit Log", {"inputPath": "/data/audit", "regex": "*.log"})
AUDIT_ARCHIVE = EndPoint(NS, "Audit Archive", {"retention": "30d"})

ANALYTICS = "analytics"
RAW = EndPoint(ANALYTICS, "Clickstream Raw", {"topic": "clicks"})
WIDE = EndPoint(ANALYTICS, "Clickstream Wide", {"format": "parquet"})
SESSIONS = EndPoint(ANALYTICS, "Clickstream Sessions", {"format": "parquet"})

EMPLOYEE_PROGRAM = "MyNamespace/employee-pipeline"

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

_DIRECT = "DIRECT"
_INDIRECT = "INDIRECT"


class DemoRun(NamedTuple):
    """One run the demo records."""

    run_id: str
    start_ms: int
    program: str
    info: FieldLineageInfo


def _tag(subtype: str, description: str = "", *, indirect: bool = False,
         masking: bool = False) -> tuple[Transformation, ...]:
    return (Transformation(_INDIRECT if indirect else _DIRECT, subtype, description, masking),)


def employee_lineage(version: int = 1) -> FieldLineageInfo:
    """The seed's HR File + Person File → Employee Data pipeline.

    ``version=1`` is the seed's operations, untagged; ``version=2`` builds ID
    from Dept_Name, a masked SSN and Start_Date and carries OpenLineage tags.
    """
    if version not in (1, 2):
        raise ValueError(f"employee_lineage: version must be 1 or 2, got {version!r}")
    tagged = version == 2
    hr_body = InputField("HR File Reader", "body")
    person_body = InputField("Person File Reader", "body")
    name = InputField("HR File Parser", "Employee_Name")
    dept = InputField("HR File Parser", "Dept_Name")
    start = InputField("HR File Parser", "Start_Date")
    ssn = InputField("Person File Parser", "SSN")
    email = InputField("Person File Parser", "Email")
    phone = InputField("Person File Parser", "Phone")

    def tags(pairs: dict[InputField, tuple[Transformation, ...]]
             ) -> dict[InputField, tuple[Transformation, ...]]:
        return pairs if tagged else {}

    id_inputs = (dept, ssn, start) if tagged else (name, dept, ssn)
    ops: list[Operation] = [
        ReadOperation("HR File Reader", "Read HR file.", HR, ("body",)),
        ReadOperation("Person File Reader", "Read Person file.", PERSON, ("body",)),
        TransformOperation("HR File Parser", "Parse the body field", (hr_body,),
                           ("Employee_Name", "Dept_Name", "Salary", "Start_Date"),
                           tags({hr_body: _tag("TRANSFORMATION", "split CSV line")})),
        TransformOperation("Person File Parser", "Parse the body field", (person_body,),
                           ("SSN", "Email", "Phone"),
                           tags({person_body: _tag("TRANSFORMATION", "split CSV line")})),
        TransformOperation("GenerateID", "Generate unique Employee Id", id_inputs, ("ID",),
                           tags({dept: _tag("TRANSFORMATION", "first 3 letters"),
                                 ssn: _tag("TRANSFORMATION", "last 4 digits", masking=True),
                                 start: _tag("TRANSFORMATION", "hire year")})),
        TransformOperation("NormalizeName", "Trim and capitalize the employee name", (name,),
                           ("Name",), tags({name: _tag("TRANSFORMATION", "initcap(trim)")})),
        TransformOperation("NormalizeDepartment", "Upper-case the department name", (dept,),
                           ("Department",), tags({dept: _tag("TRANSFORMATION", "upper")})),
        TransformOperation("ContactDetails", "Combine email and phone", (email, phone),
                           ("ContactDetails",),
                           tags({email: _tag("TRANSFORMATION", "concat"),
                                 phone: _tag("TRANSFORMATION", "concat", masking=True)})),
        TransformOperation("NormalizeDate", "Start date as ISO yyyy-MM-dd", (start,),
                           ("JoiningDate",), tags({start: _tag("TRANSFORMATION", "to_date")})),
        WriteOperation("Employee Data Writer", "Write Employee Data", EMPLOYEE, (
            InputField("GenerateID", "ID"), InputField("NormalizeName", "Name"),
            InputField("NormalizeDepartment", "Department"),
            InputField("ContactDetails", "ContactDetails"),
            InputField("NormalizeDate", "JoiningDate"))),
    ]
    return FieldLineageInfo(ops)


def directory_lineage() -> FieldLineageInfo:
    """Employee Data → Employee Directory: a badge id from ID, name and department kept."""
    rid, rname, rdept = (InputField("Directory Reader", f) for f in ("ID", "Name", "Department"))
    return FieldLineageInfo([
        ReadOperation("Directory Reader", "Read Employee Data", EMPLOYEE,
                      ("ID", "Name", "Department")),
        TransformOperation("Badge", "Badge id from the employee id", (rid,), ("badge_id",),
                           {rid: _tag("TRANSFORMATION", "'B-' || ID")}),
        TransformOperation("Display Name", "Name and department for display", (rname, rdept),
                           ("display_name",),
                           {rname: _tag("TRANSFORMATION", "concat"),
                            rdept: _tag("TRANSFORMATION", "concat")}),
        TransformOperation("Active Only", "Keep employees with an id", (rid,), (),
                           {rid: _tag("FILTER", "ID is not null", indirect=True)}),
        WriteOperation("Directory Writer", "Write Employee Directory", DIRECTORY, (
            InputField("Badge", "badge_id"), InputField("Display Name", "display_name"),
            InputField("Directory Reader", "Department"))),
    ])


def audit_lineage() -> FieldLineageInfo:
    """Audit Log is read, but every field is dropped: a dataset with no field lineage."""
    fields = ("event", "actor", "at")
    return FieldLineageInfo([
        ReadOperation("Audit Reader", "Read the audit log", AUDIT, fields),
        TransformOperation("Discard", "Only count the events", tuple(
            InputField("Audit Reader", f) for f in fields), ()),
        WriteOperation("Archive Writer", "Write an empty archive marker", AUDIT_ARCHIVE, ()),
    ])


def clickstream_lineage(width: int = 240) -> tuple[FieldLineageInfo, FieldLineageInfo]:
    """Raw → Wide (``width`` fields, identity) and Wide → Sessions (aggregates, and a
    `row_hash` built from every field: a field graph with hundreds of nodes)."""
    names = tuple(f"c{i:03d}" for i in range(width))
    raw_to_wide = FieldLineageInfo([
        ReadOperation("Raw Reader", "Read raw clicks", RAW, names),
        *(TransformOperation(f"Flatten {n}", f"Flatten {n} out of the event",
                             (InputField("Raw Reader", n),), (f"{n}_v",),
                             {InputField("Raw Reader", n): _tag("IDENTITY")}) for n in names),
        WriteOperation("Wide Writer", "Write the wide table", WIDE,
                       tuple(InputField(f"Flatten {n}", f"{n}_v") for n in names)),
    ])
    groups = max(1, width // 6)
    aggs = []
    for g in range(groups):
        inputs = tuple(InputField("Wide Reader", f"{names[j]}_v")
                       for j in range(g * 6, min(width, g * 6 + 6)))
        aggs.append(TransformOperation(
            f"agg{g:02d}", f"Aggregate group {g}", inputs, (f"s{g:02d}",),
            {i: _tag("AGGREGATION", "sum") for i in inputs}))
    every = tuple(InputField("Wide Reader", f"{n}_v") for n in names)
    row_hash = TransformOperation("Row Hash", "Hash of every column, to spot changed rows",
                                  every, ("row_hash",),
                                  {i: _tag("TRANSFORMATION", "xxhash64") for i in every})
    wide_to_sessions = FieldLineageInfo([
        ReadOperation("Wide Reader", "Read the wide table", WIDE, tuple(f"{n}_v" for n in names)),
        *aggs, row_hash,
        WriteOperation("Sessions Writer", "Write sessions", SESSIONS,
                       tuple(InputField(f"agg{g:02d}", f"s{g:02d}") for g in range(groups))
                       + (InputField("Row Hash", "row_hash"),)),
    ])
    return raw_to_wide, wide_to_sessions


def demo_runs(now_ms: int | None = None, *, width: int = 240) -> list[DemoRun]:
    """The demo's runs, timed relative to ``now_ms`` (default: the clock)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    raw_to_wide, wide_to_sessions = clickstream_lineage(width)
    return [
        DemoRun("employee-run-1", now - 3 * DAY_MS, EMPLOYEE_PROGRAM, employee_lineage(1)),
        DemoRun("employee-run-2", now - 30 * MINUTE_MS, EMPLOYEE_PROGRAM, employee_lineage(2)),
        DemoRun("directory-run-1", now - 20 * MINUTE_MS, "MyNamespace/directory-pipeline",
                directory_lineage()),
        DemoRun("audit-run-1", now - 2 * HOUR_MS, "MyNamespace/audit-pipeline", audit_lineage()),
        DemoRun("clicks-run-1", now - 5 * HOUR_MS, "analytics/flatten", raw_to_wide),
        DemoRun("clicks-run-2", now - 4 * HOUR_MS, "analytics/sessions", wide_to_sessions),
    ]


def record_demo(store: LineageStore, now_ms: int | None = None, *,
                width: int = 240) -> list[DemoRun]:
    """Record every demo run into ``store``; returns the runs (already recorded ones are kept)."""
    runs = demo_runs(now_ms, width=width)
    store.record_many([(r.info, r.run_id, r.start_ms, r.program) for r in runs])
    return runs


def main(argv: list[str] | None = None) -> int:
    from .cli.common import STORE_HELP

    parser = argparse.ArgumentParser(description="Record the explorer's demo lineage.")
    parser.add_argument("--store", default=None,
                        help=STORE_HELP)
    args = parser.parse_args(argv)
    from .cli.common import configured_store_url
    from .store import open_store, redact

    url = configured_store_url(args.store)
    if url.startswith("sqlite:///"):
        import os
        folder = os.path.dirname(url[len("sqlite:///"):])
        if folder:
            os.makedirs(folder, exist_ok=True)
    with open_store(url) as store:
        runs = record_demo(store)
    print(f"recorded {len(runs)} demo runs into {redact(url)}; "
          f"serve it with: fll serve --store {redact(url)}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
