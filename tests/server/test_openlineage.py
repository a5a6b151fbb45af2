"""fll.openlineage without HTTP: facets, exported events valid against the spec,
the mapping rules of ingest."""
from __future__ import annotations


import pytest

from fll import (BadRequest, EndPoint, EndPointField, FieldLineageInfo, InputField,
                 InvalidLineageError, ReadOperation, Transformation, TransformOperation,
                 WriteOperation)
from fll.openlineage import (PRODUCER, RUN_EVENT_SCHEMA_URL, export_events, export_run_id, facet_from_info,
                             input_transformations, run_event_to_lineage)
from fll.rowkeys import MAX_TIME

from .fixtures import AB_RUN, B, EMPLOYEE, ab_info, hr_employee_info, record_all



def test_exported_events_are_valid_run_events_with_valid_facets(store, validators):
    event_v, facet_v = validators
    record_all(store)
    events = export_events(store, EMPLOYEE, 0, MAX_TIME) + export_events(store, B, 0, MAX_TIME)
    assert len(events) == 2
    for e in events:
        event_v.validate(e)
        assert e["eventType"] == "COMPLETE" and e["producer"] == PRODUCER
        assert e["schemaURL"] == RUN_EVENT_SCHEMA_URL
        for out in e["outputs"]:
            facet_v.validate(out["facets"]["columnLineage"])
    assert events[1]["run"]["runId"] == export_run_id(AB_RUN) != AB_RUN
    assert events[1]["run"]["facets"]["fllRun"]["runId"] == AB_RUN
    assert events[1]["eventTime"] == "1970-01-01T00:33:20.000Z"
    assert events[1]["job"] == {"namespace": "chain", "name": "ab"}


def test_facet_of_the_seed_example_maps_id_to_both_bodies():
    facet = facet_from_info(hr_employee_info(), EMPLOYEE)
    ids = facet["fields"]["ID"]["inputFields"]
    assert [(i["name"], i["field"], i["transformations"]) for i in ids] == [
        ("HR File", "body", []), ("Person File", "body", [])]
    assert sorted(facet["fields"]) == ["Dept_Name", "Employee_Name", "ID", "Salary", "Start_Date"]


def test_transformations_compose_along_paths_indirect_beats_direct():
    a, out = EndPoint("n", "a"), EndPoint("n", "out")
    agg = Transformation("DIRECT", "AGGREGATION", "sum")
    ident = Transformation("DIRECT", "IDENTITY")
    mask = Transformation("DIRECT", "TRANSFORMATION", "sha2", masking=True)
    info = FieldLineageInfo([
        ReadOperation("r", "", a, ("x", "k")),
        TransformOperation("t1", "", (InputField("r", "x"), InputField("r", "k")), ("s",),
                           {InputField("r", "x"): (agg,),
                            InputField("r", "k"): (Transformation("INDIRECT", "GROUP_BY"),)}),
        TransformOperation("t2", "", (InputField("t1", "s"),), ("h",),
                           {InputField("t1", "s"): (mask,)}),
        TransformOperation("t3", "", (InputField("t2", "h"),), ("h",),
                           {InputField("t2", "h"): (ident,)}),
        WriteOperation("w", "", out, (InputField("t3", "h"),)),
    ])
    got = input_transformations(info, EndPointField(out, "h"))
    assert got[EndPointField(a, "x")] == [Transformation("DIRECT", "AGGREGATION", "sum", True)]
    assert got[EndPointField(a, "k")] == [Transformation("INDIRECT", "GROUP_BY")]


def test_a_step_tagging_one_input_direct_and_indirect_keeps_both_through_later_steps():
    a, out = EndPoint("n", "a"), EndPoint("n", "out")
    ident = Transformation("DIRECT", "IDENTITY")
    filt = Transformation("INDIRECT", "FILTER")
    info = FieldLineageInfo([
        ReadOperation("r", "", a, ("x",)),
        # x is copied into y and also decides which rows survive
        TransformOperation("t1", "", (InputField("r", "x"),), ("y",),
                           {InputField("r", "x"): (ident, filt)}),
        TransformOperation("t2", "", (InputField("t1", "y"),), ("z",),
                           {InputField("t1", "y"): (Transformation("DIRECT", "TRANSFORMATION"),)}),
        TransformOperation("t3", "", (InputField("t2", "z"),), ("z",),
                           {InputField("t2", "z"): (Transformation("INDIRECT", "SORT"),
                                                    ident)}),
        WriteOperation("w", "", out, (InputField("t3", "z"),)),
    ])
    got = set(input_transformations(info, EndPointField(out, "z"))[EndPointField(a, "x")])
    # the value path stays DIRECT; each INDIRECT step is kept with its own subtype
    assert got == {Transformation("DIRECT", "TRANSFORMATION"), filt,
                   Transformation("INDIRECT", "SORT")}


def test_an_input_shared_by_every_field_with_a_filter_goes_to_the_dataset_list():
    facet = facet_from_info(ab_info(), B)
    # A.y filters x2 but is copied into y: not dataset-wide, stays per field
    assert "dataset" not in facet
    event = {"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "r"},
             "job": {"namespace": "j", "name": "n"},
             "outputs": [{"namespace": "o", "name": "t", "facets": {"columnLineage": {
                 "fields": {"a": {"inputFields": [{"namespace": "i", "name": "s", "field": "a"}]},
                            "b": {"inputFields": [{"namespace": "i", "name": "s", "field": "b"}]}},
                 "dataset": [{"namespace": "i", "name": "s", "field": "flag",
                              "transformations": [{"type": "INDIRECT", "subtype": "FILTER"}]}]}}}]}
    info, run_id, start, program = run_event_to_lineage(event)
    assert (run_id, start, program) == ("r", 1704067200000, "j/n")
    again = facet_from_info(info, EndPoint("o", "t"))
    assert [d["field"] for d in again["dataset"]] == ["flag"]
    assert [i["field"] for i in again["fields"]["a"]["inputFields"]] == ["a"]


def test_legacy_transformation_type_masked_becomes_a_masking_tag():
    event = {"eventTime": "2024-01-01T00:00:00", "run": {"runId": "r"},
             "job": {"namespace": "j", "name": "n"},
             "outputs": [{"namespace": "o", "name": "t", "facets": {"columnLineage": {
                 "fields": {"h": {"transformationType": "MASKED",
                                  "inputFields": [{"namespace": "i", "name": "s",
                                                   "field": "ssn"}]}}}}}]}
    info, *_ = run_event_to_lineage(event)
    tags = input_transformations(info, EndPointField(EndPoint("o", "t"), "h"))
    assert tags[EndPointField(EndPoint("i", "s"), "ssn")][0].masking is True


def test_the_same_facet_in_any_order_gives_the_same_checksum():
    def event(order):
        fields = {f: {"inputFields": [{"namespace": "i", "name": "s", "field": x}
                                      for x in order]} for f in order}
        return {"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "r"},
                "job": {"namespace": "j", "name": "n"},
                "outputs": [{"namespace": "o", "name": "t",
                             "facets": {"columnLineage": {"fields": fields}}}]}
    assert run_event_to_lineage(event(["a", "b", "c"]))[0].checksum == \
        run_event_to_lineage(event(["c", "a", "b"]))[0].checksum


@pytest.mark.parametrize("event, error", [
    ([], BadRequest), ({"run": {"runId": "r"}}, BadRequest),
    ({"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "r"},
      "job": {"namespace": "j", "name": "n"}, "outputs": []}, InvalidLineageError),
])
def test_malformed_events_raise_fll_errors(event, error):
    with pytest.raises(error):
        run_event_to_lineage(event)
