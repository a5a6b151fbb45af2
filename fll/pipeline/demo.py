"""The demo pipeline's normalizer (conf/pipelines/employee.json, stage "Field Normalizer").

A plain DataFrame -> DataFrame function used by the built-in ``python``
transform; its field operations are declared in the spec, as CDAP's example
describes them. It must never depend on anything but its input columns.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def normalize_employees(df: "DataFrame") -> "DataFrame":
    """ID, Name, Department, ContactDetails, JoiningDate from the joined records."""
    from pyspark.sql import functions as F

    name = F.initcap(F.lower(F.trim("Employee_Name")))
    dept = F.upper(F.trim("Dept_Name"))
    initials = F.concat_ws("", F.transform(F.split(name, " "), lambda w: F.substring(w, 1, 1)))
    employee_id = F.concat_ws("-", F.substring(dept, 1, 3), initials, F.substring("SSN", -4, 4))
    return df.select(
        employee_id.alias("ID"),
        name.alias("Name"),
        dept.alias("Department"),
        F.concat_ws(" / ", "Email", "Phone").alias("ContactDetails"),
        F.date_format(F.to_date(F.trim("Start_Date"), "MM/dd/yyyy"),
                      "yyyy-MM-dd").alias("JoiningDate"),
    )
