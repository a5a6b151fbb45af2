"""`dbt-ol` (openlineage-dbt) over a small dbt project on the duckdb adapter,
emitting to a live `fll serve` with an API key, unchanged; the answers read back
through REST and the CLI with the `duckdb://` URI namespace dbt-ol uses.

dbt lives in its own virtualenv (`scripts/install-dbt.sh`, which CI runs and
this module runs when it is missing): its pins conflict with fll's own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner

from fll.cli import main

from .conftest import TOKEN, start_server, stop

AUTH = {"Authorization": f"Bearer {TOKEN}"}  # reads need the token too

ROOT = Path(__file__).resolve().parents[2]
DBT_VENV = ROOT / ".venv-dbt"
PROJECT = Path(__file__).parent / "dbt_shop"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dbt_run(tmp_path_factory):
    """Seed and run the project with dbt-ol against a fresh live server."""
    if not (DBT_VENV / "bin" / "dbt-ol").exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "install-dbt.sh")], check=True)
    work = tmp_path_factory.mktemp("dbt")
    project = work / "shop"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    store_url = f"sqlite:///{work}/served.db"
    proc, base = start_server(store_url)
    duckdb_file = work / "shop.duckdb"
    env = {**os.environ,
           "PATH": f"{DBT_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "SHOP_DUCKDB": str(duckdb_file),
           "OPENLINEAGE_URL": base, "OPENLINEAGE_API_KEY": TOKEN,
           "OPENLINEAGE_NAMESPACE": "dbt-shop",
           # no telemetry or version checks: no traffic beyond 127.0.0.1
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
           "DBT_VERSION_CHECK": "false"}
    try:
        for command in ("seed", "run"):
            done = subprocess.run([str(DBT_VENV / "bin" / "dbt-ol"), command, "--profiles-dir",
                                   ".", "--project-dir", "."], cwd=project, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            assert "Emitted" in done.stderr + done.stdout
        yield base, store_url, f"duckdb://{duckdb_file}"
    finally:
        stop(proc)


def test_dbt_ol_events_are_recorded_with_the_model_column_lineage(dbt_run):
    base, _, ns = dbt_run
    totals = "shop.main.customer_totals"
    r = httpx.get(f"{base}/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(totals, safe='')}"
                  f"/lineage/fields/total", params={"direction": "incoming", "start": 0,
                                                    "end": "now"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["incoming"] == [{"dataset": {"namespace": ns, "dataset": "shop.main.orders"},
                                     "fields": ["amount"]}]


def test_count_star_is_a_field_with_its_type_though_it_has_no_inputs(dbt_run):
    base, _, ns = dbt_run
    graph = httpx.get(f"{base}/api/v1/column-lineage",
                      params={"nodeId": f"dataset:{ns}:shop.main.customer_totals"},
                      headers=AUTH).json()
    types = {n["data"]["field"]: n["data"]["fieldType"] for n in graph["graph"]
             if n["data"]["dataset"] == "shop.main.customer_totals"}
    assert types == {"customer_id": "integer", "total": "double", "n_orders": "bigint"}


def test_the_cli_reads_dbt_lineage_under_a_duckdb_uri_namespace(dbt_run):
    _, store_url, ns = dbt_run
    result = CliRunner().invoke(main, ["--store", store_url, "lineage",
                                       f"{ns}:shop.main.customer_totals:total",
                                       "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert "amount" in json.dumps(json.loads(result.stdout))
    result = CliRunner().invoke(main, ["--store", store_url, "fields", "--namespace", ns,
                                       "--dataset", "shop.main.customer_totals"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["customer_id", "n_orders", "total"]
