"""OpenLineage ingest on a backend without transactions, many events at once:
the server writes them in its pool of writer threads with their table calls
grouped (`fll.server.ingest`, `fll.store.grouped`), and the store ends up with
exactly the rows that posting the same events one at a time gives.

Each round posts, from many clients at once, the START then COMPLETE (or FAIL)
of distinct runs (of ten outputs) and the same events of a few runs from several clients at
once, on the Bigtable emulator and on the HBase Thrift double; then replays
every client's events one at a time into a fresh table of the same backend
and compares every row (but the writers' own "I am writing" rows, which name
the process).

When runs at once share an operation set, each may find the set new and index
itself in the first-run rows, where one at a time only the first does (as
between two servers): both are read alike, so there the rows of a set's
buckets, first runs and directory may differ, every other row may not, and
every question must answer the same, and fsck find the same.
"""
from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, EndPointField
from fll import rowkeys as rk
from fll.rowkeys import MAX_TIME
from fll.server import create_app
from fll.store import open_store
from fll.store.grouped import GroupedTable
from fll.store.layout import UNDER_WAY
from fll.store.writer import WRITER_PREFIX

from ..openlineage.test_ingest_memo import _forget
from ..openlineage.test_run_cycle import OUT, event

ROUNDS = 3
# one round more, whose new sets are built in a builder process
# (`fll.server.set_builder`), the ingest memos forgotten first so they are
BUILDER_ROUND = ROUNDS
DISTINCT = 20      # clients, each with its own run
SAME = 3           # runs each posted by several clients at once
SENDERS = 4        # clients posting each of those


@pytest.fixture(scope="module")
def hbase_double():
    from fll.testing.hbase_thrift import HBaseThriftServer

    server = HBaseThriftServer(transport="framed").start()
    yield server
    server.stop()


def _url(backend: str, request: pytest.FixtureRequest) -> str:
    name = f"g{uuid.uuid4().hex[:10]}"
    if backend == "bigtable":
        emu = request.getfixturevalue("bigtable_emulator")
        return f"bigtable://fll-test/grouped/{name}?emulator={emu.host}&deadline=20"
    return request.getfixturevalue("hbase_double").url(name, deadline=10, pool=8)


def _event(rid: str, state: str, fields: list[str], time: str, out: str,
           schema: list[tuple[str, str]] | None = None) -> dict:
    body = event(rid, state, fields, time, schema=schema)
    body["outputs"][0]["name"] = out
    return body


def _clients(round_: int, shared_sets: bool = False) -> list[list[dict]]:
    """Each client's events, in the order it posts them (one after another);
    ``shared_sets``: some of the distinct runs share an operation set (runs 12
    apart: the same output and fields), else every run has its own set and
    runs 10 apart share an output."""
    clients = []
    for i in range(DISTINCT):
        rid = str(uuid.UUID(int=round_ * 1000 + i))
        if shared_sets:
            out, fields = f"t{i % 4}", [f"f{i % 2}", f"g{i % 3}"]
        else:
            out, fields = f"t{i % 10}", [f"f{i}", f"g{i}"]
        end = "FAIL" if i % 7 == 3 else "COMPLETE"
        clients.append([
            _event(rid, "START", fields[:1], "2024-05-01T10:00:00Z", out,
                   schema=[(fields[0], "INT")]),
            _event(rid, end, fields, "2024-05-01T10:0%d:00Z" % (1 + i % 8), out,
                   schema=[(f, "INT") for f in fields])])
    for j in range(SAME):
        rid = str(uuid.UUID(int=round_ * 1000 + 500 + j))
        events = [_event(rid, "START", ["x"], "2024-05-01T11:00:00Z", f"same{j}"),
                  _event(rid, "COMPLETE", ["x", f"y{j}"], "2024-05-01T11:30:00Z", f"same{j}")]
        clients += [events] * SENDERS
    return clients


# the rows a set's first run is indexed in differently when runs race (module doc)
_INDEX = tuple(p + rk.SEP for p in (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET,
                                    rk.FIRST_BACKWARD, rk.FIRST_FORWARD, rk.DIRECTORY))


def _rows(store, index: bool = True) -> dict[bytes, dict[str, bytes]]:
    """Every row; ``index=False``: without the index rows, and without the run
    rows' mark of a run indexed while under way (`UNDER_WAY`), which says how
    the run is indexed: like the index rows, first-run or bucket cells by
    which run of a new set came first."""
    writers = rk.meta(WRITER_PREFIX)
    rows = {k: v for k, v in store.table.scan() if not k.startswith(writers)
            and (index or not k.startswith(_INDEX))}
    if not index:
        rows = {k: ({c: x for c, x in v.items() if c != UNDER_WAY}
                    if k.startswith(rk.RUN + rk.SEP) else v) for k, v in rows.items()}
    return rows


def _same_rows(got: dict, want: dict, round_: int) -> None:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    assert not (missing or extra or differ), (
        f"round {round_}: {len(missing)} rows missing, e.g. {missing[:3]}; {len(extra)} "
        f"extra, e.g. {extra[:3]}; {len(differ)} differ, e.g. {differ[:3]}")


def _answers(store, run_ids: list[str], outs: list[str]) -> dict:
    """What questions answer: each run, each output's runs and fields and each
    field's inputs over the whole time and each 10 minutes of the day, with and
    without the failed runs."""
    answers: dict = {"runs": {r: store.run(r) for r in run_ids}}
    day = 1714521600000  # 2024-05-01
    windows = [(0, MAX_TIME)] + [(day + 36_000_000 + k * 600_000, day + 36_000_000 +
                                  (k + 1) * 600_000) for k in range(12)]
    for name, view in (("ok", store), ("all", store.including_failed())):
        for out in outs:
            ep = EndPoint(OUT.namespace, out)
            for lo, hi in windows:
                fields = view.fields(ep, lo, hi)
                answers[name, out, lo, "runs"] = sorted(r.run_id for r in view.runs(ep, lo, hi))
                answers[name, out, lo, "fields"] = fields
                for f in fields:
                    answers[name, out, lo, f] = sorted(
                        map(str, view.incoming(EndPointField(ep, f), lo, hi)))
    return answers


def _post_all(client: TestClient, events: list[dict], barrier: threading.Barrier | None
              ) -> list[int]:
    if barrier is not None:
        barrier.wait()
    return [client.post("/api/v1/lineage", json=e).status_code for e in events]


def _builders(round_: int) -> int:
    """The set builders of a round's concurrent server (`BUILDER_ROUND`)."""
    if round_ != BUILDER_ROUND:
        return 0
    _forget()
    return 1


@pytest.mark.reliability("20 distinct runs (START then COMPLETE or FAIL) and 3 runs posted by "
                         "4 clients each, all at once into one server, Bigtable emulator "
                         "and HBase double, 3 rounds each and one with a set builder")
@pytest.mark.parametrize("backend", ["bigtable", "hbase"])
def test_events_written_at_once_store_the_rows_of_one_at_a_time(backend, request, figures,
                                                               monkeypatch):
    """The rows stored equal those of the same events posted one at a time, and
    the writes did go out grouped (fewer calls than callers)."""
    from fll.server import openlineage_ingest
    adopted: list[int] = []
    real_adopt = openlineage_ingest.adopt
    monkeypatch.setattr(openlineage_ingest, "adopt",
                        lambda *a: adopted.append(1) or real_adopt(*a))
    grouped_parts = grouped_calls = 0
    for round_ in range(ROUNDS + 1):
        clients = _clients(round_)
        concurrent = open_store(_url(backend, request))
        app = create_app(concurrent, max_ingests=64, build_processes=_builders(round_))
        barrier = threading.Barrier(len(clients))
        with TestClient(app) as client, ThreadPoolExecutor(len(clients)) as pool:
            statuses = list(pool.map(_post_all, [client] * len(clients), clients,
                                     [barrier] * len(clients)))
        assert all(s in (200, 201, 202) for ss in statuses for s in ss), statuses
        table = concurrent.table
        assert isinstance(table, GroupedTable)
        for lane in (table.puts, table.reads, table.deletes):
            grouped_parts += lane.parts
            grouped_calls += lane.calls

        alone = open_store(_url(backend, request))
        with TestClient(create_app(alone)) as client:
            for events in clients:
                _post_all(client, events, None)
        _same_rows(_rows(concurrent), _rows(alone), round_)
        concurrent.close()
        alone.close()
    figures["grouped_calls"] = grouped_calls
    figures["callers"] = grouped_parts
    assert grouped_calls < grouped_parts  # the writes did share calls
    assert adopted  # the builder round's sets came from the builder


@pytest.mark.reliability("20 runs sharing 15 operation sets (START then COMPLETE or FAIL) and 3 "
                         "runs posted by 4 clients each, all at once, Bigtable emulator and "
                         "HBase double, 3 rounds each and one with a set builder")
@pytest.mark.parametrize("backend", ["bigtable", "hbase"])
def test_runs_sharing_sets_at_once_answer_as_one_at_a_time(backend, request):
    """Runs of shared sets posted at once: every row but a set's index rows
    equals one-at-a-time ingest, every question answers the same, fsck finds
    the same."""
    from fll.store.admin import fsck

    for round_ in range(ROUNDS + 1):
        clients = _clients(round_, shared_sets=True)
        run_ids = sorted({c[0]["run"]["runId"] for c in clients})
        outs = sorted({c[0]["outputs"][0]["name"] for c in clients})
        concurrent = open_store(_url(backend, request))
        barrier = threading.Barrier(len(clients))
        with TestClient(create_app(concurrent, max_ingests=64,
                                   build_processes=_builders(round_))) as client, \
                ThreadPoolExecutor(len(clients)) as pool:
            statuses = list(pool.map(_post_all, [client] * len(clients), clients,
                                     [barrier] * len(clients)))
        assert all(s in (200, 201, 202) for ss in statuses for s in ss), statuses
        alone = open_store(_url(backend, request))
        with TestClient(create_app(alone)) as client:
            for events in clients:
                _post_all(client, events, None)
        _same_rows(_rows(concurrent, index=False), _rows(alone, index=False), round_)
        concurrent.clear_caches()
        assert _answers(concurrent, run_ids, outs) == _answers(alone, run_ids, outs)
        # what fsck finds (data rows a supersede left unused, which purge
        # removes) is the same too
        got, want = fsck(concurrent.table).to_dict(), fsck(alone.table).to_dict()
        assert got == want
        concurrent.close()
        alone.close()


@pytest.mark.reliability("an app started, stopped and started again over an HBase double")
def test_an_app_started_again_writes_again(request):
    """The writer threads end with the app; started again, it makes new ones."""
    store = open_store(_url("hbase", request))
    app = create_app(store)
    for n in range(2):
        with TestClient(app) as client:
            rid = str(uuid.UUID(int=9000 + n))
            body = _event(rid, "COMPLETE", ["x"], "2024-05-01T10:00:00Z", "again")
            assert client.post("/api/v1/lineage", json=body).status_code == 201
        assert app.state.writer._pool is None  # closed with the app
    assert store.run(str(uuid.UUID(int=9001))) is not None
    store.close()


@pytest.mark.reliability("a conflicting event among 30 posted at once, Bigtable "
                         "emulator and HBase double")
@pytest.mark.parametrize("backend", ["bigtable", "hbase"])
def test_one_events_error_answers_only_that_event(backend, request):
    """Events written at once, one of them a run the store API recorded with
    other operations (409): only that one fails, the store keeps its run as it
    was, and every other event is recorded."""
    from ..server.fixtures import ab_info

    store = open_store(_url(backend, request))
    taken = str(uuid.UUID(int=7777))
    store.record(ab_info(), taken, 1_000, "chain/ab")  # not an OpenLineage set: no union
    before = store.run(taken)
    good = [str(uuid.UUID(int=8000 + i)) for i in range(29)]
    bodies = [_event(r, "COMPLETE", ["x"], "2024-05-01T10:00:00Z", f"t{i % 10}")
              for i, r in enumerate(good)]
    bodies.insert(13, _event(taken, "COMPLETE", ["x"], "2024-05-01T10:00:00Z", "t3"))
    barrier = threading.Barrier(len(bodies))
    with TestClient(create_app(store, max_ingests=64)) as client, \
            ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda b: _post_all(client, [b], barrier)[0], bodies))
    assert answers == [201] * 13 + [409] + [201] * 16
    assert store.run(taken) == before
    assert all(store.run(r) is not None for r in good)
    store.close()


@pytest.mark.parametrize("backend", ["bigtable", "hbase"])
def test_a_run_changed_by_another_server_is_merged_with_what_is_stored(backend, request):
    """A server merges a run's next event with the set it kept from the run's
    last one, without reading the run row; when another server changed the
    run meanwhile, the claim sees it and the event is merged with what is
    stored: nothing another server recorded is lost. "Nothing new" (200) is
    answered from the store, not from what the server kept."""
    url = _url(backend, request)
    one, two = open_store(url), open_store(url)
    rid = str(uuid.uuid4())
    try:
        with TestClient(create_app(one)) as a, TestClient(create_app(two)) as b:
            first = a.post("/api/v1/lineage", json=_event(rid, "START", ["f0"],
                                                          "2024-05-01T10:00:00Z", "t"))
            assert first.status_code == 201
            # the other server extends the run: the first one still keeps {f0}
            other = b.post("/api/v1/lineage", json=_event(rid, "RUNNING", ["f1"],
                                                          "2024-05-01T10:01:00Z", "t"))
            assert other.status_code == 201
            assert a.app.state.ingest.runs.known(rid).checksum == first.json()["checksum"]
            complete = _event(rid, "COMPLETE", ["f2"], "2024-05-01T10:02:00Z", "t",
                              schema=[("f0", "INT"), ("f1", "INT"), ("f2", "INT")])
            last = a.post("/api/v1/lineage", json=complete)
            assert last.status_code == 201 and last.json()["schemas"] == 1
            stored = one.run(rid)
            assert stored is not None and last.json()["checksum"] == stored.checksum
            assert last.json()["startTimeInSeconds"] == first.json()["startTimeInSeconds"]
            ep = EndPoint(OUT.namespace, "t")
            assert one.fields(ep, 0, MAX_TIME) == ["f0", "f1", "f2"]
            assert one.schema(ep.namespace, ep.name, 0, MAX_TIME) == {
                "f0": "INT", "f1": "INT", "f2": "INT"}
            # the same event again, on either server: nothing new, from the store
            for client in (b, a):
                again = client.post("/api/v1/lineage", json=complete)
                assert again.status_code == 200 and again.json()["recorded"] is False
                assert again.json()["schemas"] == 1
                assert again.json()["checksum"] == stored.checksum
            # the run model has every event, in order, whichever server took it
            from fll.store import runs as rm
            model = rm.run_model(one, rid)
            assert model is not None and model.state == "COMPLETE"
            assert [t.state for t in model.transitions] == ["START", "RUNNING", "COMPLETE"]
            assert rm.job_run_ids(one.table, "shop", "totals") == [rid]
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("backend", ["bigtable", "hbase"])
def test_a_kept_set_of_a_run_gone_from_the_store_records_it_again(backend, request):
    """A run this server kept whose rows went (a purge, another server's
    repair): its next event records it as new, never answers from memory."""
    url = _url(backend, request)
    store = open_store(url)
    rid = str(uuid.uuid4())
    try:
        with TestClient(create_app(store)) as a:
            body = _event(rid, "START", ["f0"], "2024-05-01T10:00:00Z", "gone")
            assert a.post("/api/v1/lineage", json=body).status_code == 201
            assert a.app.state.ingest.runs.known(rid) is not None
            store.table.delete([rk.run(rid)])  # as a purge leaves it
            assert store.run(rid) is None
            again = a.post("/api/v1/lineage", json=body)
            assert again.status_code == 201 and again.json()["recorded"] is True
            assert store.run(rid) is not None
    finally:
        store.close()
