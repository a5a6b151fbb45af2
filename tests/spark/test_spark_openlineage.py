"""Captured facets against the OpenLineage spec, and through the REST ingest endpoint.

The JSON Schemas are the copies kept for the server tests (tests/server/spec);
they are read from there, not duplicated.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from fll import EndPoint, EndPointField
from fll.rowkeys import MAX_TIME
from fll.spark import capture, column_lineage, to_operations

pytestmark = pytest.mark.spark

CASES = yaml.safe_load((Path(__file__).parent / "data" / "lineage_cases.yaml").read_text())


def test_every_case_facet_is_a_valid_column_lineage_facet(spark, lineage_tables, validators):
    _, facet_v = validators
    invalid = {}
    for case in CASES:
        facet = column_lineage(case["sql"], spark)
        errors = [e.message for e in facet_v.iter_errors(facet)]
        if errors:
            invalid[case["name"]] = errors
    assert invalid == {}
    assert len(CASES) >= 20


def test_an_invalid_facet_is_caught_by_the_schema(validators):
    _, facet_v = validators
    bad = {"_producer": "x", "_schemaURL": "https://x/y.json",
           "fields": {"a": {"inputFields": [{"namespace": "file", "name": "/t"}]}}}
    assert any("'field' is a required property" in e.message for e in facet_v.iter_errors(bad))


def _event(facet: dict, inputs: list[tuple[str, str]], dest: EndPoint) -> dict:
    return {
        "eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00.000Z",
        "producer": "https://example.org/fll-tests", "schemaURL":
            "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "spark", "name": "lineage_roundtrip"},
        "inputs": [{"namespace": ns, "name": name} for ns, name in inputs],
        "outputs": [{"namespace": dest.namespace, "name": dest.name,
                     "facets": {"columnLineage": facet}}],
    }


def test_an_event_carrying_a_captured_facet_round_trips_through_the_rest_api(
        spark, lineage_tables, store, validators, tmp_path):
    from starlette.testclient import TestClient

    from fll.server.app import create_app

    event_v, facet_v = validators
    cap = capture("SELECT c.city, sum(o.amount) AS revenue, count(o.order_id) AS n, "
                  "max(CASE WHEN o.status = 'paid' THEN o.placed END) AS last_paid "
                  "FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
                  "WHERE o.amount > 1 GROUP BY c.city", spark)
    dest = EndPoint("file", str(tmp_path / "city_report"))
    event = _event(cap.facet, cap.inputs, dest)
    event_v.validate(event)
    facet_v.validate(cap.facet)

    response = TestClient(create_app(store)).post("/api/v1/lineage", json=event)
    assert response.status_code == 201, response.text

    expected = to_operations(cap, dest).incoming_summary()
    assert set(expected) == {EndPointField(dest, f)
                             for f in ("city", "revenue", "n", "last_paid")}
    for efield, sources in expected.items():
        assert store.incoming(efield, 0, MAX_TIME) == set(sources), efield.field
    orders = EndPoint("file", os.path.abspath(lineage_tables["orders"]))
    assert EndPointField(orders, "status") in expected[EndPointField(dest, "last_paid")]
