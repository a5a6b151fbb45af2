"""Reach a Spark logical plan from Python and turn its ``toJSON()`` into Python trees.

The whole analyzed plan crosses the py4j bridge once, as the JSON that
``LogicalPlan.toJSON()`` returns (a pre-order list of nodes; expressions are
nested pre-order lists; subquery and command plans are nested inside the
fields that hold them). That JSON is lossy for leaf relations (the
``relation`` of a ``LogicalRelation`` is null), so each leaf that names a
dataset is fetched with a handful of direct calls: ``plan.apply(n)`` jumps to
the n-th node of Spark's own numbering (the one ``numberedTreeString``
prints), which this module reproduces from the JSON, so no call is spent
walking the JVM tree.

This module must never make one JVM call per plan node or per column, and
must never execute the plan or the statement it analyzes.
"""
from __future__ import annotations

import gc
import json
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import BadRequest, FllError

__all__ = ["Expr", "PlanNode", "JvmCalls", "AnalyzedPlan", "analyze", "parse_plan_json",
           "parse_plan"]


# ---------------------------------------------------------------------------
# Python trees
# ---------------------------------------------------------------------------

@dataclass(eq=False, slots=True)
class Expr:
    """One Catalyst expression: short class name, its JSON fields, its children in order."""

    cls: str
    fields: dict[str, Any]
    children: list["Expr"]
    #: plans embedded in this expression's fields (a subquery's ``plan``)
    plans: dict[str, "PlanNode"] = field(default_factory=dict)
    #: expressions embedded in fields that are not children (``NullIf.left`` ...)
    embedded: dict[str, "Expr"] = field(default_factory=dict)

    @property
    def expr_id(self) -> int | None:
        ref = self.fields.get("exprId")
        return ref.get("id") if isinstance(ref, dict) else None

    @property
    def name(self) -> str:
        return self.fields.get("name", "")

    def child(self, role: str) -> "Expr | None":
        """The child a field names by index (``"child": 0``, ``"left": 1``...)."""
        idx = self.fields.get(role)
        if isinstance(idx, int) and 0 <= idx < len(self.children):
            return self.children[idx]
        return None

    def walk(self) -> Iterator["Expr"]:
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children))


@dataclass(eq=False, slots=True)
class PlanNode:
    """One logical-plan node.

    ``number`` is the node's position in Spark's ``numberedTreeString``
    order (the node, then the plans nested in its fields, then its
    children), so ``jvm_plan.apply(number)`` returns this very node.
    """

    cls: str
    qualified: str
    fields: dict[str, Any]
    children: list["PlanNode"]
    number: int
    #: expression-valued fields, parsed: one Expr, or a list of Expr
    exprs: dict[str, Any] = field(default_factory=dict)
    #: plans embedded in fields (a command's ``query``)
    plans: dict[str, "PlanNode"] = field(default_factory=dict)

    def child(self, role: str) -> "PlanNode | None":
        idx = self.fields.get(role)
        if isinstance(idx, int) and 0 <= idx < len(self.children):
            return self.children[idx]
        return None

    def expr_list(self, name: str) -> list[Expr]:
        value = self.exprs.get(name)
        if value is None:
            return []
        if isinstance(value, Expr):
            return [value]
        return [e for e in _flatten(value) if isinstance(e, Expr)]

    def walk(self) -> Iterator["PlanNode"]:
        """Every node in numbering order, nested plans included."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            nested = list(_nested_plans(node))
            stack.extend(reversed(nested + node.children))


def _flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


def _nested_plans(node: PlanNode) -> Iterator[PlanNode]:
    # Same order as Spark's innerChildren: plans held by fields, then
    # subqueries found walking the expressions in field order.
    for key in node.fields:
        if key in node.plans:
            yield node.plans[key]
        elif key in node.exprs:
            for e in _flatten(node.exprs[key]):
                if isinstance(e, Expr):
                    yield from _expr_plans(e)


def _expr_plans(expr: Expr) -> Iterator[PlanNode]:
    for e in expr.walk():
        yield from e.plans.values()


# ---------------------------------------------------------------------------
# JSON → trees
# ---------------------------------------------------------------------------

def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _is_expression_class(qualified: str) -> bool:
    return ".expressions." in qualified or ".execution.aggregate." in qualified


def _is_tree(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and isinstance(value[0], dict)
            and "class" in value[0] and "num-children" in value[0])


#: expression classes whose fields never hold a tree: skip the field scan (the
#: bulk of a wide plan is attribute references)
_FLAT_EXPRESSIONS = frozenset({
    "org.apache.spark.sql.catalyst.expressions.AttributeReference",
    "org.apache.spark.sql.catalyst.expressions.Literal",
})


#: (command, field) whose plan Spark keeps out of ``innerChildren``: a V2 write's
#: destination relation is a plain field, not a numbered node, and ``analyzedQuery``
#: a copy of the query kept for the write's own use
_UNNUMBERED_PLANS = frozenset((cmd, key) for cmd in ("AppendData", "OverwriteByExpression",
                                                     "OverwritePartitionsDynamic")
                              for key in ("table", "analyzedQuery"))


class _Parser:
    """Turns the pre-order JSON lists into trees and numbers plan nodes like Spark does.

    ``nodes`` lists every numbered plan node in numbering order, so callers
    never re-walk the tree to find leaves or count nodes.
    """

    def __init__(self) -> None:
        self.counter = 0
        self.nodes: list[PlanNode] = []

    def plan(self, nodes: list[dict], pos: int = 0) -> tuple[PlanNode, int]:
        raw = nodes[pos]
        qualified = raw["class"]
        node = PlanNode(_short(qualified), qualified, raw, [], self.counter)
        self.counter += 1
        self.nodes.append(node)
        # fields first: the plans they hold are numbered before the children
        for key, value in raw.items():
            if type(value) is list and value and key != "class":
                self._field(node, key, value)
        pos += 1
        for _ in range(raw["num-children"]):
            child, pos = self.plan(nodes, pos)
            node.children.append(child)
        return node, pos

    def _field(self, node: PlanNode, key: str, value: list) -> None:
        first = value[0]
        if type(first) is dict:
            if "class" in first and "num-children" in first:
                if _is_expression_class(first["class"]):
                    node.exprs[key] = self.expr(value)
                elif (node.cls, key) in _UNNUMBERED_PLANS:
                    # not one of Spark's inner children: apply(n) never reaches it,
                    # so it must not take a number (or shift every later node's)
                    node.plans[key] = _Parser().plan(value)[0]
                else:
                    node.plans[key] = self.plan(value)[0]
        elif type(first) is list:
            parsed = self._expr_lists(value)
            if parsed is not None:
                node.exprs[key] = parsed

    def _expr_lists(self, value: list) -> list | None:
        out: list = []
        for v in value:
            if type(v) is not list:
                return None
            if not v:
                out.append([])
                continue
            head = v[0]
            if type(head) is dict:
                if "class" in head and "num-children" in head and \
                        _is_expression_class(head["class"]):
                    out.append(self.expr(v))
                else:
                    return None
            elif type(head) is list:
                inner = self._expr_lists(v)
                if inner is None:
                    return None
                out.append(inner)
            else:
                return None
        return out

    def expr(self, nodes: list[dict]) -> Expr:
        expr, _ = self._expr(nodes, 0)
        return expr

    def _expr(self, nodes: list[dict], pos: int) -> tuple[Expr, int]:
        raw = nodes[pos]
        qualified = raw["class"]
        expr = Expr(qualified[qualified.rfind(".") + 1:], raw, [])
        if qualified not in _FLAT_EXPRESSIONS:
            for key, value in raw.items():
                if type(value) is list and value and type(value[0]) is dict \
                        and "class" in value[0] and "num-children" in value[0]:
                    if _is_expression_class(value[0]["class"]):
                        # not a child: Spark does not number plans found here, so
                        # neither may we (a throwaway parser keeps the count)
                        expr.embedded[key] = _Parser().expr(value)
                    else:
                        expr.plans[key] = self.plan(value)[0]
        pos += 1
        n = raw["num-children"]
        if n:
            children = expr.children
            for _ in range(n):
                child, pos = self._expr(nodes, pos)
                children.append(child)
        return expr, pos


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a plan's trees are built and walked.

    Building tens of thousands of live objects triggers collections that
    find nothing to free (everything built is still referenced) and cost
    10-30% of the parse; reference counting still frees as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_plan(text: str | bytes | list) -> tuple[PlanNode, list[PlanNode]]:
    """Parse ``LogicalPlan.toJSON()`` output: the root and every node in numbering order."""
    nodes = json.loads(text) if isinstance(text, (str, bytes)) else text
    if not _is_tree(nodes):
        raise FllError("the plan JSON is not a list of plan nodes")
    parser = _Parser()
    root = parser.plan(nodes)[0]
    return root, parser.nodes


def parse_plan_json(text: str | bytes | list) -> PlanNode:
    """Parse the output of ``LogicalPlan.toJSON()`` into a `PlanNode` tree."""
    return parse_plan(text)[0]


# ---------------------------------------------------------------------------
# JVM access
# ---------------------------------------------------------------------------

class JvmCalls:
    """Counts the py4j round trips made while capturing one plan."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, obj: Any, method: str, *args: Any) -> Any:
        self.count += 1
        return getattr(obj, method)(*args)


@dataclass
class AnalyzedPlan:
    """One analyzed plan: its tree, the JVM handle it came from, and what it cost."""

    root: PlanNode
    jvm_plan: Any
    session: Any  # the JVM SparkSession
    calls: JvmCalls
    tojson_seconds: float
    tojson_chars: int
    #: every plan node in Spark's numbering order
    nodes: list[PlanNode] = field(default_factory=list)
    parse_seconds: float = 0.0


_CONNECT_MESSAGE = (
    "column lineage needs a classic SparkSession: {what} is a Spark Connect object, which "
    "has no JVM plan to read (no _jdf); run the job with a classic session "
    "(SparkSession.builder.master(...)) to capture lineage")


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise BadRequest("no active SparkSession: pass spark=... to capture lineage of a SQL "
                         "statement", parameter="spark")
    return session


def _jvm_session(spark: Any) -> Any:
    jss = getattr(spark, "_jsparkSession", None)
    if jss is None:
        raise FllError(_CONNECT_MESSAGE.format(what=f"the session {type(spark).__name__}"))
    return jss


def analyze(target: Any, spark: Any = None) -> AnalyzedPlan:
    """The analyzed plan of a DataFrame or SQL text, without executing anything.

    SQL goes through the session's parser and analyzer with command
    execution skipped, so ``INSERT``/``CTAS`` statements are analyzed, never
    run. Costs a few JVM calls plus one ``toJSON()``.
    """
    calls = JvmCalls()
    if isinstance(target, str):
        session = spark if spark is not None else _active_session()
        jss = _jvm_session(session)
        state = calls(jss, "sessionState")
        try:
            parsed = calls(calls(state, "sqlParser"), "parsePlan", target)
            # a JavaClass built by name: walking _jvm.org.apache... would spend
            # one round trip per package segment
            from py4j.java_gateway import JavaClass

            modes = JavaClass("org.apache.spark.sql.execution.CommandExecutionMode",
                              session._jvm._gateway_client)
            mode = calls(modes, "SKIP")
            qe = calls(state, "executePlan", parsed, mode)
            jplan = calls(qe, "analyzed")
        except Exception as exc:  # py4j / AnalysisException: say what failed, not how
            raise BadRequest(f"cannot analyze the SQL statement: {first_line(exc)}",
                             parameter="target") from None
    else:
        if not hasattr(target, "sparkSession") or not hasattr(target, "schema"):
            raise BadRequest(
                f"target must be a DataFrame or a SQL string, got {type(target).__name__}",
                parameter="target")
        jdf = getattr(target, "_jdf", None)
        if jdf is None:
            raise FllError(_CONNECT_MESSAGE.format(what=f"the DataFrame {type(target).__name__}"))
        jss = _jvm_session(target.sparkSession)
        try:
            jplan = calls(calls(jdf, "queryExecution"), "analyzed")
        except Exception as exc:
            raise BadRequest(f"cannot analyze the DataFrame: {first_line(exc)}",
                             parameter="target") from None
    start = time.perf_counter()
    text = _plan_json(jplan, calls)
    tojson = time.perf_counter() - start
    with gc_paused():
        root, nodes = parse_plan(text)
    parsed = time.perf_counter() - start - tojson
    return AnalyzedPlan(root, jplan, jss, calls, tojson, len(text), nodes, parsed)


#: per py4j gateway client: the JVM's json4s ObjectMapper, or False when the
#: file hand-over does not work there (a JVM on another host)
_MAPPERS: dict[int, Any] = {}


def _plan_json(jplan: Any, calls: JvmCalls) -> str | bytes:
    """The plan's JSON, as ``toJSON()`` gives it, by the fastest way that works.

    A string of more than a few kB returned over py4j stalls on the socket
    (~40 ms, Nagle vs delayed ACK), more than Spark spends building it. So
    the JVM writes ``jsonValue`` (the tree ``toJSON`` renders) with its
    json4s mapper to a private temporary file that Python reads back; the
    JVM of a classic session runs on this host. Should that fail (a remote
    JVM), ``toJSON()`` is used from then on.
    """
    client = jplan._gateway_client
    mapper = _MAPPERS.get(id(client))
    if mapper is None:
        try:
            from py4j.java_gateway import JavaClass

            module = JavaClass("org.json4s.jackson.JsonMethods$", client)
            mapper = getattr(module, "MODULE$").mapper()  # once per gateway
        except Exception:
            mapper = False
        _MAPPERS[id(client)] = mapper
    if mapper is not False:
        fd, path = tempfile.mkstemp(prefix="fll-plan-", suffix=".json")
        os.close(fd)
        try:
            from py4j.java_gateway import JavaClass

            jfile = JavaClass("java.io.File", client)(path)
            calls.count += 1  # the File constructor above
            calls(mapper, "writeValue", jfile, calls(jplan, "jsonValue"))
            with open(path, "rb") as fh:
                data = fh.read()
            if data:
                return data
        except Exception:
            pass
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        _MAPPERS[id(client)] = False
    return calls(jplan, "toJSON")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
