"""The plan walk: which source columns each output column comes from, and how.

Works on the Python trees of `fll.spark.plan` only (no JVM). Every plan node
maps its output attributes (by exprId) to a `Lineage`: source column →
OpenLineage transformation tags. Expressions decide the tags (semantics §5):
copies are DIRECT/IDENTITY, row functions DIRECT/TRANSFORMATION, aggregates
DIRECT/AGGREGATION, CASE/IF predicates and COALESCE/NVL/NULLIF arguments
INDIRECT/CONDITIONAL, window keys INDIRECT/WINDOW; hashes and counts mask.
Filters, join conditions, grouping keys, DISTINCT and ORDER BY affect the
whole dataset and are collected apart (``dataset``). Tags compose along a
path with `fll.spark.lineage_model.compose`. What the walk cannot see (an
RDD leaf, a node it does not know) is never left as an empty lineage: it
flows as an `UNKNOWN` source that names the reason.

This module must never call Spark, and must stay linear in plan size: each
node is visited once and each expression once per use.
"""
from __future__ import annotations

from collections import ChainMap
from typing import Iterable, Mapping

from .datasets import RELATION_LEAVES, write_query
from .lineage_model import (AGGREGATION, CONDITIONAL, IDENTITY, MASKED_TRANSFORMATION,
                            TRANSFORMATION, UNKNOWN, WINDOW, Column, Lineage, PlanLineage, Source,
                            Tag, compose, indirect, unknown_reasons)
from .plan import Expr, PlanNode

__all__ = ["walk"]


def _under(ctx: frozenset[Tag], *local: Tag) -> frozenset[Tag]:
    return frozenset(compose(c, t) for c in ctx for t in local)


# Expression classes by how they pass values on (Catalyst short class names).
_TRANSPARENT = frozenset({
    "Alias", "Cast", "UpCast", "AnsiCast", "KnownNotNull", "KnownNullable",
    "KnownFloatingPointNormalized", "PromotePrecision", "SortOrder", "AssertNotNull",
})
_MASKING = frozenset({"Sha1", "Sha2", "Md5", "Crc32", "Murmur3Hash", "XxHash64", "HiveHash",
                      "Mask"})
_COUNTING = frozenset({"Count", "HyperLogLogPlusPlus", "CountIf", "CountMinSketchAgg"})
_RANKING = frozenset({"Rank", "DenseRank", "PercentRank", "CumeDist", "RowNumber", "NTile"})
_OFFSET = frozenset({"Lag", "Lead", "NthValue"})
_SUBQUERIES = frozenset({"ScalarSubquery", "Exists", "ListQuery", "LateralSubquery"})
_LEAF_OUTPUT_KEYS = ("output", "dataCols", "partitionCols")
_SEMI_JOINS = ("LeftSemi", "LeftAnti")
#: leaves whose rows the query makes itself: no input, and nothing unknown about it
_NO_DATASET = frozenset({"LocalRelation", "Range", "OneRowRelation"})
#: nodes that pass their child's columns on unchanged (some drop or reorder rows)
_PASS_THROUGH = frozenset({
    "SubqueryAlias", "View", "GlobalLimit", "LocalLimit", "Limit", "Offset", "Tail",
    "Repartition", "RepartitionByExpression", "RebalancePartitions", "ResolvedHint", "Sample",
    "Subquery", "ReturnAnswer", "WriteFiles", "CollectMetrics", "EventTimeWatermark",
    "UpdateEventTimeWatermarkColumn",
})

#: the grouping id column the analyzer adds to a ROLLUP / CUBE / GROUPING SETS Expand
_GROUPING_ID = "spark_grouping_id"
#: and the position it adds when a grouping set is repeated
_GROUPING_POS = "_gen_grouping_pos"

def _leaf_reason(node: PlanNode) -> str:
    if node.cls in ("LogicalRDD", "ExternalRDD"):
        if node.fields.get("fromCheckpoint"):
            return f"unknown: read from a checkpoint ({node.cls})"
        # createDataFrame(rdd), rdd.toDF(), and in classic PySpark also
        # createDataFrame(list): the plan does not say where an RDD's rows come from
        return f"unknown: built from an RDD ({node.cls})"
    return f"unknown: plan node {node.cls} is not understood"


def _merge(into: dict[Source, set[Tag]], lineage: Lineage) -> None:
    for src, tags in lineage.items():
        into.setdefault(src, set()).update(tags)


def _freeze(acc: Mapping[Source, Iterable[Tag]]) -> dict[Source, frozenset[Tag]]:
    return {src: frozenset(tags) for src, tags in acc.items()}


class _Walker:
    def __init__(self, leaves: Mapping[int, list[tuple[str, str]]]):
        self.leaves = leaves
        self.ctes: dict[object, tuple[list[Column], dict[Source, set[Tag]]]] = {}
        self.deps: dict[Source, set[Tag]] = {}
        #: a PIVOT's first aggregate (by id) → exprIds of its pivot columns (`_note_pivot`)
        self.pivot_keys: dict[int, set[int]] = {}
        #: set once an `UNKNOWN` source is made, so a plan without one is never scanned
        self.met_unknown = False

    # -- expressions ------------------------------------------------------
    def expr(self, e: Expr, ctx: frozenset[Tag], env: Mapping[int, Lineage],
             acc: dict[Source, set[Tag]]) -> None:
        cls = e.cls
        if cls == "AttributeReference":
            lineage = env.get(e.expr_id)  # type: ignore[arg-type]
            if lineage:
                for src, tags in lineage.items():
                    into = acc.setdefault(src, set())
                    for c in ctx:
                        for t in tags:
                            into.add(compose(c, t))
            return
        if cls in _TRANSPARENT:
            for ch in e.children:
                self.expr(ch, ctx, env, acc)
            return
        if cls == "OuterReference":
            # a leaf: the outer query's attribute it stands for sits in field `e`
            # (not a child), and is found in the outer plan's columns (env chains them)
            ref = e.embedded.get("e")
            for ch in [ref] if ref is not None else e.children:
                self.expr(ch, ctx, env, acc)
            return
        if cls == "AggregateExpression":
            self._aggregate(e, ctx, env, acc)
            return
        if cls == "WindowExpression":
            self._window(e, ctx, env, acc)
            return
        if cls == "CaseWhen":
            kids = e.children
            pairs = len(kids) // 2
            for i in range(pairs):
                self.expr(kids[2 * i], _under(ctx, CONDITIONAL), env, acc)
                self.expr(kids[2 * i + 1], _under(ctx, TRANSFORMATION), env, acc)
            if len(kids) % 2:
                self.expr(kids[-1], _under(ctx, TRANSFORMATION), env, acc)
            return
        if cls == "If":
            for role, tag in (("predicate", CONDITIONAL), ("trueValue", TRANSFORMATION),
                              ("falseValue", TRANSFORMATION)):
                part = e.child(role)
                if part is not None:
                    self.expr(part, _under(ctx, tag), env, acc)
            return
        if cls == "Coalesce":
            for ch in e.children:
                self.expr(ch, _under(ctx, TRANSFORMATION, CONDITIONAL), env, acc)
            return
        if cls in ("Nvl", "IfNull", "NullIf", "Nvl2"):
            self._replaced_conditional(e, ctx, env, acc)
            return
        if cls in _MASKING:
            for ch in e.children:
                self.expr(ch, _under(ctx, MASKED_TRANSFORMATION), env, acc)
            return
        if cls in _SUBQUERIES:
            # its children are the outer columns it is correlated on; each is also an
            # OuterReference inside the subquery's plan, met there in the role it has
            # (a WHERE predicate, a selected value), so they are not counted again
            self._subquery(e, ctx, env, acc)
            return
        for ch in e.children:
            self.expr(ch, _under(ctx, TRANSFORMATION), env, acc)

    def _aggregate(self, e: Expr, ctx: frozenset[Tag], env: Mapping[int, Lineage],
                   acc: dict[Source, set[Tag]]) -> None:
        fn = e.child("aggregateFunction") or (e.children[0] if e.children else None)
        if fn is not None and fn.cls == "PivotFirst":
            # PIVOT's second phase: the pivot column's value only decides which
            # output column a row's aggregate lands in (like CASE WHEN q = 'v'),
            # it is never part of the value: CONDITIONAL, not AGGREGATION
            for role, tag in (("pivotColumn", CONDITIONAL), ("valueColumn", AGGREGATION)):
                part = fn.child(role)
                if part is not None:
                    self.expr(part, _under(ctx, tag), env, acc)
        elif fn is not None:
            tag = ("DIRECT", "AGGREGATION", fn.cls in _COUNTING)
            for ch in fn.children:
                self.expr(ch, _under(ctx, tag), env, acc)
        # the filter is the second child; toJSON writes the Option in its field whole
        # rather than as a child index, so e.child("filter") never finds it
        cond = e.child("filter") or (e.children[1] if len(e.children) > 1
                                     else e.embedded.get("filter"))
        if cond is not None:
            # sum(x) FILTER (WHERE y > 0): OpenLineage's FILTER is "input used as a
            # filtering condition (e.g. WHERE clause)", and this is a WHERE over the
            # rows the aggregate reads; CONDITIONAL is for IF/CASE WHEN, which pick
            # between values. It goes on this field, not dataset[]: the clause
            # changes no row of the output, only this aggregate's inputs (as a
            # correlated scalar subquery's WHERE does for its field).
            self.expr(cond, _under(ctx, indirect("FILTER")), env, acc)

    def _replaced_conditional(self, e: Expr, ctx: frozenset[Tag], env: Mapping[int, Lineage],
                              acc: dict[Source, set[Tag]]) -> None:
        # These are RuntimeReplaceable: their only child is the rewritten form,
        # the arguments the user wrote sit in fields, so read those instead.
        both = _under(ctx, TRANSFORMATION, CONDITIONAL)
        roles: dict[str, frozenset[Tag]]
        if e.cls == "NullIf":   # CASE WHEN left = right THEN NULL ELSE left END
            roles = {"left": both, "right": _under(ctx, CONDITIONAL)}
        elif e.cls == "Nvl2":   # IF(expr1 IS NOT NULL, expr2, expr3)
            roles = {"expr1": _under(ctx, CONDITIONAL), "expr2": _under(ctx, TRANSFORMATION),
                     "expr3": _under(ctx, TRANSFORMATION)}
        else:                   # COALESCE(left, right)
            roles = {"left": both, "right": both}
        if not all(r in e.embedded for r in roles):
            for ch in e.children:
                self.expr(ch, _under(ctx, TRANSFORMATION), env, acc)
            return
        for role, tags in roles.items():
            self.expr(e.embedded[role], tags, env, acc)

    def _window(self, e: Expr, ctx: frozenset[Tag], env: Mapping[int, Lineage],
                acc: dict[Source, set[Tag]]) -> None:
        fn = e.child("windowFunction")
        spec = e.child("windowSpec")
        if fn is not None and fn.cls not in _RANKING:
            if fn.cls in _OFFSET:
                # LAG/LEAD copy a value from another row of the window: computed
                # per row from one input value, so TRANSFORMATION, not AGGREGATION
                for ch in fn.children:
                    self.expr(ch, _under(ctx, TRANSFORMATION), env, acc)
            else:
                self.expr(fn, ctx, env, acc)
        if spec is not None:
            keys = [spec.children[i] for role in ("partitionSpec", "orderSpec")
                    for i in spec.fields.get(role) or [] if isinstance(i, int)
                    and i < len(spec.children)]
            for k in keys:
                self.expr(k, _under(ctx, WINDOW), env, acc)

    def _subquery(self, e: Expr, ctx: frozenset[Tag], env: Mapping[int, Lineage],
                  acc: dict[Source, set[Tag]]) -> None:
        plan = e.plans.get("plan")
        if plan is None:
            return
        saved, self.deps = self.deps, {}
        try:
            cols = self.plan(plan, env)
            inner = self.deps
        finally:
            self.deps = saved
        # the subquery's own filters/joins shape only the value it yields here.
        # Whether EXISTS holds depends only on which rows pass the subquery's
        # WHERE (and the outer columns it is correlated on, reached through
        # that WHERE), never on what it selects: `EXISTS (SELECT * …)` must not
        # make every column of the table a dependency. IN (subquery) compares
        # the selected values, so those stay.
        values = [] if e.cls == "Exists" else [c.lineage for c in cols]
        for lineage in values + [_freeze(inner)]:
            for src, tags in lineage.items():
                into = acc.setdefault(src, set())
                for c in ctx:
                    for t in tags:
                        into.add(compose(c, t))

    def lineage_of(self, e: Expr, env: Mapping[int, Lineage],
                   ctx: frozenset[Tag] = frozenset({IDENTITY})) -> dict[Source, frozenset[Tag]]:
        acc: dict[Source, set[Tag]] = {}
        self.expr(e, ctx, env, acc)
        return _freeze(acc)

    def depend(self, exprs: Iterable[Expr], tag: Tag, env: Mapping[int, Lineage]) -> None:
        """Record ``exprs`` as whole-dataset dependencies of kind ``tag``."""
        ctx = frozenset({tag})
        for e in exprs:
            self.expr(e, ctx, env, self.deps)

    def named(self, e: Expr, env: Mapping[int, Lineage]) -> Column:
        # Fast path for the bulk of a wide plan: a column passed on as is or
        # renamed. IDENTITY is neutral under compose, so the input's lineage
        # is the output's, shared rather than rebuilt (lineages are never mutated).
        inner = e
        while inner.cls in _TRANSPARENT and len(inner.children) == 1:
            inner = inner.children[0]
        if inner.cls == "AttributeReference":
            return Column(e.expr_id, e.name, env.get(inner.expr_id) or {})  # type: ignore[arg-type]
        return Column(e.expr_id, e.name, self.lineage_of(e, env))

    # -- plans ------------------------------------------------------------
    def plan(self, node: PlanNode, outer: Mapping[int, Lineage] | None = None) -> list[Column]:
        cls = node.cls
        if cls == "WithCTE":
            body = node.child("plan") or node.children[-1]
            for d in node.children:
                if d is not body:
                    self._cte_def(d, outer)
            return self.plan(body, outer)
        if cls == "CTERelationDef":
            return self._cte_def(node, outer)
        if cls == "CTERelationRef":
            return self._cte_ref(node)
        if not node.children and cls not in ("Union",):
            query = write_query(node)
            if query is None:
                return self._leaf(node)

        query = write_query(node)
        if query is not None:
            return self._write(node, query, outer)
        if cls == "Aggregate":
            self._note_pivot(node)
        inputs = [self.plan(c, outer) for c in node.children]
        local: dict[int, Lineage] = {}
        for cols in inputs:
            for c in cols:
                if c.expr_id is not None:
                    local[c.expr_id] = c.lineage
        # ChainMap only reads maps after the first; typeshed asks for MutableMapping anyway
        env: Mapping[int, Lineage] = (
            ChainMap(local, outer) if outer else local)  # type: ignore[arg-type]
        first = inputs[0] if inputs else []

        if cls == "Project":
            return [self.named(e, env) for e in node.expr_list("projectList")]
        if cls == "Filter":
            self.depend(node.expr_list("condition"), indirect("FILTER"), env)
            return first
        if cls == "LateralJoin":
            return first + self._lateral(node, env)
        if cls == "Join":
            self.depend(node.expr_list("condition"), indirect("JOIN"), env)
            kind = str((node.fields.get("joinType") or {}).get("object", ""))
            if any(s in kind for s in _SEMI_JOINS):
                return first
            if "ExistenceJoin" in kind or "ExistenceJoin" in str(node.fields.get("joinType")):
                return first + [Column(None, "exists", {})]
            return first + (inputs[1] if len(inputs) > 1 else [])
        if cls == "Aggregate":
            keys = node.expr_list("groupingExpressions")
            pivot = self.pivot_keys.get(id(node)) if self.pivot_keys else None
            if pivot:
                # PIVOT's first phase also groups by the pivot column, but the pivot
                # output has one row per remaining key: that column is CONDITIONAL
                # on the pivoted fields (PivotFirst), not a grouping of the dataset
                keys = [k for k in keys if k.expr_id not in pivot]
            self.depend(keys, indirect("GROUP_BY"), env)
            return [self.named(e, env) for e in node.expr_list("aggregateExpressions")]
        if cls in ("Distinct",):
            self._depend_columns(first, indirect("GROUP_BY"))
            return first
        if cls == "Deduplicate":
            self.depend(node.expr_list("keys"), indirect("GROUP_BY"), env)
            return first
        if cls == "Sort":
            self.depend(node.expr_list("order"), indirect("SORT"), env)
            return first
        if cls == "Window":
            return first + [self.named(e, env) for e in node.expr_list("windowExpressions")]
        if cls == "Generate":
            return self._generate(node, first, env)
        if cls == "Union":
            return self._union(inputs)
        if cls in ("Intersect", "Except"):
            # a row of the left side is kept by comparing all its columns with the
            # right side's: both are filters. Without ALL they are set operations and
            # return distinct rows, so the output's columns also group it (as UNION
            # and SELECT DISTINCT do); INTERSECT ALL / EXCEPT ALL keep duplicates.
            for cols in inputs:
                self._depend_columns(cols, indirect("FILTER"))
            if not node.fields.get("isAll"):
                self._depend_columns(first, indirect("GROUP_BY"))
            return first
        if cls == "Expand":
            return self._expand(node, first, env)
        if cls == "DeduplicateWithinWatermark":
            self.depend(node.expr_list("keys"), indirect("GROUP_BY"), env)
            return first
        passed = [c for cols in inputs for c in cols]
        if cls in _PASS_THROUGH:
            return passed
        # a node this walk does not know: what it does to its columns is unknown, so
        # every column it outputs says so (its own output attributes if it makes new
        # ones, e.g. mapInPandas), rather than passing on lineage it may not have
        mark = self._unknown(f"unknown: plan node {cls} is not understood")
        made = node.expr_list("output")
        if made:
            return [Column(a.expr_id, a.name, mark) for a in made]
        return [Column(c.expr_id, c.name, {**c.lineage, **mark}) for c in passed]

    def _unknown(self, reason: str) -> dict[Source, frozenset[Tag]]:
        self.met_unknown = True
        return {(UNKNOWN, reason, ""): frozenset({IDENTITY})}

    def _leaf(self, node: PlanNode) -> list[Column]:
        attrs = [e for key in _LEAF_OUTPUT_KEYS for e in node.expr_list(key)]
        datasets = self.leaves.get(node.number)
        if datasets is None and node.cls not in _NO_DATASET and node.cls not in RELATION_LEAVES:
            # rows from somewhere the plan does not name: unknown lineage, not none
            mark = self._unknown(_leaf_reason(node))
            return [Column(a.expr_id, a.name, mark) for a in attrs]
        cols = []
        for a in attrs:
            lineage = {(ns, name, a.name): frozenset({IDENTITY}) for ns, name in datasets or []}
            cols.append(Column(a.expr_id, a.name, lineage))
        return cols

    def _lateral(self, node: PlanNode, env: Mapping[int, Lineage]) -> list[Column]:
        """The columns a LATERAL subquery adds to its left side's.

        The subquery runs once per left row and reads that row's columns through
        OuterReference, so it is walked with the left's columns in scope. Its own
        WHERE (the correlated predicate), joins and grouping decide which rows the
        join yields, and how often each left row repeats: like a derived table's in
        a join, they are dataset dependencies, not the added fields' alone.
        """
        right = node.exprs.get("right")
        sub = right.plans.get("plan") if isinstance(right, Expr) else None
        cols = self.plan(sub, env) if sub is not None else []
        cond = node.expr_list("condition")
        if cond:  # JOIN LATERAL (…) x ON …: the ON clause reads both sides
            both = ChainMap({c.expr_id: c.lineage for c in cols if c.expr_id is not None},
                            env)  # type: ignore[arg-type]
            self.depend(cond, indirect("JOIN"), both)
        return cols

    def _note_pivot(self, node: PlanNode) -> None:
        """Remember the pivot column of a PIVOT's second aggregate (``pivotfirst``).

        Called before the children are walked, so the first aggregate, its
        child, knows not to count that column as a grouping key.
        """
        first = node.children[0] if node.children else None
        if first is None or first.cls != "Aggregate":
            return
        for e in node.expr_list("aggregateExpressions"):
            while e.cls == "Alias" and e.children:
                e = e.children[0]
            if e.cls != "AggregateExpression":
                continue
            fn = e.child("aggregateFunction")
            col = fn.child("pivotColumn") if fn is not None and fn.cls == "PivotFirst" else None
            if col is not None and col.expr_id is not None:
                self.pivot_keys.setdefault(id(first), set()).add(col.expr_id)

    def _cte_def(self, node: PlanNode, outer: Mapping[int, Lineage] | None) -> list[Column]:
        saved, self.deps = self.deps, {}
        try:
            cols = self.plan(node.children[0], outer) if node.children else []
            self.ctes[node.fields.get("id")] = (cols, self.deps)
        finally:
            self.deps = saved
        return cols

    def _cte_ref(self, node: PlanNode) -> list[Column]:
        cols, deps = self.ctes.get(node.fields.get("cteId"), ([], {}))
        for src, tags in deps.items():
            self.deps.setdefault(src, set()).update(tags)
        attrs = node.expr_list("output")
        return [Column(a.expr_id, a.name, cols[i].lineage if i < len(cols) else {})
                for i, a in enumerate(attrs)]

    def _depend_columns(self, cols: list[Column], tag: Tag) -> None:
        for c in cols:
            for src, tags in c.lineage.items():
                into = self.deps.setdefault(src, set())
                for t in tags:
                    into.add(compose(tag, t))

    def _generate(self, node: PlanNode, first: list[Column],
                  env: Mapping[int, Lineage]) -> list[Column]:
        generator = node.exprs.get("generator")
        attrs = node.expr_list("generatorOutput")
        if isinstance(generator, Expr):
            per_column = self._generated(generator, len(attrs), env)
        else:
            per_column = [{}] * len(attrs)
        dropped = set(node.fields.get("unrequiredChildIndex") or [])
        kept = [c for i, c in enumerate(first) if i not in dropped]
        return kept + [Column(a.expr_id, a.name, lineage)
                       for a, lineage in zip(attrs, per_column, strict=True)]

    def _generated(self, gen: Expr, n: int, env: Mapping[int, Lineage]) -> list[Lineage]:
        """The lineage of each of a generator's ``n`` output columns, in order."""
        while gen.cls == "GeneratorOuter" and gen.children:
            gen = gen.children[0]
        kids = gen.children
        if gen.cls == "Stack" and len(kids) > 1 and n:
            # stack(rows, v1, v2, ...) lays the values out n to a row, so column j
            # copies values j, j + n, ...: an unpivot's value column is IDENTITY of each
            # source column, and its label column holds literals (no input), exactly as
            # the same unpivot written with UNPIVOT (an Expand) gets
            return [self._copies(kids[1 + j::n], env) for j in range(n)]
        if gen.cls in ("Explode", "PosExplode") and kids:
            # posexplode's position is the element's index: no value is copied into it
            pos: list[Lineage] = [{}] if gen.cls == "PosExplode" else []
            arg, rest = kids[0], n - len(pos)
            if arg.cls == "CreateArray" and rest == 1:  # explode(array(a, b)): a, b copied
                return pos + [self._copies(arg.children, env)]
            if arg.cls == "CreateMap" and rest == 2:    # explode(map(k1, v1, ...))
                return pos + [self._copies(arg.children[0::2], env),
                              self._copies(arg.children[1::2], env)]
            # an element of an array or map value: computed from it, as a[i] is
            return pos + [self.lineage_of(arg, env, frozenset({TRANSFORMATION}))] * rest
        if gen.cls == "Inline" and kids:
            arg = kids[0]
            if arg.cls == "CreateArray" and all(s.cls == "CreateNamedStruct"
                                                for s in arg.children):
                # inline(array(struct(a, b), struct(c, d))): column j copies the j-th
                # value of each struct (named_struct's children are name, value, ...)
                return [self._copies([s.children[2 * j + 1] for s in arg.children
                                      if 2 * j + 1 < len(s.children)], env) for j in range(n)]
            return [self.lineage_of(arg, env, frozenset({TRANSFORMATION}))] * n
        # json_tuple, UDTFs...: every output computed from every argument
        return [self.lineage_of(gen, env)] * n

    def _copies(self, exprs: Iterable[Expr], env: Mapping[int, Lineage]) -> Lineage:
        acc: dict[Source, set[Tag]] = {}
        for e in exprs:
            self.expr(e, frozenset({IDENTITY}), env, acc)
        return _freeze(acc)

    def _union(self, inputs: list[list[Column]]) -> list[Column]:
        if not inputs:
            return []
        out = []
        for i, c in enumerate(inputs[0]):
            acc: dict[Source, set[Tag]] = {}
            for cols in inputs:
                if i < len(cols):
                    _merge(acc, cols[i].lineage)
            out.append(Column(c.expr_id, c.name, _freeze(acc)))
        return out

    def _expand(self, node: PlanNode, first: list[Column],
                env: Mapping[int, Lineage]) -> list[Column]:
        attrs = node.expr_list("output")
        rows = node.exprs.get("projections")
        if rows is None:
            return self._grouping_expand(attrs, first)
        out = []
        for i, a in enumerate(attrs):
            acc: dict[Source, set[Tag]] = {}
            for row in rows:
                if isinstance(row, list) and i < len(row) and isinstance(row[i], Expr):
                    self.expr(row[i], frozenset({IDENTITY}), env, acc)
            out.append(Column(a.expr_id, a.name, _freeze(acc)))
        return out

    def _grouping_expand(self, attrs: list[Expr], first: list[Column]) -> list[Column]:
        """The columns of a ROLLUP / CUBE / GROUPING SETS ``Expand`` whose projections
        the plan JSON lacks.

        ``toJSON`` renders ``projections`` (rows of expressions) only when its rows
        are Scala lists; rows built from another sequence type (a ``Union``'s output
        is one) come out as null. The analyzer builds these nodes one way: the child
        projects its input's columns then one alias per grouping column, and each
        row of the Expand is the child's columns in order (a grouping alias replaced
        by null in the sets without it), then the grouping id, then, when a set is
        repeated, its position (literals both). So output column i copies the
        child's column i, and the one or two after them hold no input value. Any
        other shape is reported unknown, never left empty.
        """
        n = len(first)
        extra = [a.name for a in attrs[n:]]
        if (extra not in ([_GROUPING_ID], [_GROUPING_ID, _GROUPING_POS])
                or any(a.name != c.name for a, c in zip(attrs[:n], first, strict=True))):
            mark = self._unknown("unknown: an Expand whose projections the plan JSON omits")
            return [Column(a.expr_id, a.name, mark) for a in attrs]
        return ([Column(a.expr_id, a.name, c.lineage) for a, c in zip(attrs[:n], first, strict=True)]
                + [Column(a.expr_id, a.name, {}) for a in attrs[n:]])

    def _write(self, node: PlanNode, query: PlanNode,
               outer: Mapping[int, Lineage] | None) -> list[Column]:
        cols = self.plan(query, outer)
        names = _column_names(node.fields.get("outputColumnNames"))
        if names and len(names) == len(cols):
            return [Column(c.expr_id, n, c.lineage) for c, n in zip(cols, names, strict=True)]
        return cols


def _column_names(value: object) -> list[str] | None:
    # toJSON renders Seq[String] as one string "[a, b]"; a name holding ", "
    # makes it ambiguous, and then the query's own names are used instead.
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        inner = value[1:-1]
        return inner.split(", ") if inner else []
    return None


def walk(root: PlanNode, leaves: Mapping[int, list[tuple[str, str]]]) -> PlanLineage:
    """Lineage of every output column of ``root`` plus the whole-dataset dependencies.

    ``leaves`` maps a relation leaf's node number to the datasets it reads
    (`fll.spark.datasets.resolve_leaves`). Rows the query makes itself (``VALUES``,
    ``range``) contribute no source columns; any other leaf absent from it (an
    RDD) and any node the walk does not know make their columns' lineage unknown,
    with a reason (`UNKNOWN`, ``PlanLineage.unknown``).
    """
    walker = _Walker(leaves)
    cols = walker.plan(root)
    dataset = _freeze(walker.deps)
    unknown: list[str] = []
    if walker.met_unknown:  # only the reasons that reach the output count
        found = {r for c in cols for r in unknown_reasons(c.lineage)}
        unknown = sorted(found.union(unknown_reasons(dataset)))
    return PlanLineage(cols, dataset, unknown)
