"""fsck and fsck --repair beside live writers report nothing on a sound store.

Four writer threads record runs without pause (new operation sets of new
shapes, new sets of a known shape, re-runs of their own sets, schemas new and
known) while fsck and then fsck --repair run, ten rounds. Every state a
writer leaves between two statements is sound or is finished by the writer a
moment later, so any problem reported is a false one: an operator would be
told the store was damaged (and repaired) when it was not. At the end, with
the writers stopped, fsck is clean and every confirmed run (its `record()`
returned) reads back.

Before the fix (issue 31, item 2) a round on SQLite found dozens of sound
rows to be corrupt, orphaned or dangling: fsck scanned the shapes, the data
rows, the schema bodies and then every row, each scan seeing a later store
than the one before.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from fll import EndPoint, StoreError
from fll.store import open_store, open_table
from fll.store.admin import FsckReport, fsck
from tests.lineage_examples import chain

from .conftest import bigtable_emulator, emulator_binary  # noqa: F401
from .workers import BASE_MS, FIELDS, SOURCES, TARGETS

ROUNDS = 10
WRITERS = 4
#: seconds each writer waits between runs, so the store stays small enough for
#: twenty checks in a minute or two (SQLite: about 150 runs a second in all;
#: the emulator and the HBase double, slower to read, about 20)
PAUSE = {"sqlite": 0.02, "bigtable": 0.6, "hbase": 0.2}


@pytest.fixture(scope="module")
def hbase_double():
    from fll.testing.hbase_thrift import HBaseThriftServer

    server = HBaseThriftServer().start()
    yield server
    server.stop()


@pytest.fixture
def race_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/race.db"
    if request.param == "bigtable":
        emu = request.getfixturevalue("bigtable_emulator")
        return f"bigtable://fll-test/race/t-{uuid.uuid4().hex[:8]}?emulator={emu.host}"
    server = request.getfixturevalue("hbase_double")
    return server.url(f"race_{uuid.uuid4().hex[:8]}", pool=8)


def _writer(url: str, w: int, stop: threading.Event, confirmed: list[str],
            errors: list[BaseException], pause: float) -> None:
    """Record runs until ``stop``: every 5th a set of a new shape (new fields),
    every 5th a new set of a known shape (a new destination), the others re-runs
    of this writer's sets; a schema with most runs, now and then a new one."""
    mine = [chain(SOURCES[w], TARGETS[w], FIELDS)]
    try:
        with open_store(url) as store:
            i = 0
            while not stop.is_set():
                src = SOURCES[(w + i) % len(SOURCES)]
                if i % 5 == 0:
                    info = chain(src, TARGETS[i % len(TARGETS)], FIELDS + [f"w{w}_{i}"])
                    mine.append(info)
                elif i % 5 == 1:
                    info = chain(src, EndPoint("ns", f"d{w}_{i}"), FIELDS)
                    mine.append(info)
                else:
                    info = mine[(i * 7) % len(mine)]
                run_id = f"w{w}-r{i}"
                start = BASE_MS + w * 100_000_000 + i * 97
                store.record(info, run_id, start, f"job{w}")
                if i % 3 == 0:
                    dst = sorted(info.destinations)[0]
                    fields = [(f, "string") for f in FIELDS] + \
                        ([(f"s{w}_{i}", None)] if i % 9 == 0 else [])
                    store.record_schema(dst.namespace, dst.name, run_id, start, fields)
                confirmed.append(run_id)
                i += 1
                time.sleep(pause)
    except BaseException as e:  # the test fails on it, in the main thread
        errors.append(e)


def _found(report: FsckReport) -> dict[str, list[str]]:
    return {k: v for k, v in report.to_dict().items() if isinstance(v, list) and v}


@pytest.mark.reliability("fsck, then fsck --repair, 10 rounds beside 4 writer threads "
                         "recording new sets, new shapes, schemas and re-runs")
@pytest.mark.slow
@pytest.mark.parametrize("race_url", ["sqlite", "bigtable", "hbase"], indirect=True)
def test_fsck_beside_writers_reports_no_problem_on_a_sound_store(race_url, figures):
    """Zero problems reported (and nothing repaired) in every round; afterwards,
    writers stopped, fsck is clean and every confirmed run is there."""
    url = race_url
    with open_store(url) as store:  # a few rows of every kind before the race
        for k in range(20):
            store.record(chain(SOURCES[k % 8], TARGETS[k % 8], FIELDS + [f"seed{k}"]),
                         f"seed-{k}", BASE_MS - 10_000 + k, "seed")
    stop = threading.Event()
    confirmed: list[list[str]] = [[] for _ in range(WRITERS)]
    errors: list[BaseException] = []
    pause = PAUSE[url.split(":", 1)[0]]
    threads = [threading.Thread(target=_writer, daemon=True,
                                args=(url, w, stop, confirmed[w], errors, pause))
               for w in range(WRITERS)]
    false_reports: list[tuple[int, str, dict]] = []
    rows = unconfirmed = 0
    table = open_table(url)
    try:
        for t in threads:
            t.start()
        while sum(map(len, confirmed)) < 40 and not errors:  # every writer under way
            time.sleep(0.01)
        for round_ in range(ROUNDS):
            for repair in (False, True):
                name = "fsck --repair" if repair else "fsck"
                try:
                    report = fsck(table, repair=repair)
                except StoreError as e:  # a repair of false problems refused beside writers
                    false_reports.append((round_, name, {"refused": [str(e)]}))
                    continue
                rows = max(rows, report.rows)
                unconfirmed += report.unconfirmed
                print(f"round {round_} {name}: {report.rows} rows, {report.problems} problems, "
                      f"{report.unconfirmed} suspected and cleared by a re-read", flush=True)
                if not report.clean or report.repaired:
                    false_reports.append((round_, name, _found(report)))
            assert not errors, errors
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors
    written = sum(map(len, confirmed))
    figures["rounds"] = ROUNDS
    figures["runs_recorded_meanwhile"] = written
    figures["rows_at_most"] = rows
    figures["suspects_cleared_by_a_re_read"] = unconfirmed
    figures["false_reports"] = sum(sum(map(len, f.values())) for _, _, f in false_reports)
    by_kind: dict[str, int] = {}
    for _, _, found in false_reports:
        for kind, items in found.items():
            by_kind[kind] = by_kind.get(kind, 0) + len(items)
    assert not false_reports, (
        f"{len(false_reports)} of {2 * ROUNDS} checks reported problems on a sound store "
        f"({by_kind}); first: {false_reports[0]}")
    final = fsck(table)
    assert final.clean, _found(final)
    table.close()
    with open_store(url) as store:
        lost = [r for runs in confirmed for r in runs if store.run(r) is None]
    assert not lost, f"{len(lost)} confirmed runs lost, e.g. {lost[:5]}"
