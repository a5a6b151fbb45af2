"""The governance benchmark at a small size: its generated warehouse gives the
closure, stopped fields and diff it checks (the figures themselves are the
benchmark's, docs/benchmarks.md, never asserted here)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_checks_its_answers_at_a_small_size(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "govern.py"),
                           "--width", "10", "--first", "5", "--second", "15",
                           "--dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "201 fields carry it, 500 stopped (both checked, and every path against a plain walk)" in out
    assert "100 changed and 5 added (checked)" in out
    assert "fll tag show PII --format json:" in out and "fll diff --depth 2:" in out
