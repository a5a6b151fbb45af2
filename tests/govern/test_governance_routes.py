"""The tag and diff routes over HTTP: Marquez's tag routes and shapes, fll's
propagation and diff answers, errors in the one error shape, writes guarded."""
from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint
from fll.server import create_app

from .jobs import COPY, FILTER, HASH, SUM, UPPER, job

T0 = 1_700_000_000_000
DAY = 86_400_000
RAW = EndPoint("db", "raw")


@pytest.fixture
def seeded(store):
    store.record(job(RAW, EndPoint("db", "hashed"), {"h": [("ssn", HASH)]}), "r1", T0, "hash")
    store.record(job(RAW, EndPoint("db", "summed"), {"total": [("ssn", SUM)]}), "r2", T0 + 1,
                 "sum")
    store.record(job(RAW, EndPoint("db", "copied"), {"ssn": [("ssn", COPY), ("id", FILTER)]}),
                 "r3", T0 + 2, "copy")
    store.record(job(RAW, EndPoint("db", "hashed"), {"h": [("ssn", UPPER)]}), "r4", T0 + DAY,
                 "hash")
    store.record(job(RAW, EndPoint("s3://b", "a/b"), {"ssn": [("ssn", COPY)]}), "r5", T0 + 3,
                 "copy")
    return store


@pytest.fixture
def client(seeded):
    with TestClient(create_app(seeded)) as c:
        yield c


def test_marquez_tag_routes(client):
    assert client.get("/api/v1/tags").json() == {"tags": []}
    r = client.put("/api/v1/tags/pii", json={"description": "personal data"})
    assert r.status_code == 200
    assert r.json()["name"] == "PII" and r.json()["description"] == "personal data"
    r = client.post("/api/v1/namespaces/db/datasets/raw/fields/ssn/tags/pii")
    assert r.status_code == 200
    ds = r.json()
    assert ds["id"] == {"namespace": "db", "name": "raw"}
    assert {f["name"]: f["tags"] for f in ds["fields"]} == {"id": [], "ssn": ["PII"]}
    r = client.post("/api/v1/namespaces/db/datasets/copied/tags/gold")
    assert r.json()["tags"] == ["GOLD"]
    # the copy carries PII, told apart from a tag put on it
    ssn = {f["name"]: f for f in r.json()["fields"]}["ssn"]
    assert ssn["tags"] == [] and ssn["propagatedTags"] == [{"name": "PII",
                                                             "origins": ["db:raw:ssn"]}]
    names = [t["name"] for t in client.get("/api/v1/tags").json()["tags"]]
    assert names == ["GOLD", "PII"]
    r = client.delete("/api/v1/namespaces/db/datasets/copied/tags/gold")
    assert r.status_code == 200 and r.json()["tags"] == []
    r = client.delete("/api/v1/namespaces/db/datasets/raw/fields/ssn/tags/PII")
    assert {f["name"]: f["tags"] for f in r.json()["fields"]}["ssn"] == []


def test_tag_fields_over_a_range(client):
    client.post("/api/v1/namespaces/db/datasets/raw/fields/ssn/tags/pii")
    r = client.get("/api/v1/tags/pii/fields", params={"end": str(T0 // 1000 + 10)})
    assert r.status_code == 200
    body = r.json()
    assert body["truncated"] is False and body["tag"]["name"] == "PII"
    got = {(f["field"], f["stopped"]) for f in body["fields"]}
    assert got == {("db:raw:ssn", False), ("db:copied:ssn", False), ("s3://b:a/b:ssn", False),
                   ("db:hashed:h", True), ("db:summed:total", True)}
    # the whole history: the later unmasked run of the hash job carries it
    later = client.get("/api/v1/tags/pii/fields").json()["fields"]
    assert ("db:hashed:h", False) in {(f["field"], f["stopped"]) for f in later}
    # a policy set through PUT lets it pass aggregation
    client.put("/api/v1/tags/pii", json={"propagation": {"aggregation": True}})
    got = client.get("/api/v1/tags/pii/fields", params={"end": str(T0 // 1000 + 10)}).json()
    assert ("db:summed:total", False) in {(f["field"], f["stopped"]) for f in got["fields"]}


def test_names_with_slashes_and_colons(client):
    ns, ds = quote("s3://b", safe=""), quote("a/b", safe="")
    r = client.post(f"/api/v1/namespaces/{ns}/datasets/{ds}/fields/ssn/tags/x")
    assert r.status_code == 200 and r.json()["id"] == {"namespace": "s3://b", "name": "a/b"}


def test_diff_route(client):
    day = (T0 + DAY) // 1000
    r = client.get("/api/v1/column-lineage/diff", params={
        "nodeId": "datasetField:db:hashed:h", "before": f"0,{day}", "after": f"{day},now"})
    assert r.status_code == 200
    assert r.json() == {"added": [], "removed": [], "changed": [{
        "edge": {"source": "db:raw:ssn", "destination": "db:hashed:h"},
        "before": [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}],
        "after": [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": False}]}]}
    same = client.get("/api/v1/column-lineage/diff", params={
        "nodeId": "dataset:db:hashed", "before": f"0,{day}", "after": f"0,{day}"})
    assert same.json() == {"added": [], "removed": [], "changed": []}


@pytest.mark.parametrize("method, path, params, status, words", [
    ("get", "/api/v1/tags/nope/fields", {}, 404, "tag 'NOPE' is unknown"),
    ("get", "/api/v1/tags/x/fields", {"start": "soon"}, 400, "start"),
    ("post", "/api/v1/namespaces/db/datasets/nope/tags/x", {}, 404, "db:nope not found"),
    ("post", "/api/v1/namespaces/db/datasets/raw/fields/nope/tags/x", {}, 404, "'nope'"),
    ("get", "/api/v1/column-lineage/diff", {"before": "0,1", "after": "1,2"}, 400, "nodeId"),
    ("get", "/api/v1/column-lineage/diff", {"nodeId": "dataset:db:raw", "before": "0",
                                            "after": "1,2"}, 400, "before"),
    ("get", "/api/v1/column-lineage/diff", {"nodeId": "dataset:db:raw", "before": "0,1",
                                            "after": "1,2", "depth": "0"}, 400, "depth"),
    ("get", "/api/v1/column-lineage/diff", {"nodeId": "dataset:db:zz", "before": "0,1",
                                            "after": "1,2"}, 404, "no known dataset"),
])
def test_errors_are_one_line_in_the_error_shape(client, method, path, params, status, words):
    r = getattr(client, method)(path, params=params)
    assert r.status_code == status
    assert set(r.json()) == {"error", "status"} and words in r.json()["error"]


def test_a_bad_policy_is_a_400_and_nothing_is_written(client):
    r = client.put("/api/v1/tags/pii", json={"propagation": {"aggregation": "yes"}})
    assert r.status_code == 400 and "propagation" in r.json()["error"]
    assert client.get("/api/v1/tags").json() == {"tags": []}


def test_writes_need_the_token(seeded):
    with TestClient(create_app(seeded, token="s3cret", public_reads=True)) as c:
        assert c.post("/api/v1/namespaces/db/datasets/raw/tags/x").status_code == 401
        assert c.put("/api/v1/tags/x").status_code == 401
        assert c.get("/api/v1/tags").status_code == 200
        ok = c.post("/api/v1/namespaces/db/datasets/raw/tags/x",
                    headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_marquez_dataset_json_marks_tags_put_and_tags_lineage_carries(client):
    assert client.post("/api/v1/namespaces/db/datasets/raw/fields/ssn/tags/PII").status_code \
        in (200, 201)
    # where it was put: in the field's tags, nothing propagated
    raw = client.get("/api/v1/namespaces/db/datasets/raw").json()
    ssn = {f["name"]: f for f in raw["fields"]}.get("ssn")
    if ssn is not None:  # a dataset read only has no schema of its own: no fields listed
        assert "PII" in ssn["tags"] and "propagatedTags" not in ssn
    # the copy carries it, told apart as propagated (with where it came from)
    copied = client.get("/api/v1/namespaces/db/datasets/copied").json()
    fields = {f["name"]: f for f in copied["fields"]}
    assert "PII" in fields["ssn"]["tags"]
    assert fields["ssn"]["propagatedTags"][0]["name"] == "PII"
    assert "db:raw:ssn" in fields["ssn"]["propagatedTags"][0]["origins"]
    # a sum stops it: not in the aggregate's fields
    summed = {f["name"]: f for f in
              client.get("/api/v1/namespaces/db/datasets/summed").json()["fields"]}
    assert "PII" not in summed["total"]["tags"]
