"""Server under load: the short version of scripts/bench/server_load.py.

The full run (50 clients × 30 s) is `scripts/reliability.py`'s job; this test
keeps 50 clients and 100,000 stored runs but loads for 5 s so CI stays fast.
"""
from __future__ import annotations

import importlib.util

import pytest

from .conftest import FULL, ROOT


def load_module():
    spec = importlib.util.spec_from_file_location("server_load",
                                                  ROOT / "scripts" / "bench" / "server_load.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


SECONDS = 30 if FULL else 5


@pytest.mark.reliability(f"50 concurrent clients for {SECONDS} s over loopback against "
                         "100,000 recorded runs, 20% ingest + 80% queries")
def test_fifty_clients_ingesting_and_querying_at_once_get_no_error_and_lose_no_run(
        tmp_path, figures):
    """Every request answered as expected (201 ingest, 200 query: no 5xx, no
    timeout, no dropped connection), the server stays up, and every run answered
    201 is in the store afterwards."""
    # 5 sets per dataset pair keeps the populate short; the benchmark's default
    # history (100 per pair) is for figures, not for CI
    report = load_module().run_load(clients=50, seconds=SECONDS, runs=100_000,
                                    directory=str(tmp_path), workers=2, variants=5)
    assert report["errors"] == 0, report["error_samples"]
    assert report["server_alive"]
    assert report["ingested_201"] > 0 and report["ingested_lost"] == 0
    assert report["ingested_doubled"] == 0
    assert report["overall"]["requests"] > 50
    figures["requests"] = report["overall"]["requests"]
    figures["req_per_s"] = report["overall"]["rps"]
    figures["p50_ms"] = report["overall"]["p50_ms"]
    figures["p99_ms"] = report["overall"]["p99_ms"]
    figures["ingested_201"] = report["ingested_201"]
