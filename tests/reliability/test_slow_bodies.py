"""Slow and idle senders hold connections, never the work (issue 31, item 1).

A real ``fll serve`` on 127.0.0.1 with its default limits (8 ingest slots, 60 s
body timeout, 10 s header timeout), one worker and two, with and without a
token; beside it hundreds of connections that declare a 1 MB ingest body and
send 14 bytes of it, and hundreds that send nothing (`fll.testing.holders`,
the token sent too when there is one: with a token any client can do this).
A normal client's ingests must keep answering 201 promptly, its reads keep
answering, and every run answered 201 must be in the store. Before, 17 such
bodies held all 8 slots and every normal ingest waited 10 s for a 503.
The server is stopped by its process id.
"""
from __future__ import annotations

import time
import uuid

import httpx
import pytest

from fll import EndPoint, open_store
from fll.testing.holders import Holders, percentile

from .test_limits import serving

SLOW, IDLE, REQUESTS = 300, 300, 40
TOKEN = "slow-bodies-token"
OUT = EndPoint("mart", "customers")


def _event(run_id: str) -> dict:
    fields = {c: {"inputFields": [{"namespace": "shop", "name": "orders", "field": c}]}
              for c in ("id", "name", "total")}
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z",
            "run": {"runId": run_id}, "job": {"namespace": "t", "name": "customers"},
            "producer": "https://example.com/fll-tests",
            "inputs": [{"namespace": "shop", "name": "orders"}],
            "outputs": [{"namespace": OUT.namespace, "name": OUT.name,
                         "facets": {"columnLineage": {"fields": fields}}}]}


@pytest.mark.slow
@pytest.mark.parametrize("workers, token", [(1, None), (1, TOKEN), (2, None), (2, TOKEN)],
                         ids=["1-worker", "1-worker-token", "2-workers", "2-workers-token"])
@pytest.mark.reliability(f"{SLOW} ingests declaring 1 MB and sending 14 bytes + {IDLE} idle "
                         f"connections (reopened when closed); default limits; {REQUESTS} "
                         f"ingests and {REQUESTS} reads of a normal client, each on a new "
                         f"connection")
def test_normal_ingests_answer_201_promptly_beside_hundreds_of_slow_and_idle_connections(
        tmp_path, figures, workers, token):
    options = ["--workers", str(workers)] + (["--token", token] if token else [])
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with serving(tmp_path, *options) as server:
        with httpx.Client(base_url=server.base, headers=headers, timeout=30,
                          limits=httpx.Limits(max_keepalive_connections=0)) as client, \
                Holders(server.port, slow=SLOW, idle=IDLE, token=token) as holders:
            assert holders.open_now() == SLOW + IDLE
            time.sleep(0.5)  # every held request has reached the app
            ingests, reads, confirmed = [], [], []
            for _ in range(REQUESTS):
                rid = str(uuid.uuid4())
                began = time.monotonic()
                r = client.post("/api/v1/lineage", json=_event(rid))
                ingests.append(time.monotonic() - began)
                assert r.status_code == 201, r.text
                confirmed.append(rid)
                began = time.monotonic()
                r = client.get("/v3/namespaces/mart/datasets/customers/lineage/fields/total",
                               params={"direction": "incoming", "start": 0, "end": "now"})
                reads.append(time.monotonic() - began)
                assert r.status_code == 200, r.text
            assert holders.failed == 0
        with open_store(server.store_url) as store:
            stored = {r.run_id for r in store.runs(OUT, 0, 2**62)}
    figures["ingest_p99_ms"] = percentile(ingests, 0.99) * 1000
    figures["read_p99_ms"] = percentile(reads, 0.99) * 1000
    assert set(confirmed) <= stored  # nothing confirmed is lost
    assert max(ingests) < 2.0 and max(reads) < 2.0, (max(ingests), max(reads))
