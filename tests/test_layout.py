"""The package's shape: modules a reader can take in, imports in one direction.

Every import counts, including those inside functions and under
``TYPE_CHECKING``: a circle hidden in a function body is still a circle
for the reader, and for the next change.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fll"
MAX_LINES = 600


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root``."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, package: str, known: dict[str, Path]
              ) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    if node.level:
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    out = set()
    for alias in node.names:
        sub = f"{module}.{alias.name}"
        # `from pkg import mod` depends on the submodule, not on pkg's body
        out.add(sub if sub in known else module)
    return {m for m in out if m in known}


def import_graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(node, package, known)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def long_files(root: Path, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    out = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".js") and path.is_file():
            lines = len(path.read_text().splitlines())
            if lines > limit:
                out.append((str(path.relative_to(root.parent)), lines))
    return out


def test_no_import_cycle():
    assert cycles(import_graph(PACKAGE)) == []


def test_no_module_over_the_limit():
    assert long_files(PACKAGE) == []


def test_the_graph_covers_the_package():
    graph = import_graph(PACKAGE)
    assert {"fll", "fll.model", "fll.errors", "fll.cli", "fll.store.lineage"} <= set(graph)
    assert graph["fll.model"] == {"fll.errors"}
    assert "fll.store.reader" in graph["fll.store.levels"]


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


@pytest.mark.parametrize("where", ["top", "function", "type-checking"])
def test_a_cycle_is_found_wherever_the_import_hides(tmp_path: Path, where: str):
    back = {"top": "from . import a\n",
            "function": "def f():\n    from .a import x\n    return x\n",
            "type-checking": "from typing import TYPE_CHECKING\n"
                             "if TYPE_CHECKING:\n    from pkg.a import x\n"}[where]
    pkg = _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from .b import y\nx = 1\n",
                            "pkg/b.py": back + "y = 2\n", "pkg/c.py": "from pkg import a\n"})
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_a_package_importing_its_submodules_is_not_a_cycle(tmp_path: Path):
    pkg = _write(tmp_path, {"pkg/__init__.py": "from .a import x\n",
                            "pkg/a.py": "from . import b\nx = 1\n",
                            "pkg/b.py": "from pkg import errors\n",
                            "pkg/errors.py": ""})
    assert cycles(import_graph(pkg)) == []


def test_a_long_file_is_found(tmp_path: Path):
    pkg = _write(tmp_path, {"pkg/__init__.py": "", "pkg/long.py": "x = 1\n" * 601,
                            "pkg/static/app.js": "let x;\n" * 601,
                            "pkg/short.py": "x = 1\n" * 600})
    assert long_files(pkg) == [("pkg/long.py", 601), ("pkg/static/app.js", 601)]
