"""The server's read caches and its fast path for hot routes change how fast an
answer is computed, never what it says: every route the load benchmark uses
(and its neighbours, and their errors) answers the same status and bytes with
them as through the framework reading the store directly, and a write made
anywhere — this server, another store handle on the file (another worker or
server), a purge — is in the very next answer."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation, Transformation,
                 TransformOperation, WriteOperation, open_store)
from fll.server import create_app

from .conftest import v3
from .fixtures import record_all

ALL = "start=0&end=4000000000"  # fixed: answers that say their range stay comparable
FILTER = Transformation("INDIRECT", "FILTER", "where n > 0")
UPPER = Transformation("DIRECT", "TRANSFORMATION", "upper(x)")


def variant(pair: int, v: int, *, extra: str | None = None) -> FieldLineageInfo:
    """A src → dst set in the load benchmark's style: each variant distinct, some
    tagged, some fields dropped (read, never written)."""
    src = EndPoint("load", f"src{pair}", {"path": f"/raw/day={v}"})
    dst = EndPoint("load", f"dst{pair}")
    fields = ["id", "name", "amount", "city"][:2 + v % 3]
    ops: list = [ReadOperation("read", "read", src, fields + ["unused"])]
    for f in fields:
        tags = {InputField("read", f): (UPPER,)} if v % 2 else {}
        ins = [InputField("read", f)]
        if v % 3 == 0:
            ins.append(InputField("read", "unused"))
            tags[InputField("read", "unused")] = (FILTER,)
        ops.append(TransformOperation(f"t_{f}", f"v{v} {f}", ins, [f], tags))
    outs = [InputField(f"t_{f}", f) for f in fields]
    if extra:
        ops.append(TransformOperation(f"t_{extra}", "new", [InputField("read", "id")], [extra]))
        outs.append(InputField(f"t_{extra}", extra))
    ops.append(WriteOperation("write", "write", dst, outs))
    return FieldLineageInfo(ops)


def downstream(pair: int) -> FieldLineageInfo:
    """dst → out: a second hop for multi-level answers."""
    dst, out = EndPoint("load", f"dst{pair}"), EndPoint("load", f"out{pair}")
    return FieldLineageInfo([
        ReadOperation("r", "read", dst, ["id", "name"]),
        TransformOperation("j", "join", [InputField("r", "id"), InputField("r", "name")], ["key"],
                           {InputField("r", "name"): (FILTER,)}),
        WriteOperation("w", "write", out, [InputField("j", "key")])])


def populate(store) -> None:
    record_all(store)
    n = 0
    for pair in range(3):
        for v in range(7):
            for _rep in range(2):
                n += 1
                store.record(variant(pair, v), f"run-{n}", 10_000_000 + n * 1000, f"job/{pair}")
        store.record(downstream(pair), f"down-{pair}", 20_000_000 + pair * 1000, "job/down")
    # an alias: the dataset is asked for under another name, and runs under both
    store.record_alias("logical", "orders", "load", "dst1")
    store.record(variant(1, 9), "run-under-alias", 30_000_000, "job/alias")


PATHS = [
    v3("load", "dst0", f"/lineage/fields?{ALL}"),
    v3("load", "dst0", f"/lineage/fields?prefix=NA&{ALL}"),
    v3("load", "dst0", "/lineage/fields?includeCurrent=true&start=0&end=10050"),
    v3("load", "dst1", f"/lineage/fields?{ALL}"),
    v3("logical", "orders", f"/lineage/fields?{ALL}"),
    *[v3("load", ds, f"/lineage/fields/{f}?direction={d}&{ALL}&level={lvl}{ind}")
      for ds in ("dst0", "dst1", "src2", "out0") for f in ("id", "name", "key")
      for d in ("both", "incoming", "outgoing") for lvl in (1, 2)
      for ind in ("", "&indirect=hide")],
    v3("load", "dst0", "/lineage/fields/id?direction=both&start=10000&end=10020&level=2"),
    *[v3("load", ds, f"/lineage/fields/{f}/operations?direction={d}&{ALL}")
      for ds in ("dst0", "dst1") for f in ("id", "amount") for d in ("incoming", "both")],
    v3("load", "dst0", "/lineage/fields/id/operations?direction=incoming&start=now-1d&end=now"),
    *[v3("load", ds, f"/lineage/allfieldlineage?direction={d}&{ALL}")
      for ds in ("dst0", "dst1", "src0", "out2") for d in ("incoming", "outgoing", "both")],
    *[v3("load", ds, f"/fields/lineage?{ALL}&level=3{ind}")
      for ds in ("dst0", "src1") for ind in ("", "&indirect=hide")],
    v3("load", "dst1", f"/fields/name/lineage?{ALL}&direction=backward"),
    v3("load", "dst1", f"/properties?{ALL}"),
    *[f"/api/v1/column-lineage?nodeId=datasetField:load:{ds}:{f}&depth={depth}{more}"
      for ds in ("dst0", "dst1", "out1") for f in ("id", "name", "key") for depth in (1, 5)
      for more in ("", "&withDownstream=true", "&indirect=hide")],
    "/api/v1/column-lineage?nodeId=dataset:load:dst2&depth=3&withDownstream=true",
    "/api/v1/column-lineage?nodeId=datasetField:logical:orders:id&depth=5",
    "/api/v1/column-lineage?nodeId=job:job:1&depth=2",
    "/api/v1/datasets",
    # errors keep their answers too, whoever gives them
    v3("load", "nope", f"/lineage/fields?{ALL}"),
    v3("load", "dst0", f"/lineage/fields/nope?direction=both&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=sideways&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&level=abc&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?level=abc&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&level=%2B2&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&level=0&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&level=101&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&level=02&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id?direction=both&indirect=maybe&{ALL}"),
    v3("load", "dst0", "/lineage/fields/id?direction=both&start=&end=now"),
    v3("load", "dst0", "/lineage/fields/id?direction=both&end=now"),
    v3("load", "dst0", "/lineage/fields/id?direction=both&start=5&end=4"),
    v3("load", "dst0", "/lineage/fields/id?direction=both&start=yesterday&end=now"),
    v3("load", "dst0", f"/lineage/fields?includeCurrent=yes&{ALL}"),
    v3("load", "dst0", f"/lineage/fields?includeCurrent=TRUE&{ALL}"),
    v3("load", "dst0", f"/lineage/fields?includeCurrent=maybe&{ALL}"),
    v3("load", "dst0", f"/lineage/fields?prefix=&{ALL}"),
    v3("load", "dst0", f"/lineage/fields/?{ALL}"),
    v3("load", "dst0", f"/lineage/fields//operations?{ALL}"),
    v3("load", "dst0", f"/lineage/fields/id/operations?direction=up&{ALL}"),
    v3("load", "dst0", f"/lineage/allfieldlineage?direction=&{ALL}"),
    v3("load", "dst0", f"/lineage/allfieldlineage?direction=incoming&direction=outgoing&{ALL}"),
    f"/v3/namespaces/load/datasets/dst%FF/lineage/fields?{ALL}",
    f"/v3/namespaces/load/datasets/dst0%2Fx/lineage/fields?{ALL}",
    "/api/v1/column-lineage?nodeId=datasetField:load:dst0:nope",
    "/api/v1/column-lineage",
    "/api/v1/column-lineage?nodeId=",
    "/api/v1/column-lineage?nodeId=datasetField:load:dst0:id&depth=-1",
    "/api/v1/column-lineage?nodeId=datasetField:load:dst0:id&depth=x",
    "/api/v1/column-lineage?nodeId=datasetField:load:dst0:id&withDownstream=1",
    "/api/v1/column-lineage?nodeId=table:load:dst0",
]


@pytest.fixture
def loaded(store):
    populate(store)
    return store


def answers(store, paths, *, fast: bool, **options) -> list[tuple[int, str, bytes]]:
    # fast=False: every request goes through the framework and reads the store itself
    with TestClient(create_app(store, fast_reads=fast, **options)) as c:
        def get(p: str) -> tuple[int, str, bytes]:
            r = c.get(p, headers={"Authorization": "Bearer t"})
            return r.status_code, r.headers.get("content-type", ""), r.content
        # twice: the second answer comes from the warm caches
        out = [get(p) for p in paths]
        again = [get(p) for p in paths]
        assert again == out
        return out


@pytest.mark.parametrize("options", [{}, {"token": "t"}, {"token": "t", "public_reads": True}])
def test_every_route_answers_the_same_bytes_on_the_fast_path_as_through_the_framework(
        loaded, options):
    paths = PATHS if not options else PATHS[::7]  # with a token: a sample of each kind
    plain = answers(loaded, paths, fast=False, **options)
    assert sum(status == 200 for status, _, _ in plain) > len(paths) * 0.5  # and 400s, 404s
    fast = answers(loaded, paths, fast=True, **options)
    for path, want, got in zip(paths, plain, fast, strict=True):
        assert got == want, path


def test_the_hot_routes_are_answered_before_the_framework_and_the_rest_are_not(loaded):
    import asyncio

    app = create_app(loaded)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    def fast(path: str, method: str = "GET", headers=()) -> bool:
        raw, _, query = path.partition("?")
        scope = {"type": "http", "method": method, "path": raw, "raw_path": raw.encode(),
                 "query_string": query.encode(), "headers": list(headers)}
        return asyncio.run(app.fast(scope, send))

    assert all(fast(p) for p in PATHS[:40])
    assert fast("/api/v1/column-lineage?nodeId=datasetField:load:dst0:id&depth=5")
    assert not fast(v3("load", "dst0", "/lineage/fields/id?direction=both&level=abc"))
    assert not fast(v3("load", "dst0", f"/properties?{ALL}"))
    assert not fast(v3("load", "dst0", f"/lineage/fields?{ALL}"), method="POST")
    guarded = create_app(loaded, token="t")
    assert guarded.fast is not None
    app = guarded
    assert not fast(v3("load", "dst0", f"/lineage/fields?{ALL}"))  # the app says 401
    assert fast(v3("load", "dst0", f"/lineage/fields?{ALL}"),
                headers=[(b"authorization", b"Bearer t")])


def _field_sources(c, ds: str, field: str) -> list[str]:
    body = c.get(v3("load", ds, f"/lineage/fields/{field}?direction=incoming&{ALL}")).json()
    return sorted(f for g in body["incoming"] or [] for f in g["fields"])


def test_a_write_through_another_store_handle_is_in_the_next_answer(loaded, tmp_path):
    other = open_store(loaded.url)  # another worker or server on the same file
    try:
        with TestClient(create_app(loaded)) as c:
            fields_path = v3("load", "dst0", f"/lineage/fields?{ALL}")
            col_path = "/api/v1/column-lineage?nodeId=datasetField:load:dst0:fresh&depth=2"
            for _ in range(3):  # the caches are warm
                before = c.get(fields_path).json()
            assert "fresh" not in before
            assert c.get(col_path).status_code == 404
            other.record(variant(0, 50, extra="fresh"), "run-fresh", 50_000_000, "job/other")
            assert "fresh" in c.get(fields_path).json()
            assert _field_sources(c, "dst0", "fresh") == ["id"]
            graph = c.get(col_path).json()["graph"]
            assert [(n["data"]["dataset"], n["data"]["field"]) for n in graph] == [
                ("dst0", "fresh"), ("src0", "id")]
    finally:
        other.close()


def test_a_purged_set_is_gone_from_the_next_answer(loaded):
    from fll.store.admin import purge

    with TestClient(create_app(loaded)) as c:
        path = v3("load", "dst2", f"/lineage/fields?{ALL}")
        loaded.record(variant(2, 60, extra="old"), "run-old", 1_000, "job/old")
        for _ in range(3):
            assert "old" in c.get(path).json()
        assert _field_sources(c, "dst2", "old") == ["id"]
        purge(loaded, 2_000)
        assert "old" not in c.get(path).json()
        gone = c.get(v3("load", "dst2", f"/lineage/fields/old?direction=incoming&{ALL}"))
        assert gone.status_code == 404  # no set that ever wrote it is left
