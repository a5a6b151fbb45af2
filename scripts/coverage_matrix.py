"""The Spark write coverage matrix of docs/spark.md, generated from the tests' ``covers`` markers.

    .venv/bin/python scripts/coverage_matrix.py           # print the table
    .venv/bin/python scripts/coverage_matrix.py --write   # put it in docs/spark.md
    .venv/bin/python scripts/coverage_matrix.py --check   # exit 1 if docs/spark.md differs

A test that proves fll records a write says so with
``@pytest.mark.covers(command, how, route)``: ``command`` the analyzed plan's
root (a write command fll handles), ``how`` the way the job issued it, and
``route`` ``track`` (`fll.spark.track`) or ``listener`` (the JVM listener and
``fll serve``). The markers are read from the test sources (nothing runs), so
the table says what a test claims, and the test's assertions are what prove it.

Every write command fll handles gets a row: the command lists of the Python
side (`fll.spark.datasets.WRITE_COMMANDS`) and of the listener (``WRITES`` in
``LineageListener.java``) must be equal, a marker must name one of them, and
a command no test covers is listed as such, never left out.
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fll.spark.datasets import WRITE_COMMANDS  # noqa: E402

PAGE = ROOT / "docs" / "spark.md"
JAVA = ROOT / "fll" / "spark" / "jvm" / "LineageListener.java"
START = ("<!-- coverage-matrix: generated from the tests' covers markers by "
         "scripts/coverage_matrix.py --write; do not edit by hand -->")
END = "<!-- /coverage-matrix -->"
ROUTES = ("track", "listener")

#: what the table says of writes fll does not follow, each with why (kept here, by hand)
NOT_HANDLED = [
    ("streaming `foreachBatch`",
     "Spark 4's ForeachBatchSink hands each micro-batch to the function as a `LogicalRDD`, "
     "which names no source: a write inside it cannot be traced to the stream's sources "
     "(the listener's event would be answered 202 `unknown: built from an RDD "
     "(LogicalRDD)`, as any RDD write is). Read from Spark's code, not tested"),
    ("`DataFrameWriter.save()` with no path (JDBC, custom sinks)",
     "no destination to name: track() skips it with that reason; the listener sees no "
     "write command it handles"),
]


@dataclass(frozen=True, order=True)
class Cover:
    command: str
    how: str
    route: str
    test: str  # tests/…/file.py::test_name


def _const(node: ast.expr, where: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise SystemExit(f"{where}: covers() takes string literals")


def _is_covers(dec: ast.expr) -> bool:
    return (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
            and dec.func.attr == "covers" and isinstance(dec.func.value, ast.Attribute)
            and dec.func.value.attr == "mark")


def collect(tests: Path = ROOT / "tests") -> list[Cover]:
    """Every ``covers`` marker on a test function under ``tests``."""
    out: list[Cover] = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                if not _is_covers(dec):
                    continue
                assert isinstance(dec, ast.Call)
                where = f"{rel}:{dec.lineno}"
                if len(dec.args) != 3 or dec.keywords:
                    raise SystemExit(f"{where}: covers(command, how, route) takes three "
                                     f"positional strings")
                command, how, route = (_const(a, where) for a in dec.args)
                if route not in ROUTES:
                    raise SystemExit(f"{where}: route must be one of {ROUTES}, got {route!r}")
                out.append(Cover(command, how, route, f"{rel}::{node.name}"))
    return sorted(out)


def listener_writes() -> set[str]:
    """The write commands the Java listener sends (its ``WRITES`` set)."""
    text = JAVA.read_text(encoding="utf-8")
    m = re.search(r"Set<String>\s+WRITES\s*=\s*Set\.of\((.*?)\);", text, re.DOTALL)
    if m is None:
        raise SystemExit(f"{JAVA}: no WRITES = Set.of(...) found")
    return set(re.findall(r'"(\w+)"', m.group(1)))


def table(covers: list[Cover]) -> str:
    handled = set(WRITE_COMMANDS)
    java = listener_writes()
    if java != handled:
        raise SystemExit(f"the listener and the Python side handle different writes: only "
                         f"Java {sorted(java - handled)}, only Python {sorted(handled - java)}")
    unknown = sorted({c.command for c in covers} - handled)
    if unknown:
        raise SystemExit(f"covers() names commands fll does not handle: {unknown}")
    lines = ["| plan node (write command) | issued as | route | test |", "|---|---|---|---|"]
    for command in sorted(handled):
        mine = [c for c in covers if c.command == command]
        if not mine:
            lines.append(f"| `{command}` | — | — | **no test** |")
        for c in mine:
            lines.append(f"| `{command}` | {c.how} | {c.route} | `{c.test}` |")
    for what, why in NOT_HANDLED:
        lines.append(f"| not followed: {what} | {why} | — | — |")
    return "\n".join(lines)


def section(covers: list[Cover]) -> str:
    return f"{START}\n{table(covers)}\n{END}"


def page_with(text: str, covers: list[Cover]) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"{PAGE.name} has no coverage matrix markers ({START!r} … {END!r})")
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    return head + section(covers) + tail


def main(argv: list[str]) -> int:
    covers = collect()
    if "--write" in argv:
        PAGE.write_text(page_with(PAGE.read_text(encoding="utf-8"), covers),
                          encoding="utf-8")
        return 0
    if "--check" in argv:
        text = PAGE.read_text(encoding="utf-8")
        if page_with(text, covers) != text:
            print("docs/spark.md's coverage matrix is out of date: run "
                  "scripts/coverage_matrix.py --write", file=sys.stderr)
            return 1
        return 0
    print(table(covers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
