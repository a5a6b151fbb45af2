"""JSON paths as Jayway JsonPath (Wrangler's json-path) reads them, for the paths
Spark's get_json_object cannot read: deep scans (``$..author``), filters
(``$.book[?(@.price < 10)]``), slices, unions and the tail functions.

`compile_path` turns a path into a function of one parsed JSON document; `evaluate`
gives the JSON text json-path writes. Plain definite paths stay on Spark. Pure Python,
no Spark: the directive runs it in a UDF.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

__all__ = ["compile_path", "evaluate", "needs_python", "JsonPathError"]

_MISSING = object()


class JsonPathError(ValueError):
    """A path this reader cannot read (the message says where)."""


def needs_python(path: str) -> bool:
    """Whether ``path`` has what get_json_object lacks: a deep scan, a filter, a slice, a
    union of names or indexes, or a tail function."""
    return bool(re.search(r"\.\.|\?\(|\[[^\]'\"]*:[^\]]*\]|\[[^\]]*,[^\]]*\]|\)\s*$", path))


# -- path steps ---------------------------------------------------------------------------

Step = Callable[[list[Any], Any], list[Any]]


def _children(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return list(node)
    return []


def _descendants(node: Any) -> list[Any]:
    """The node and every node below it, document order (Jayway's deep scan)."""
    out = [node]
    for child in _children(node):
        out.extend(_descendants(child))
    return out


def _names(names: list[str]) -> Step:
    def step(nodes: list[Any], root: Any) -> list[Any]:
        return [n[k] for n in nodes if isinstance(n, dict) for k in names if k in n]
    return step


def _wildcard(nodes: list[Any], root: Any) -> list[Any]:
    return [c for n in nodes for c in _children(n)]


def _indexes(indexes: list[int]) -> Step:
    def step(nodes: list[Any], root: Any) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            if isinstance(n, list):
                out.extend(n[i] for i in indexes if -len(n) <= i < len(n))
        return out
    return step


def _slice(start: int | None, end: int | None) -> Step:
    def step(nodes: list[Any], root: Any) -> list[Any]:
        return [c for n in nodes if isinstance(n, list) for c in n[start:end]]
    return step


def _deep(rest: Step) -> Step:
    def step(nodes: list[Any], root: Any) -> list[Any]:
        return rest([d for n in nodes for d in _descendants(n)], root)
    return step


def _filter(expr: Callable[[Any, Any], bool]) -> Step:
    def step(nodes: list[Any], root: Any) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            items = n if isinstance(n, list) else [n] if isinstance(n, dict) else []
            out.extend(i for i in items if expr(i, root))
        return out
    return step


# -- filter expressions -------------------------------------------------------------------

_FTOKEN = re.compile(r"""\s*(?:
    (?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<regex>/(?:[^/\\]|\\.)*/[a-z]*)
  | (?P<path>[@$](?:\.\.?[A-Za-z_][\w-]*|\.\*|\[[^\]]*\])*(?:\.length\(\))?)
  | (?P<op>==|!=|<=|>=|=~|<|>|&&|\|\||!|\(|\)|\[|\]|,)
  | (?P<word>true|false|null|in|nin|size|empty|anyof|noneof|subsetof)
)""", re.X)


def _tokens(text: str) -> list[tuple[str, str]]:
    pos, out = 0, []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _FTOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise JsonPathError(f"cannot read the filter at {text[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind).strip()))
        pos = m.end()
    return out


def _literal(kind: str, text: str) -> Any:
    if kind == "num":
        return float(text) if any(c in text for c in ".eE") else int(text)
    if kind == "str":
        return json.loads('"' + text[1:-1].replace('"', '\\"').replace("\\'", "'") + '"')
    return {"true": True, "false": False, "null": None}[text]


def _same(a: Any, b: Any) -> bool:
    # Jayway compares numbers by value and nothing else across types (1 is not '1')
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


def _order(a: Any, b: Any) -> int | None:
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (float(a) > float(b)) - (float(a) < float(b))
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return None


class _Filter:
    """A recursive-descent reader of one filter expression (``@.price < 10 && @.isbn``)."""

    def __init__(self, text: str):
        self.toks, self.i = _tokens(text), 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise JsonPathError("the filter ends too early")
        self.i += 1
        return tok

    def parse(self) -> Callable[[Any, Any], bool]:
        expr = self.or_()
        if self.peek() is not None:
            raise JsonPathError(f"unexpected {self.peek()[1]!r} in the filter")  # type: ignore[index]
        return expr

    def or_(self) -> Callable[[Any, Any], bool]:
        left = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right, first = self.and_(), left
            left = (lambda f, g: lambda n, r: f(n, r) or g(n, r))(first, right)
        return left

    def and_(self) -> Callable[[Any, Any], bool]:
        left = self.unary()
        while self.peek() == ("op", "&&"):
            self.take()
            right, first = self.unary(), left
            left = (lambda f, g: lambda n, r: f(n, r) and g(n, r))(first, right)
        return left

    def unary(self) -> Callable[[Any, Any], bool]:
        if self.peek() == ("op", "!"):
            self.take()
            inner = self.unary()
            return lambda n, r: not inner(n, r)
        if self.peek() == ("op", "("):
            self.take()
            inner = self.or_()
            if self.take() != ("op", ")"):
                raise JsonPathError("a ( in the filter is not closed")
            return inner
        return self.comparison()

    def operand(self) -> Callable[[Any, Any], Any]:
        kind, text = self.take()
        if kind == "path":
            get = _value_path(text)
            return get
        if kind in ("num", "str") or (kind == "word" and text in ("true", "false", "null")):
            value = _literal(kind, text)
            return lambda n, r: value
        if kind == "op" and text == "[":
            items = []
            while self.peek() != ("op", "]"):
                items.append(self.operand())
                if self.peek() == ("op", ","):
                    self.take()
            self.take()
            return lambda n, r: [f(n, r) for f in items]
        raise JsonPathError(f"unexpected {text!r} in the filter")

    def comparison(self) -> Callable[[Any, Any], bool]:
        left = self.operand()
        tok = self.peek()
        if tok is None or tok[1] in ("&&", "||", ")"):
            return lambda n, r: left(n, r) is not _MISSING     # existence: [?(@.isbn)]
        kind, op = self.take()
        if op == "=~":
            rk, rx = self.take()
            if rk != "regex":
                raise JsonPathError("=~ needs a /regex/")
            body, flags = rx[1:rx.rindex("/")], rx[rx.rindex("/") + 1:]
            pattern = re.compile(body, re.I if "i" in flags else 0)
            return lambda n, r: isinstance(left(n, r), str) and bool(
                pattern.fullmatch(left(n, r)))
        if op == "empty":
            want = self.operand()
            return lambda n, r: isinstance(left(n, r), (str, list)) and (
                len(left(n, r)) == 0) == bool(want(n, r))
        right = self.operand()
        tests: dict[str, Callable[[Any, Any], bool]] = {
            "==": lambda a, b: _same(a, b),
            "!=": lambda a, b: not _same(a, b),
            "<": lambda a, b: _order(a, b) == -1,
            "<=": lambda a, b: _order(a, b) in (-1, 0),
            ">": lambda a, b: _order(a, b) == 1,
            ">=": lambda a, b: _order(a, b) in (0, 1),
            "in": lambda a, b: isinstance(b, list) and any(_same(a, x) for x in b),
            "nin": lambda a, b: isinstance(b, list) and not any(_same(a, x) for x in b),
            "size": lambda a, b: isinstance(a, (str, list)) and _same(len(a), b),
            "anyof": lambda a, b: isinstance(a, list) and isinstance(b, list) and any(
                _same(x, y) for x in a for y in b),
            "noneof": lambda a, b: isinstance(a, list) and isinstance(b, list) and not any(
                _same(x, y) for x in a for y in b),
            "subsetof": lambda a, b: isinstance(a, list) and isinstance(b, list) and all(
                any(_same(x, y) for y in b) for x in a),
        }
        if op not in tests:
            raise JsonPathError(f"unknown filter operator {op!r}")
        test = tests[op]

        def compare(n: Any, r: Any) -> bool:
            a, b = left(n, r), right(n, r)
            return a is not _MISSING and b is not _MISSING and test(a, b)
        return compare


def _value_path(text: str) -> Callable[[Any, Any], Any]:
    """``@.a.b`` (the current node) or ``$['x']`` (the document) inside a filter: the one
    value it names, or _MISSING."""
    length = text.endswith(".length()")
    if length:
        text = text[: -len(".length()")]
    steps, definite = _parse_steps(text[1:])
    from_root = text.startswith("$")

    def get(node: Any, root: Any) -> Any:
        found = _run(steps, root if from_root else node, root)
        if definite:
            value = found[0] if found else _MISSING
        else:
            value = found
        if length and value is not _MISSING:
            return len(value) if isinstance(value, (list, str, dict)) else _MISSING
        return value
    return get


# -- the path ----------------------------------------------------------------------------

_NAME = r"[^\s.\[\]()]+"


def _bracket(body: str) -> tuple[Step, bool]:
    body = body.strip()
    if body == "*":
        return _wildcard, False
    if body.startswith("?(") and body.endswith(")"):
        return _filter(_Filter(body[2:-1]).parse()), False
    if body[:1] in ("'", '"'):
        names = [_literal("str", p.strip()) for p in re.findall(
            r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""", body)]
        return _names(names), len(names) == 1
    if ":" in body:
        parts = [p.strip() for p in body.split(":")]
        if len(parts) > 3 or not all(re.fullmatch(r"-?\d*", p) for p in parts):
            raise JsonPathError(f"cannot read the slice [{body}]")
        start = int(parts[0]) if parts[0] else None
        end = int(parts[1]) if parts[1] else None
        return _slice(start, end), False
    try:
        indexes = [int(p) for p in body.split(",")]
    except ValueError:
        raise JsonPathError(f"cannot read [{body}]") from None
    return _indexes(indexes), len(indexes) == 1


def _parse_steps(text: str) -> tuple[list[Step], bool]:
    """The steps of a path after its ``$``/``@``, and whether it is definite (one value)."""
    steps: list[Step] = []
    definite = True
    pos = 0
    while pos < len(text):
        deep = text.startswith("..", pos)
        if deep:
            pos += 2
            definite = False
        elif text[pos] == ".":
            pos += 1
        if pos < len(text) and text[pos] == "[":
            end = _closing(text, pos)
            step, one = _bracket(text[pos + 1:end])
            pos = end + 1
        elif pos < len(text) and text[pos] == "*":
            step, one = _wildcard, False
            pos += 1
        else:
            m = re.compile(_NAME).match(text, pos)
            if not m:
                raise JsonPathError(f"cannot read the path at {text[pos:]!r}")
            step, one = _names([m.group(0)]), True
            pos = m.end()
        definite = definite and one
        steps.append(_deep(step) if deep else step)
    return steps, definite


def _closing(text: str, start: int) -> int:
    depth, quote = 0, ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
    raise JsonPathError("a [ in the path is not closed")


def _run(steps: list[Step], node: Any, root: Any) -> list[Any]:
    nodes = [node]
    for step in steps:
        nodes = step(nodes, root)
    return nodes


_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "length": len,
    "size": len,
    "min": lambda xs: float(min(xs)),
    "max": lambda xs: float(max(xs)),
    "avg": lambda xs: sum(xs) / len(xs),
    "sum": lambda xs: float(sum(xs)),
    "stddev": lambda xs: math.sqrt(sum((x - sum(xs) / len(xs)) ** 2 for x in xs) / len(xs)),
}


def compile_path(path: str) -> Callable[[Any], Any]:
    """A function of a parsed document giving what Jayway's ``read(path)`` gives: the
    value of a definite path (``_MISSING`` when absent), the list of matches of an
    indefinite one, or a tail function's number. Raises JsonPathError for a path it
    cannot read."""
    path = path.strip()
    if not path.startswith("$"):
        raise JsonPathError("a JSON path starts with $")
    func = None
    m = re.search(r"\.(\w+)\(\)$", path)
    if m:
        if m.group(1) not in _FUNCTIONS:
            raise JsonPathError(f"unknown function {m.group(1)}()")
        func, path = _FUNCTIONS[m.group(1)], path[:m.start()]
    steps, definite = _parse_steps(path[1:])

    def read(doc: Any) -> Any:
        found = _run(steps, doc, doc)
        if func is not None:
            # a path that finds one array (``$..book``) measures that array
            values = found[0] if len(found) == 1 and isinstance(found[0], list) else found
            numbers = [v for v in values if isinstance(v, (int, float))
                       and not isinstance(v, bool)] if func is not len else values
            try:
                return func(numbers)
            except (ValueError, ZeroDivisionError):
                return _MISSING
        if definite:
            return found[0] if found else _MISSING
        return found
    return read


def evaluate(read: Callable[[Any], Any], text: str | None) -> str | None:
    """json-path's value for one JSON text: a text value as it is, anything else as
    compact JSON text, null when the path finds nothing or the text is not JSON."""
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    value = read(doc)
    if value is _MISSING or value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
