"""`fll.server.ingest.IngestRoute`: POST /api/v1/lineage answered in front of the
router gives, byte for byte, what the framework's route gives (an app with
``fast_reads=False`` has no fast paths), for every kind of answer."""
from __future__ import annotations

import gzip
import json

import pytest
from fastapi.testclient import TestClient

from fll import open_store
from fll.server import create_app

from ..openlineage.test_run_cycle import event

RID = "0190f1c2-7a3b-7cde-8f01-23456789abcd"
GOOD = json.dumps(event(RID, "COMPLETE", ["x"])).encode()
NO_FIELD = event(RID, "COMPLETE", ["x"])
NO_FIELD["outputs"][0]["facets"]["columnLineage"]["fields"]["x"]["inputFields"][0].pop("field")

# (what is sent, headers): each is sent to both apps, in this order, on one store each
CASES = [
    ("a new run", GOOD, {}),
    ("the same run again", GOOD, {}),
    ("a later event adding a field", json.dumps(event(RID, "COMPLETE", ["x", "y"])).encode(), {}),
    ("gzip", gzip.compress(json.dumps(event(RID + "1", "START", ["x"])).encode()),
     {"content-encoding": "gzip"}),
    ("not JSON", b"{not json", {}),
    ("not an object", b"[1, 2]", {}),
    ("no event", b'{"eventTime": "2024-05-01T10:00:00Z"}', {}),
    ("a missing field name", json.dumps(NO_FIELD).encode(), {}),
    ("an unknown encoding", GOOD, {"content-encoding": "br"}),
    ("bad gzip", b"not gzip at all", {"content-encoding": "gzip"}),
    ("a body declared too big", b"{}", {"content-length": str(11 * 1024 * 1024)}),
    ("no lineage", json.dumps(event(RID + "2", "START", [])).encode(), {}),
    ("a dataset event", json.dumps({
        "eventTime": "2024-05-01T10:00:00Z", "producer": "urn:test",
        "dataset": {"namespace": "s3://lake", "name": "raw", "facets": {
            "schema": {"fields": [{"name": "id", "type": "BIGINT"}]}}}}).encode(), {}),
    ("a big integer where a string goes",
     GOOD.replace(b'"shop"', b"123456789012345678901234567890"), {}),
]


class _RouterSpy:
    """The app's router, noting each request it is given."""

    def __init__(self, router):
        self.router = router
        self.seen: list[str] = []

    def __getattr__(self, name):
        return getattr(self.router, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.seen.append(scope["method"])
        await self.router(scope, receive, send)


def _answers(tmp_path, fast: bool) -> list[tuple[int, str, bytes]]:
    out = []
    store = open_store(f"sqlite:///{tmp_path}/{'fast' if fast else 'plain'}.db")
    app = create_app(store, fast_reads=fast)
    spy = app.router = _RouterSpy(app.router)  # before the first request builds the stack
    with store, TestClient(app) as c:
        for _, body, headers in CASES:
            r = c.post("/api/v1/lineage", content=body,
                       headers={"content-type": "application/json", **headers})
            out.append((r.status_code, r.headers.get("content-type"), r.content))
        # another method goes to the router in both: Marquez's lineage graph,
        # here without its nodeId (400)
        r = c.get("/api/v1/lineage")
        out.append((r.status_code, r.headers.get("content-type"), r.content))
    # the fast app's router saw only the GET; the other's saw every request but the
    # body declared too big, which the body bounds refuse before any route
    assert spy.seen == (["GET"] if fast else ["POST"] * (len(CASES) - 1) + ["GET"])
    return out


def test_an_ingest_in_front_of_the_router_answers_byte_for_byte_as_the_route(tmp_path):
    fast, plain = _answers(tmp_path, True), _answers(tmp_path, False)
    names = [c[0] for c in CASES] + ["GET"]
    for name, f, p in zip(names, fast, plain, strict=True):
        assert f == p, name
    assert [s for s, _, _ in fast] == [201, 200, 201, 201, 400, 422, 422, 422, 415, 400, 413,
                                       202, 201, 422, 400]


@pytest.mark.parametrize("token_given, status", [(None, 401), ("wrong", 401), ("T", 201)])
def test_the_token_is_checked_before_an_ingest_is_answered(store, token_given, status):
    with TestClient(create_app(store, token="T")) as c:
        headers = {"content-type": "application/json"}
        if token_given:
            headers["authorization"] = f"Bearer {token_given}"
        r = c.post("/api/v1/lineage", content=GOOD, headers=headers)
    assert r.status_code == status, r.text
    assert (store.run(RID) is not None) == (status == 201)


def test_an_ingest_skips_the_framework_s_layers_once_they_are_built(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    app = create_app(store)
    with store, TestClient(app) as c:
        assert c.get("/health").status_code == 200  # the first request builds the stack
        spy = app.middleware_stack = _RouterSpy(app.middleware_stack)
        for i in range(3):
            body = json.dumps(event(f"{RID[:-1]}{i}", "COMPLETE", ["x"])).encode()
            r = c.post("/api/v1/lineage", content=body,
                       headers={"content-type": "application/json"})
            assert r.status_code == 201, r.text
        assert c.post("/api/v1/lineage", content=b"{not json").status_code == 400
        assert spy.seen == []  # straight to fll's own middleware
        assert c.get("/api/v1/namespaces").status_code == 200
        assert spy.seen == ["GET"]  # everything else as before
