"""The warehouse benchmark end to end on a small warehouse, on every backend:
its events through a live `fll serve`, every answer checked against its own
walk of the generated graph (nodes, edges and, with schema facets, every
node's ``fieldType``). The benchmark exits non-zero on a wrong answer or an
error, so a change that breaks an answer, or the benchmark, fails here
rather than in the next figures taken."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("backend", ["sqlite", "bigtable", "hbase"])
def test_a_small_warehouse_with_schema_facets_answers_exactly(backend, tmp_path):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "bench", "warehouse.py"),
         "--datasets", "60", "--days", "4", "--runs-per-day", "1", "--one-hop", "3",
         "--deep", "3", "--candidates", "5", "--schemas", "--backend", backend]
        + (["--dir", str(tmp_path / "store")] if backend == "sqlite" else []),
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "wrong answers: 0, errors: 0" in done.stdout, done.stdout[-3000:]
    assert "every dataset with its schema facet" in done.stdout
    assert "asked 3 one-hop and 3 deep questions twice" in done.stdout
