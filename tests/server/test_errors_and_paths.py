"""One error shape everywhere, and path segments holding any character."""
from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, FieldLineageInfo, InputField, ReadOperation, WriteOperation
from fll.server import create_app

from .conftest import v3

ALL = "start=0&end=now"
ROUTES = [
    "/lineage/fields?" + ALL,
    "/lineage/fields/f?direction=both&" + ALL,
    "/lineage/fields/f/operations?" + ALL,
    "/lineage/allfieldlineage?" + ALL,
    "/fields/lineage?" + ALL,
    "/fields/f/lineage?" + ALL,
    "/properties?" + ALL,
]


def _is_error(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error", "status"} and body["status"] == status
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in body["error"]


@pytest.mark.parametrize("rest", ROUTES)
def test_every_dataset_route_answers_404_for_an_unknown_dataset(client, rest):
    _is_error(client.get(v3("nowhere", "nothing", rest)), 404)


@pytest.mark.parametrize("rest", [r for r in ROUTES if "/f/" in r or "/f?" in r])
def test_every_field_route_answers_404_for_an_unknown_field(client, rest):
    _is_error(client.get(v3("chain", "A", rest.replace("/f", "/nope", 1))), 404)


@pytest.mark.parametrize("rest", ROUTES)
def test_every_dataset_route_answers_400_when_start_is_after_end(client, rest):
    _is_error(client.get(v3("chain", "A", rest.replace(ALL, "start=10&end=5"))), 400)


def test_the_error_shape_covers_every_kind_of_failure(client, seeded):
    _is_error(client.get("/no/such/route"), 404)
    _is_error(client.delete("/health"), 405)
    _is_error(client.get(v3("chain", "B", "/fields/lineage?level=abc&" + ALL)), 400)
    _is_error(client.get("/api/v1/column-lineage"), 400)
    _is_error(client.post("/api/v1/lineage", content=b"{not json"), 400)
    _is_error(client.post("/api/v1/lineage", json={"run": {}}), 422)
    small = TestClient(create_app(seeded, max_body=100))
    _is_error(small.post("/api/v1/lineage", content=b"x" * 1000), 413)


def test_a_crash_is_a_generic_500_without_internals(seeded, monkeypatch, caplog):
    def boom(*a, **k):
        raise RuntimeError("secret internal detail /etc/passwd")
    monkeypatch.setattr(seeded, "exists", boom)
    with TestClient(create_app(seeded)) as c:
        r = c.get(v3("chain", "A", "/properties?" + ALL))
    _is_error(r, 500)
    assert "secret" not in r.text and "passwd" not in r.text
    assert "secret internal detail" in caplog.text  # logged for the operator


def test_body_limit_is_enforced_while_reading_without_content_length(seeded):
    c = TestClient(create_app(seeded, max_body=1000))

    def chunks():
        for _ in range(100):
            yield b"x" * 100
    _is_error(c.post("/api/v1/lineage", content=chunks()), 413)


# -- percent-encoded names ----------------------------------------------------------

ODD = [("ns/with/slashes", "a|b c"), ("name space", "path/to/ds|v2"), ("ünï", "%2F literal"),
       ("q?x", "h#sh")]


@pytest.fixture
def odd_client(store):
    for i, (ns, ds) in enumerate(ODD):
        src = EndPoint(ns, ds)
        dst = EndPoint(ns, ds + " out")
        store.record(FieldLineageInfo([
            ReadOperation("read", "", src, ("f/1|x y",)),
            WriteOperation("write", "", dst, (InputField("read", "f/1|x y"),))]),
            f"odd-{i}", 1_000, "odd")
    with TestClient(create_app(store)) as c:
        yield c


@pytest.mark.parametrize("ns, ds", ODD)
def test_names_with_slash_pipe_space_and_percent_round_trip_through_the_path(odd_client, ns, ds):
    f = quote("f/1|x y", safe="")
    r = odd_client.get(v3(ns, ds + " out", f"/lineage/fields/{f}?direction=incoming&{ALL}"))
    assert r.status_code == 200, r.text
    assert r.json()["incoming"] == [{"dataset": {"namespace": ns, "dataset": ds},
                                     "fields": ["f/1|x y"]}]
    r = odd_client.get(v3(ns, ds, f"/lineage/fields?{ALL}"))
    assert r.json() == ["f/1|x y"]
    r = odd_client.get(v3(ns, ds, f"/fields/{f}/lineage?direction=forward&{ALL}"))
    assert r.status_code == 200 and r.json()["paths"][0]["runs"]


def test_an_encoded_slash_is_not_a_path_separator(odd_client):
    # "ns/with/slashes" unencoded would be a different (unknown) route
    r = odd_client.get(f"/v3/namespaces/ns/with/slashes/datasets/x/properties?{ALL}")
    _is_error(r, 404)
    r = odd_client.get("/v3/namespaces/ns%2Fwith%2Fslashes/datasets/a%7Cb%20c/properties?" + ALL)
    assert r.status_code == 200
