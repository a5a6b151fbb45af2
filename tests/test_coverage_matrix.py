"""docs/spark.md's Spark write coverage matrix is the one the tests' ``covers`` markers make."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "coverage_matrix.py"


def _matrix():
    spec = importlib.util.spec_from_file_location("coverage_matrix", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_the_coverage_matrix_in_the_docs_is_up_to_date():
    m = _matrix()
    assert m.main(["--check"]) == 0, "run scripts/coverage_matrix.py --write"


def test_every_handled_write_command_has_a_row_and_markers_name_real_tests():
    m = _matrix()
    covers = m.collect()
    text = m.table(covers)  # also checks the Java and Python command lists agree
    for command in m.WRITE_COMMANDS:
        assert f"| `{command}` |" in text
    root = SCRIPT.parent.parent
    for c in covers:
        path, name = c.test.split("::")
        assert f"def {name}(" in (root / path).read_text(), c
