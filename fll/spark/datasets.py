"""Which datasets a Spark plan reads and writes, named as OpenLineage names them.

A relation leaf's dataset is lost in the plan's JSON, so each leaf that names
one is fetched with a handful of direct calls (`resolve_leaves`); a write
command at the root gives its destination (`destination`). Works on the trees
and JVM handles of `fll.spark.plan`; never executes the plan or the statement.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from ..errors import FllError
from ..names import dataset_name
from .plan import AnalyzedPlan, JvmCalls, PlanNode, first_line

__all__ = ["RELATION_LEAVES", "WRITE_COMMANDS", "resolve_leaves", "write_query", "destination",
           "is_command"]


# ---------------------------------------------------------------------------
# Leaf relations → OpenLineage dataset names
# ---------------------------------------------------------------------------

#: leaf classes whose dataset is read from the JVM (the JSON drops it)
RELATION_LEAVES = frozenset({"LogicalRelation", "HiveTableRelation", "DataSourceV2Relation",
                             "DataSourceV2ScanRelation", "StreamingDataSourceV2Relation"})

_EXPR_ID = re.compile(r"#(\d+)")


def first_output_id(node: PlanNode) -> int | None:
    for key in ("output", "dataCols"):
        for e in node.expr_list(key):
            if e.expr_id is not None:
                return e.expr_id
    return None


def resolve_leaves(plan: AnalyzedPlan) -> dict[int, list[tuple[str, str]]]:
    """For each relation leaf (by node number), the datasets it reads.

    Per leaf: one ``apply(n)`` to reach it, one ``simpleString`` to check it
    is the node the JSON said (its first output exprId), then two to five
    calls to read the location.
    """
    calls = plan.calls
    out: dict[int, list[tuple[str, str]]] = {}
    by_table: dict[str, list[tuple[str, str]]] = {}
    for node in plan.nodes or list(plan.root.walk()):
        if node.cls not in RELATION_LEAVES:
            continue
        # a catalog table read several times (self-joins, a view used twice) is
        # named by its identifier in the JSON: resolve it once
        table_key = _catalog_key(node)
        if table_key is not None and table_key in by_table:
            out[node.number] = by_table[table_key]
            continue
        jleaf = calls(plan.jvm_plan, "apply", node.number)
        expected = first_output_id(node)
        if expected is not None:
            seen = _EXPR_ID.findall(calls(jleaf, "simpleString", 3))
            if str(expected) not in seen:
                raise FllError(
                    f"plan node {node.number} ({node.cls}) could not be matched with its JVM "
                    f"node: expected output #{expected}, found {seen[:3]}; please report "
                    f"this plan shape")
        out[node.number] = _leaf_datasets(node, jleaf, calls)
        if table_key is not None:
            by_table[table_key] = out[node.number]
    return out


def _catalog_key(node: PlanNode) -> str | None:
    meta = node.fields.get("catalogTable") or node.fields.get("tableMeta")
    ident = meta.get("identifier") if isinstance(meta, dict) else None
    if not isinstance(ident, dict):
        return None
    return json.dumps([node.cls, ident.get("catalog"), ident.get("database"),
                       ident.get("table")])


def _leaf_datasets(node: PlanNode, jleaf: Any, calls: JvmCalls) -> list[tuple[str, str]]:
    try:
        if node.cls == "LogicalRelation":
            if node.fields.get("catalogTable") is not None:
                table = calls(calls(jleaf, "catalogTable"), "get")
                return [dataset_name(str(calls(calls(table, "location"), "toString")))]
            relation = calls(jleaf, "relation")
            try:
                paths = calls(calls(calls(relation, "location"), "rootPaths"), "mkString", "\n")
            except Exception:
                # not a file relation (JDBC, custom source): name it by what it says it is
                return [("spark", str(calls(relation, "toString")))]
            return [dataset_name(p) for p in str(paths).split("\n") if p]
        if node.cls == "HiveTableRelation":
            meta = calls(jleaf, "tableMeta")
            return [dataset_name(str(calls(calls(meta, "location"), "toString")))]
        # DataSource V2: a table's location property if it has one, else its name
        table = calls(jleaf, "table")
        location = calls(calls(table, "properties"), "get", "location")
        if location:
            return [dataset_name(str(location))]
        return [("spark", str(calls(table, "name")))]
    except FllError:
        raise
    except Exception as exc:
        raise FllError(f"cannot read the dataset of plan node {node.number} ({node.cls}): "
                       f"{first_line(exc)}") from None


# ---------------------------------------------------------------------------
# Write commands → destination
# ---------------------------------------------------------------------------

def _loc_option(calls: JvmCalls, storage: Any) -> str | None:
    opt = calls(storage, "locationUri")
    if calls(opt, "isDefined"):
        return str(calls(calls(opt, "get"), "toString"))
    return None


def _ctas_location(plan: AnalyzedPlan, jcmd: Any) -> str:
    calls = plan.calls
    # the Hive command names its table "tableDesc", the data source one "table"
    table = calls(jcmd, "tableDesc" if plan.root.cls == "CreateHiveTableAsSelectCommand"
                  else "table")
    loc = _loc_option(calls, calls(table, "storage"))
    if loc is None:  # a managed table: where the catalog would put it
        catalog = calls(calls(plan.session, "sessionState"), "catalog")
        loc = str(calls(calls(catalog, "defaultTablePath", calls(table, "identifier")),
                        "toString"))
    return loc


def _v2_table(plan: AnalyzedPlan, table: Any) -> str | tuple[str, str]:
    calls = plan.calls
    location = calls(calls(table, "properties"), "get", "location")
    if location:
        return str(location)
    return ("spark", str(calls(table, "name")))


def _v2_write(plan: AnalyzedPlan, jcmd: Any) -> str | tuple[str, str]:
    relation = plan.calls(jcmd, "table")
    try:
        return _v2_table(plan, plan.calls(relation, "table"))
    except Exception:
        return ("spark", str(plan.calls(relation, "name")))


def _v2_create(plan: AnalyzedPlan, jcmd: Any) -> str | tuple[str, str]:
    # analyzed only, so the table does not exist yet: named as the statement names it
    name = plan.calls(jcmd, "name")
    return ("spark", str(plan.calls(plan.calls(name, "identifier"), "toString")))


_DESTINATIONS: dict[str, Callable[[AnalyzedPlan, Any], str | tuple[str, str]]] = {
    "InsertIntoHadoopFsRelationCommand":
        lambda p, c: str(p.calls(p.calls(c, "outputPath"), "toString")),
    "CreateDataSourceTableAsSelectCommand": _ctas_location,
    "InsertIntoDataSourceDirCommand":
        lambda p, c: _loc_option(p.calls, p.calls(c, "storage")) or "",
    "InsertIntoHiveDirCommand":
        lambda p, c: _loc_option(p.calls, p.calls(c, "storage")) or "",
    "InsertIntoHiveTable":
        lambda p, c: str(p.calls(p.calls(p.calls(c, "table"), "location"), "toString")),
    "CreateHiveTableAsSelectCommand": _ctas_location,
    # DataSource V2 writes (DataFrameWriterV2, V2 catalogs)
    "AppendData": _v2_write,
    "OverwriteByExpression": _v2_write,
    "OverwritePartitionsDynamic": _v2_write,
    "CreateTableAsSelect": _v2_create,
    "ReplaceTableAsSelect": _v2_create,
}

WRITE_COMMANDS = frozenset(_DESTINATIONS)


def write_query(root: PlanNode) -> PlanNode | None:
    """The query a write command writes (a child or a nested plan), None for a query."""
    if root.cls not in WRITE_COMMANDS:
        return None
    return root.child("query") or root.plans.get("query") or (
        root.children[0] if root.children else None)


def destination(plan: AnalyzedPlan) -> tuple[str, str]:
    """(namespace, name) a write command at the root writes to."""
    getter = _DESTINATIONS[plan.root.cls]
    try:
        location = getter(plan, plan.jvm_plan)
    except Exception as exc:
        raise FllError(f"cannot read the destination of {plan.root.cls}: "
                       f"{first_line(exc)}") from None
    if isinstance(location, tuple):
        return location
    if not location:
        raise FllError(f"{plan.root.cls} has no location to write to")
    return dataset_name(location)


def is_command(plan: AnalyzedPlan) -> bool:
    """True when the root is a Spark command (DDL, SET...), which has no column lineage."""
    root = plan.root
    if root.cls in WRITE_COMMANDS:
        return True
    return (".command." in root.qualified or root.cls.endswith("Command")
            or root.cls in _V2_COMMANDS)


_V2_COMMANDS = frozenset({
    "CreateTable", "CreateTableAsSelect", "ReplaceTable", "ReplaceTableAsSelect", "DropTable",
    "AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic", "SetCatalogAndNamespace",
    "CreateNamespace", "DropNamespace", "AlterTable", "RenameTable", "DropView", "CreateView",
    "DeleteFromTable", "UpdateTable", "MergeIntoTable", "TruncateTable", "CommandResult",
    "ShowTables", "ShowNamespaces", "DescribeRelation", "SetCommand", "ResetCommand",
})
