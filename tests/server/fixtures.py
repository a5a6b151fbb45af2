"""Lineage used by the server tests.

`hr_employee_info()` is the seed design's example (cdap-field-lineage-storage-design):
HR File and Person File are read, their `body` parsed, and `GenerateID` builds
Employee Data's `ID` from Employee_Name, Dept_Name and SSN. Salary and
Start_Date are parsed and written but are not in ID's lineage.

`chain_infos()` is a three-dataset chain A → B → C, recorded as two runs,
for multi-level answers.
"""
from __future__ import annotations

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation, Transformation,
                 TransformOperation, WriteOperation)

NS = "MyNamespace"
HR = EndPoint(NS, "HR File", {"inputPath": "/data/2017/hr", "regex": "*.csv"})
PERSON = EndPoint(NS, "Person File", {"inputPath": "/data/2017/persons", "regex": "*.csv"})
EMPLOYEE = EndPoint(NS, "Employee Data", {"rowid": "ID"})

HR_RUN = "run-hr-1"
HR_START_S = 1_500_000_000  # epoch seconds of the HR run
HR_PROGRAM = "hr-pipeline"


def hr_employee_info() -> FieldLineageInfo:
    read_hr = ReadOperation("HR File Reader", "Read HR file.", HR, ("body",))
    read_person = ReadOperation("Person File Reader", "Read Person file.", PERSON, ("body",))
    parse_hr = TransformOperation(
        "HR File Parser", "Parse the body field", (InputField("HR File Reader", "body"),),
        ("Employee_Name", "Dept_Name", "Salary", "Start_Date"))
    parse_person = TransformOperation(
        "Person File Parser", "Parse the body field",
        (InputField("Person File Reader", "body"),), ("SSN",))
    gen_id = TransformOperation(
        "GenerateID", "Generate unique Employee Id",
        (InputField("HR File Parser", "Employee_Name"), InputField("HR File Parser", "Dept_Name"),
         InputField("Person File Parser", "SSN")), ("ID",))
    write = WriteOperation(
        "Employee Data Writer", "Write Employee Data", EMPLOYEE,
        (InputField("GenerateID", "ID"), InputField("HR File Parser", "Employee_Name"),
         InputField("HR File Parser", "Dept_Name"), InputField("HR File Parser", "Salary"),
         InputField("HR File Parser", "Start_Date")))
    return FieldLineageInfo([read_hr, read_person, parse_hr, parse_person, gen_id, write])


CNS = "chain"
A, B, C = EndPoint(CNS, "A"), EndPoint(CNS, "B"), EndPoint(CNS, "C")
AB_RUN, BC_RUN = "run-ab", "run-bc"
AB_START_S, BC_START_S = 2_000, 3_000
UPPER = Transformation("DIRECT", "TRANSFORMATION", "upper(x)")
IDENT = Transformation("DIRECT", "IDENTITY")
FILTER = Transformation("INDIRECT", "FILTER", "where y > 0")


def ab_info() -> FieldLineageInfo:
    """A(x, y) → B(x2 = upper(x), y) filtered on y."""
    return FieldLineageInfo([
        ReadOperation("readA", "read A", A, ("x", "y")),
        TransformOperation("x2", "upper x", (InputField("readA", "x"), InputField("readA", "y")),
                           ("x2",), {InputField("readA", "x"): (UPPER,),
                                     InputField("readA", "y"): (FILTER,)}),
        TransformOperation("y", "copy y", (InputField("readA", "y"),), ("y",),
                           {InputField("readA", "y"): (IDENT,)}),
        WriteOperation("writeB", "write B", B, (InputField("x2", "x2"), InputField("y", "y"))),
    ])


def bc_info() -> FieldLineageInfo:
    """B(x2, y) → C(z = x2, w = y)."""
    return FieldLineageInfo([
        ReadOperation("readB", "read B", B, ("x2", "y")),
        TransformOperation("z", "z from x2", (InputField("readB", "x2"),), ("z",),
                           {InputField("readB", "x2"): (IDENT,)}),
        TransformOperation("w", "w from y", (InputField("readB", "y"),), ("w",)),
        WriteOperation("writeC", "write C", C, (InputField("z", "z"), InputField("w", "w"))),
    ])


def record_all(store) -> None:
    """The HR run and the A → B → C runs (times in ms)."""
    store.record(hr_employee_info(), HR_RUN, HR_START_S * 1000, HR_PROGRAM)
    store.record(ab_info(), AB_RUN, AB_START_S * 1000, "chain/ab")
    store.record(bc_info(), BC_RUN, BC_START_S * 1000, "chain/bc")
