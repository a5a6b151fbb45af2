"""JEXL 3.0's arithmetic for plain set-column expressions, written as Spark SQL.

Wrangler evaluates ``set-column`` with JEXL 3.0 in strict mode, whose operators do
not mean what Spark SQL's do: ``+`` with a text operand concatenates (``'2' + 3`` is
``23``); ``-``, ``*``, ``/`` and ``%`` read text as a number, as a double when the
text has ``.``, ``e`` or ``E`` and as a whole number otherwise; ``/`` of two whole
numbers truncates (``7 / 2`` is 3) and ``%`` of whole numbers is ``BigInteger.mod``
(never negative); a decimal literal such as ``1.5`` is a double. Spark SQL would
instead cast ``'11.79'`` to a whole number and stop the run, give 3.5 for ``7 / 2``
and read ``1.5`` as a decimal.

`translate` rewrites an expression made only of column names, numbers, quoted text,
parentheses, unary minus and ``+ - * / %`` so that Spark gives JEXL's values. Any
other expression (a function call, a comparison…) is left as Spark SQL. Where JEXL
picks a type per value (a text column holding ``7`` in one row and ``7.5`` in the
next gives an Integer and a Double), the Spark column is a double holding JEXL's
value. This module only rewrites text: it must never import Spark.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["translate", "Arithmetic"]

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[lLdDfF]?|\.\d+(?:[eE][+-]?\d+)?[dDfF]?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)
  | (?P<op>[-+*/%()])
""", re.VERBOSE)

#: Spark type name → the kind of value JEXL would see.
_KINDS = {"string": "text", "byte": "int", "short": "int", "integer": "int", "long": "long",
          "float": "double", "double": "double", "boolean": "bool"}
# JEXL's FLOAT_PATTERN: what text counts as a floating point number once it has . e or E
_FLOAT_TEXT = r"^[+-]?[0-9]*(\\.[0-9]*)?([eE]?[+-]?[0-9]*)?$"


@dataclass(frozen=True)
class _Node:
    kind: str                   # col, num, str, neg, bin
    text: str = ""
    left: "_Node | None" = None
    right: "_Node | None" = None


class _Unsupported(Exception):
    """The expression is not plain arithmetic: leave it to Spark SQL."""


def _tokens(expression: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expression):
        m = _TOKEN.match(expression, pos)
        if not m:
            raise _Unsupported
        if m.lastgroup != "space":
            out.append((str(m.lastgroup), m.group(0)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.i = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise _Unsupported
        self.i += 1
        return tok

    def expression(self, level: int = 0) -> _Node:
        ops = ("+-", "*/%")[level]
        node = self.expression(level + 1) if level == 0 else self.unary()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in ops:
            self.take()
            right = self.expression(level + 1) if level == 0 else self.unary()
            node = _Node("bin", tok[1], node, right)
        return node

    def unary(self) -> _Node:
        kind, text = self.take()
        if kind == "op" and text == "-":
            return _Node("neg", left=self.unary())
        if kind == "op" and text == "+":
            return self.unary()
        if kind == "op" and text == "(":
            node = self.expression()
            if self.take() != ("op", ")"):
                raise _Unsupported
            return node
        if kind == "name":
            if self.peek() == ("op", "("):      # a function call: not plain arithmetic
                raise _Unsupported
            if text.lower() in ("true", "false", "null", "not", "and", "or", "div"):
                raise _Unsupported
            return _Node("col", text[1:-1].replace("``", "`") if text[0] == "`" else text)
        if kind in ("num", "str"):
            return _Node(kind, text)
        raise _Unsupported


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _Emitter:
    def __init__(self, types: dict[str, str]):
        self.types = {k.lower(): v for k, v in types.items()}
        self.changed = False
        self.numbers: list[str] = []      # text operands read as numbers

    def emit(self, node: _Node) -> tuple[str, str]:
        """Spark SQL for ``node`` and the kind of its value (text, int, long, double…)."""
        if node.kind == "col":
            spark_type = self.types.get(node.text.lower())
            if spark_type is None:
                raise _Unsupported           # an unknown name: Spark will say so
            kind = _KINDS.get(spark_type, "decimal" if spark_type.startswith("decimal")
                              else "other")
            return _quote(node.text), kind
        if node.kind == "str":
            return node.text, "text"
        if node.kind == "num":
            return self._number(node.text)
        if node.kind == "neg":
            assert node.left is not None
            sql, kind = self.emit(node.left)
            if kind == "text":
                raise _Unsupported
            return f"(- {sql})", kind
        assert node.left is not None and node.right is not None
        left, right = self.emit(node.left), self.emit(node.right)
        return self._binary(node.text, left, right)

    def _number(self, text: str) -> tuple[str, str]:
        body = text.rstrip("lLdDfF")
        suffix = text[len(body):].lower()
        if suffix in ("d", "f") or any(c in body for c in ".eE"):
            if not suffix or suffix == "f":
                self.changed = True           # JEXL reads 1.5 as a double, Spark as a decimal
            return f"{body}D", "double"
        if suffix == "l" or int(body) > 2 ** 31 - 1:
            return f"{body}L", "long"
        return body, "int"

    def _binary(self, op: str, left: tuple[str, str], right: tuple[str, str]) -> tuple[str, str]:
        (ls, lk), (rs, rk) = left, right
        if "other" in (lk, rk) or "bool" in (lk, rk) or "decimal" in (lk, rk):
            return f"({ls} {op} {rs})", "other"     # Spark's own rules
        text = "text" in (lk, rk)
        if op == "+" and text:
            self.changed = True
            return f"concat({self._string(ls, lk)}, {self._string(rs, rk)})", "text"
        if text:
            self.changed = True
            self.numbers += [sql for sql, kind in (left, right) if kind == "text"]
            return self._text_arithmetic(op, left, right)
        whole = lk in ("int", "long") and rk in ("int", "long")
        kind = "double" if not whole else ("long" if "long" in (lk, rk) else "int")
        if whole and op == "/":
            self.changed = True
            return f"CAST(({ls} DIV {rs}) AS {'BIGINT' if kind == 'long' else 'INT'})", kind
        if whole and op == "%":
            self.changed = True
            return f"pmod({ls}, {rs})", kind
        return f"({ls} {op} {rs})", kind

    @staticmethod
    def _string(sql: str, kind: str) -> str:
        return sql if kind == "text" else f"CAST({sql} AS STRING)"

    @staticmethod
    def _is_float(sql: str, kind: str) -> str:
        if kind == "text":
            return f"({sql} RLIKE '[.eE]' AND {sql} RLIKE '{_FLOAT_TEXT}')"
        return "TRUE" if kind == "double" else "FALSE"

    @staticmethod
    def _double(sql: str, kind: str) -> str:
        if kind == "text":   # JEXL's toDouble: empty text is NaN
            return f"(CASE WHEN {sql} = '' THEN double('NaN') ELSE CAST({sql} AS DOUBLE) END)"
        return f"CAST({sql} AS DOUBLE)"

    @staticmethod
    def _whole(sql: str, kind: str) -> str:
        if kind == "text":   # JEXL's toBigInteger: empty text is 0
            return f"(CASE WHEN {sql} = '' THEN 0L ELSE CAST({sql} AS BIGINT) END)"
        return f"CAST({sql} AS BIGINT)"

    @staticmethod
    def _static_float(sql: str, kind: str) -> bool | None:
        """Whether JEXL reads this operand as a floating point number, when that is
        known without the data (a number column or quoted text); None for a text column."""
        if kind != "text":
            return kind == "double"
        if sql[:1] not in "'\"":
            return None
        value = sql[1:-1]
        return bool(re.search(r"[.eE]", value)) and re.fullmatch(
            r"[+-]?\d*(\.\d*)?([eE]?[+-]?\d*)?", value) is not None

    def _text_arithmetic(self, op: str, left: tuple[str, str],
                         right: tuple[str, str]) -> tuple[str, str]:
        floats = [self._static_float(*left), self._static_float(*right)]
        if None not in floats:      # quoted text: JEXL's choice is known now
            if any(floats):
                return f"({self._double(*left)} {op} {self._double(*right)})", "double"
            lw, rw = self._whole(*left), self._whole(*right)
            whole = {"/": f"({lw} DIV {rw})", "%": f"pmod({lw}, {rw})"}.get(
                op, f"({lw} {op} {rw})")
            kind = "long" if "long" in (left[1], right[1]) else "int"
            return f"CAST({whole} AS {'BIGINT' if kind == 'long' else 'INT'})", kind
        return self._text_per_row(op, left, right), "double"

    def _text_per_row(self, op: str, left: tuple[str, str], right: tuple[str, str]) -> str:
        as_double = f"({self._double(*left)} {op} {self._double(*right)})"
        lw, rw = self._whole(*left), self._whole(*right)
        whole = {"/": f"({lw} DIV {rw})", "%": f"pmod({lw}, {rw})"}.get(op, f"({lw} {op} {rw})")
        return (f"(CASE WHEN {self._is_float(*left)} OR {self._is_float(*right)} "
                f"THEN {as_double} ELSE CAST({whole} AS DOUBLE) END)")


@dataclass(frozen=True)
class Arithmetic:
    """A translated expression: its Spark SQL and the text operands JEXL reads as
    numbers (each a Spark SQL operand), which must hold numbers or the run stops."""

    sql: str
    text_operands: tuple[str, ...] = ()


def translate(expression: str, types: dict[str, str]) -> Arithmetic | None:
    """``expression`` rewritten with JEXL's arithmetic, or None when it is not plain
    arithmetic or already means in Spark what it means in JEXL. ``types`` maps the
    column names the expression may read to their Spark type names."""
    try:
        parser = _Parser(_tokens(expression))
        tree = parser.expression()
        if parser.peek() is not None or tree.kind != "bin":
            return None
        emitter = _Emitter(types)
        sql, _ = emitter.emit(tree)
    except (_Unsupported, RecursionError):
        return None
    if not emitter.changed:
        return None
    return Arithmetic(sql, tuple(dict.fromkeys(emitter.numbers)))
