"""`fll export --format openlineage` of every dataset, then `fll record` into an
empty store, answers every question as the source store did, also for what
fll knows only from schemas and symlinks: a START carrying only schemas, a
DatasetEvent (two schemas over time, and symlinks), a JobEvent's dataset, a
RunEvent without column lineage. The source is recorded through the REST
route from events built with openlineage-python's own classes."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from click.testing import CliRunner
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import (DatasetEvent, InputDataset, Job, JobEvent,
                                         OutputDataset, Run, RunEvent, RunState, StaticDataset)
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.facet_v2 import schema_dataset, symlinks_dataset
from openlineage.client.serde import Serde

from fll import open_store
from fll.cli import main
from fll.openlineage import SCHEMA_OWNER_FACET
from fll.rowkeys import MAX_TIME
from fll.server import create_app

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
PG, DUCK = "postgres://db:5432", "duckdb:///shop.duckdb"
RUN_A, RUN_B = "0190f1c2-7a3b-7cde-8f01-23456789aaaa", "0190f1c2-7a3b-7cde-8f01-23456789bbbb"
T = ["2024-05-01T09:00:00Z", "2024-05-01T09:05:00Z", "2024-05-01T10:00:00Z",
     "2024-05-02T10:00:00Z", "2024-05-03T10:00:00Z", "2024-05-04T10:00:00Z"]
TIMES = [0, 1714554000000, 1714554300001, 1714557600001, 1714644000001, 1714730400001,
         1714816800001, MAX_TIME]


def schema(*fields: tuple[str, str | None]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields])


def symlinks(ns: str, name: str) -> symlinks_dataset.SymlinksDatasetFacet:
    return symlinks_dataset.SymlinksDatasetFacet(identifiers=[
        symlinks_dataset.Identifier(namespace=ns, name=name, type="TABLE")])


ORDERS = schema(("order_id", "INT"), ("customer_id", "INT"), ("amount", "NUMERIC"))
TOTALS = schema(("customer_id", "INTEGER"), ("total", "DECIMAL(18,2)"), ("n_orders", "BIGINT"))
LINEAGE = cl.ColumnLineageDatasetFacet(fields={
    "customer_id": cl.Fields(inputFields=[cl.InputField(PG, "orders", "customer_id", [
        cl.Transformation(type="DIRECT", subtype="IDENTITY")])]),
    "total": cl.Fields(inputFields=[cl.InputField(PG, "orders", "amount", [
        cl.Transformation(type="DIRECT", subtype="AGGREGATION", description="sum")])])})


def interop_events() -> list[dict]:
    job = Job(namespace="shop", name="totals")
    events = [
        # a START with schemas only, then the COMPLETE with the column lineage
        RunEvent(eventType=RunState.START, eventTime=T[0], run=Run(runId=RUN_A), job=job,
                 producer=PRODUCER, inputs=[InputDataset(PG, "orders", facets={"schema": ORDERS})],
                 outputs=[OutputDataset(DUCK, "totals", facets={"schema": TOTALS})]),
        RunEvent(eventType=RunState.COMPLETE, eventTime=T[1], run=Run(runId=RUN_A), job=job,
                 producer=PRODUCER, inputs=[InputDataset(PG, "orders")],
                 outputs=[OutputDataset(DUCK, "totals", facets={
                     "columnLineage": LINEAGE, "symlinks": symlinks("warehouse", "totals")})]),
        # known only from DatasetEvents: two schemas over time, and an alias
        DatasetEvent(eventTime=T[2], producer=PRODUCER, dataset=StaticDataset(
            PG, "customers", facets={"schema": schema(("id", "INT"), ("name", None)),
                                     "symlinks": symlinks("crm", "customers")})),
        DatasetEvent(eventTime=T[3], producer=PRODUCER, dataset=StaticDataset(
            PG, "customers", facets={"schema": schema(("id", "BIGINT"), ("email", "TEXT"))})),
        # known only from a JobEvent's output schema
        JobEvent(eventTime=T[4], job=Job(namespace="shop", name="report"), producer=PRODUCER,
                 outputs=[OutputDataset(DUCK, "report", facets={
                     "schema": schema(("day", "DATE"), ("revenue", "DECIMAL"))})]),
        # known only from a run without column lineage
        RunEvent(eventType=RunState.COMPLETE, eventTime=T[5], run=Run(runId=RUN_B),
                 job=Job(namespace="shop", name="audit"), producer=PRODUCER,
                 outputs=[OutputDataset(DUCK, "audit", facets={
                     "schema": schema(("checked_at", "TIMESTAMP"))})]),
    ]
    return [Serde.to_dict(e) for e in events]


def _v3(ns: str, name: str, rest: str) -> str:
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(name, safe='')}{rest}"


def answers(url: str) -> dict:
    """Every question the REST API answers about every dataset and alias, and the
    schema over every range between the events' times."""
    out: dict = {}
    with open_store(url) as store, TestClient(create_app(store)) as c:
        listed = c.get("/api/v1/datasets").json()["datasets"]
        out["datasets"] = listed
        names = [(d["namespace"], d["name"]) for d in listed] + [
            ("warehouse", "totals"), ("crm", "customers")]
        for ns, name in names:
            for rest in ("/lineage/fields?start=0&end=2000000000&includeCurrent=true",
                         "/lineage/allfieldlineage?start=0&end=2000000000",
                         "/fields/lineage?start=0&end=2000000000", "/properties?start=0&end=2000000000"):
                r = c.get(_v3(ns, name, rest))
                out[(ns, name, rest)] = (r.status_code, r.json())
            r = c.get("/api/v1/column-lineage", params={"nodeId": f"dataset:{ns}:{name}",
                                                        "withDownstream": "true"})
            out[(ns, name, "column-lineage")] = (r.status_code, r.json())
            for lo in TIMES:
                for hi in TIMES:
                    if lo < hi:
                        out[(ns, name, lo, hi)] = store.schema(ns, name, lo, hi)
    return out


def test_export_then_record_into_an_empty_store_answers_as_the_source(tmp_path):
    src, dst = f"sqlite:///{tmp_path}/src.db", f"sqlite:///{tmp_path}/dst.db"
    with open_store(src) as store, TestClient(create_app(store)) as c:
        statuses = [c.post("/api/v1/lineage", json=e).status_code for e in interop_events()]
    assert statuses == [201, 201, 201, 201, 201, 201]
    before = answers(src)
    assert len(before["datasets"]) == 5  # orders, totals, customers, report, audit

    exported: list[dict] = []
    for d in before["datasets"]:
        r = CliRunner().invoke(main, ["--store", src, "export", "--namespace", d["namespace"],
                                      "--dataset", d["name"], "--format", "openlineage"])
        assert r.exit_code == 0, r.output
        exported += json.loads(r.stdout)
    dataset_events = [e for e in exported if "dataset" in e]
    # schemas no exported run of the dataset reported: customers twice, report,
    # audit, and orders (read by run A, which its export of runs that wrote it
    # does not hold); and the aliases of totals and customers
    assert sorted((e["dataset"]["name"], SCHEMA_OWNER_FACET in e["dataset"]["facets"])
                  for e in dataset_events) == [
        ("audit", True), ("customers", False), ("customers", True), ("customers", True),
        ("orders", True), ("report", True), ("totals", False)]
    file = tmp_path / "events.json"
    file.write_text(json.dumps(exported))
    r = CliRunner().invoke(main, ["--store", dst, "record", str(file)])
    assert r.exit_code == 0, r.output

    after = answers(dst)
    assert after.keys() == before.keys()
    differ = [k for k in before if before[k] != after[k]]
    assert differ == [], differ[:5]


def test_exported_events_are_valid_against_the_spec(tmp_path, validators):
    import jsonschema
    from referencing import Registry, Resource

    run_v, _ = validators
    spec = Path(__file__).parents[1] / "server" / "spec" / "OpenLineage.json"
    core = json.loads(spec.read_text())
    dataset_v = jsonschema.Draft202012Validator(
        {"$ref": core["$id"] + "#/$defs/DatasetEvent"},
        registry=Registry().with_resources([(core["$id"], Resource.from_contents(core))]))
    src = f"sqlite:///{tmp_path}/src.db"
    with open_store(src) as store, TestClient(create_app(store)) as c:
        for e in interop_events():
            c.post("/api/v1/lineage", json=e)
    for ns, name in ((PG, "customers"), (DUCK, "totals"), (DUCK, "audit")):
        r = CliRunner().invoke(main, ["--store", src, "export", "--namespace", ns,
                                      "--dataset", name, "--format", "openlineage"])
        for event in json.loads(r.stdout):
            (run_v if "run" in event else dataset_v).validate(event)


def test_re_sending_an_export_to_the_server_gives_the_same_answers(tmp_path):
    """The route keeps an exported DatasetEvent's schema under its owner, as `fll
    record` does, so either way back answers the same."""
    src, dst = f"sqlite:///{tmp_path}/src.db", f"sqlite:///{tmp_path}/dst.db"
    with open_store(src) as store, TestClient(create_app(store)) as c:
        for e in interop_events():
            c.post("/api/v1/lineage", json=e)
    before = answers(src)
    exported: list[dict] = []
    for d in before["datasets"]:
        r = CliRunner().invoke(main, ["--store", src, "export", "--namespace", d["namespace"],
                                      "--dataset", d["name"], "--format", "openlineage"])
        exported += json.loads(r.stdout)
    with open_store(dst) as store, TestClient(create_app(store)) as c:
        assert all(c.post("/api/v1/lineage", json=e).status_code in (200, 201)
                   for e in exported)
    assert answers(dst) == before


def test_two_schemas_reported_in_one_millisecond_round_trip_as_the_one_answered(tmp_path):
    """A DatasetEvent and a JobEvent give one dataset two schemas at the same
    instant: the store answers one of them, and so does the store recorded from
    the export."""
    src, dst = f"sqlite:///{tmp_path}/src.db", f"sqlite:///{tmp_path}/dst.db"
    same = [DatasetEvent(eventTime=T[2], producer=PRODUCER, dataset=StaticDataset(
                PG, "twice", facets={"schema": schema(("a", "INT"))})),
            JobEvent(eventTime=T[2], job=Job(namespace="shop", name="j"), producer=PRODUCER,
                     outputs=[OutputDataset(PG, "twice", facets={
                         "schema": schema(("b", "TEXT"))})])]
    with open_store(src) as store, TestClient(create_app(store)) as c:
        for e in same:
            assert c.post("/api/v1/lineage", json=Serde.to_dict(e)).status_code == 201
        answered = store.schema(PG, "twice", 0, MAX_TIME)
    r = CliRunner().invoke(main, ["--store", src, "export", "--namespace", PG, "--dataset",
                                  "twice", "--format", "openlineage"])
    [event] = json.loads(r.stdout)
    (tmp_path / "e.json").write_text(r.stdout)
    assert CliRunner().invoke(main, ["--store", dst, "record", str(tmp_path / "e.json")]
                              ).exit_code == 0
    with open_store(dst) as store:
        assert store.schema(PG, "twice", 0, MAX_TIME) == answered
