"""Stores for the CLI tests, built on the fly by recording small operation sets.

`lineage_store` holds CDAP's worked example (semantics §2) and a chain
``ns:A → ns:B:x → ns:C`` (a dataset name with a ':' on purpose), each run at a
fixed time; `run_cli` invokes the `fll` group and checks that no traceback leaks.
"""
from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from fll import EndPoint, open_store
from fll.cli import main
from tests.lineage_examples import cdap_example, chain

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z, start of the CDAP run
A, B, C = EndPoint("ns", "A"), EndPoint("ns", "B:x"), EndPoint("ns", "C")
RUNS = [  # (run id, start ms, program, info factory)
    ("run-cdap", T0, "cdap", cdap_example),
    ("r-ab", T0 + 100_000, "ab", lambda: chain(A, B, ["id", "v"])),
    ("r-bc", T0 + 200_000, "bc", lambda: chain(B, C, ["id", "v"])),
    ("r-bc-2", T0 + 300_000, "bc", lambda: chain(B, C, ["id", "v"])),
]


def build_store(url: str, runs=RUNS) -> str:
    with open_store(url) as store:
        for run_id, start, program, make in runs:
            store.record(make(), run_id, start, program)
    return url


@pytest.fixture
def lineage_store(tmp_path) -> str:
    """URL of an SQLite store holding `RUNS`."""
    return build_store(f"sqlite:///{tmp_path}/lineage.db")


@pytest.fixture
def run_cli():
    runner = CliRunner()

    def invoke(*args: str, store: str | None = None, env: dict | None = None,
               input: str | None = None) -> Result:
        argv = (["--store", store] if store else []) + list(args)
        result = runner.invoke(main, argv, env=env, input=input, catch_exceptions=False)
        assert "Traceback" not in result.output, result.output
        return result

    return invoke
