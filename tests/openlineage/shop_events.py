"""A small shop's lineage sent with openlineage-python's own client, for the
tests that read it back with Marquez's clients: two runs of
``shop/customer_totals`` (orders in Postgres → customer totals in DuckDB, the
second adding a column) and one of ``shop/weekly_report`` reading the totals."""
from __future__ import annotations

import uuid

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.facet_v2 import schema_dataset

from .test_python_client import client_for

PG = "postgres://db.internal:5432"
DUCK = "duckdb:///data/shop.duckdb"
ORDERS, TOTALS, REPORT = "shop.public.orders", "main.customer_totals", "main/weekly:report"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
RUN_1, RUN_2, RUN_3 = (str(uuid.uuid4()) for _ in range(3))
TIME_1, TIME_2, TIME_3 = "2024-05-01T09:00:00Z", "2024-05-02T09:00:00Z", "2024-05-02T10:00:00Z"


def _schema(*fields: tuple[str, str]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields])


def _from(ns: str, ds: str, field: str, subtype: str, description: str = "") -> cl.InputField:
    return cl.InputField(ns, ds, field, [cl.Transformation(
        type="DIRECT", subtype=subtype, description=description, masking=False)])


ORDERS_SCHEMA = _schema(("order_id", "INT"), ("customer_id", "INT"), ("amount", "NUMERIC"))
TOTALS_V1 = _schema(("customer_id", "INTEGER"), ("total", "DECIMAL(18,2)"))
TOTALS_V2 = _schema(("customer_id", "INTEGER"), ("total", "DECIMAL(18,2)"),
                    ("n_orders", "BIGINT"))


def _totals_event(state: RunState, run_id: str, time: str, schema, with_count: bool) -> RunEvent:
    fields = {"customer_id": cl.Fields(inputFields=[_from(PG, ORDERS, "customer_id",
                                                          "IDENTITY")]),
              "total": cl.Fields(inputFields=[_from(PG, ORDERS, "amount", "AGGREGATION",
                                                    "sum(amount)")])}
    if with_count:
        fields["n_orders"] = cl.Fields(inputFields=[_from(PG, ORDERS, "order_id",
                                                          "AGGREGATION", "count(*)")])
    return RunEvent(eventType=state, eventTime=time, run=Run(runId=run_id),
                    job=Job(namespace="shop", name="customer_totals"), producer=PRODUCER,
                    inputs=[InputDataset(PG, ORDERS, facets={"schema": ORDERS_SCHEMA})],
                    outputs=[OutputDataset(DUCK, TOTALS, facets={
                        "columnLineage": cl.ColumnLineageDatasetFacet(fields=fields),
                        "schema": schema})])


def send_shop(url: str, token: str) -> OpenLineageClient:
    client = client_for(url, token)
    client.emit(_totals_event(RunState.START, RUN_1, TIME_1, TOTALS_V1, False))
    client.emit(_totals_event(RunState.COMPLETE, RUN_1, "2024-05-01T09:05:00Z", TOTALS_V1,
                              False))
    client.emit(_totals_event(RunState.COMPLETE, RUN_2, TIME_2, TOTALS_V2, True))
    report = cl.ColumnLineageDatasetFacet(fields={
        "best_total": cl.Fields(inputFields=[_from(DUCK, TOTALS, "total", "AGGREGATION",
                                                   "max(total)")])})
    client.emit(RunEvent(eventType=RunState.COMPLETE, eventTime=TIME_3, run=Run(runId=RUN_3),
                         job=Job(namespace="shop", name="weekly_report"), producer=PRODUCER,
                         inputs=[InputDataset(DUCK, TOTALS)],
                         outputs=[OutputDataset(DUCK, REPORT, facets={
                             "columnLineage": report,
                             "schema": _schema(("best_total", "DECIMAL(18,2)"))})]))
    return client
