"""JSON and XML document directives: parse-as-json, json-path, parse-xml-to-json,
xpath and xpath-array.

parse-as-json flattens a JSON object into columns, learning its keys from one
small sample (the one Spark action here). parse-xml-to-json follows Wrangler's
XmlToJson (org.json's XML conversion, then parse-as-json's flattening) on Spark's
own ``from_xml``. json-path follows Wrangler's JsonPath; the XPath pair, which
Wrangler documents but no longer ships, follows its documentation. Paths are
checked before anything runs.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from .. import labels as L
from ..context import StepContext, quote
from ..jsonpath import JsonPathError, compile_path, evaluate, needs_python
from ..parser import Args
from ..registry import Outcome, register_directive
from ..support import (as_text, error_rows, fail_when, java_message,
                       put, require_string)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


_JSON_SAMPLE = 1000


def _json_type(value) -> str:
    """The Spark type of one JSON leaf; objects and arrays stay JSON text, as Wrangler
    keeps them as JsonObject / JsonArray."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    return "string"


def _merge_type(old: str | None, new: str) -> str:
    if old is None or old == new:
        return new
    if {old, new} == {"bigint", "double"}:
        return "double"
    return "string"


def _json_leaves(doc: dict, depth: int, leaves: dict[tuple[str, ...], str | None],
                 path: tuple[str, ...] = ()) -> None:
    """Wrangler's jsonFlatten: keys in document order, objects opened down to ``depth``."""
    for key, value in doc.items():
        here = path + (key,)
        if isinstance(value, dict) and len(here) < depth:
            _json_leaves(value, depth, leaves, here)
        elif value is None:
            leaves.setdefault(here, None)
        else:
            leaves[here] = _merge_type(leaves.get(here), _json_type(value))


class _JsonNode:
    """One key of the sampled JSON: its leaf type (a value that is no object to open, in
    some row) and the keys below it (an object to open, in some row)."""

    def __init__(self) -> None:
        self.leaf: str | None = None
        self.is_leaf = False
        self.children: dict[str, "_JsonNode"] = {}

    @property
    def mixed(self) -> bool:
        """An object in some rows and another value (an array, text…) in others."""
        return self.is_leaf and bool(self.children)


def _json_tree(leaves: dict[tuple[str, ...], str | None]) -> dict[str, _JsonNode]:
    tree: dict[str, _JsonNode] = {}
    for path, kind in leaves.items():
        nodes = tree
        node = None
        for part in path:
            node = nodes.setdefault(part, _JsonNode())
            nodes = node.children
        assert node is not None
        node.is_leaf, node.leaf = True, kind or "string"
    return tree


def _json_schema(tree: dict[str, _JsonNode]) -> str:
    def kind(node: _JsonNode) -> str:
        if node.mixed:          # read as its JSON text, opened per row (`_json_values`)
            return "string"
        if node.children:
            return f"STRUCT<{fields(node.children)}>"
        return node.leaf or "string"

    def fields(nodes: dict[str, _JsonNode]) -> str:
        return ", ".join(f"{quote(k)}: {kind(v)}" for k, v in nodes.items())
    return f"STRUCT<{fields(tree)}>"


def _json_values(parsed: "Column", tree: dict[str, _JsonNode],
                 path: tuple[str, ...] = ()) -> dict[tuple[str, ...], "Column"]:
    """Each leaf path's value. A key that is an object in some rows and another value in
    others (a repeated XML element, an array) gives, per row, the value as JSON text
    where it is no object, and its keys' columns where it is one, as Wrangler's
    jsonFlatten does row by row."""
    out: dict[tuple[str, ...], "Column"] = {}
    for key, node in tree.items():
        here, value = path + (key,), parsed.getField(key)
        if node.mixed:
            is_object = F.ltrim(value).startswith("{")
            leaf = F.when(~is_object, value)
            out[here] = leaf if node.leaf == "string" else leaf.cast(node.leaf or "string")
            opened = F.from_json(F.when(is_object, value), _json_schema(node.children))
            out.update(_json_values(opened, node.children, here))
        elif node.children:
            out.update(_json_values(value, node.children, here))
        else:
            out[here] = value
    return out


@register_directive("parse-as-json <column:column> [<depth:int>]")
def parse_as_json(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Parse JSON text per row as Wrangler does: an object becomes ``column_key`` columns
    in document key order, nested objects opened down to ``depth`` (default: all the
    way) and deeper objects and arrays kept as JSON text; the source column is removed
    and rows whose value is null or a JSON primitive are dropped, as in Wrangler's code.
    A column of arrays becomes one row per element instead (the column holds the
    element; an empty array keeps its row with null).

    The keys and their types are data dependent: one job reads the first 1000 non-null
    values (keys seen only later are not found). A value that is not JSON (Spark's
    strict parser; Wrangler's Gson is lenient and also takes unquoted names) goes to the
    recipe's error output with ``errCode`` 1, as Wrangler's error row. Labels: READ
    column (read into the new columns, then gone), ADD all columns minus <the columns
    before>; DROP column when no key was found; arrays: MODIFY column.
    """
    step.require(df, [a.column])
    src = as_text(df, a.column, step.col(a.column))
    # Text that is not JSON is an error row, as Wrangler's ErrorRowException: it goes to
    # the recipe's error output (the stage's errors port), never a row of nulls.
    bad = src.isNotNull() & F.try_parse_json(src).isNull()
    kept, to_error = error_rows(step, df.where(src.isNotNull()), bad, F.concat(
        F.lit(f"malformed JSON in column '{a.column}': "), src), 1)
    return flatten_json(step, kept, a.column, src, a.depth, to_error)


def flatten_json(step: StepContext, df: "DataFrame", column: str, src: "Column",
                 depth: int | None, extra: dict | None = None) -> Outcome:
    """Replace ``column`` by the keys of the JSON text ``src`` (parse-as-json's
    flattening, shared with parse-xml-to-json); one job samples the keys."""
    extra = extra or {}
    depth = 2 ** 31 - 1 if depth is None else depth
    if depth < 1:
        raise step.error("depth must be at least 1")
    step.action()
    sample = [r[0] for r in df.select(src).where(src.isNotNull()).limit(_JSON_SAMPLE).collect()]
    docs = []
    for text in sample:
        try:
            docs.append(json.loads(text))
        except ValueError:
            continue
    # Wrangler adds a JSON primitive's row to no output (the row is dropped)
    kept = df.where(src.rlike(r"^\s*[\[{]"))
    containers = [d for d in docs if isinstance(d, (list, dict))]
    if containers and all(isinstance(d, list) for d in containers):
        # an empty array keeps its row, without the column's value
        value = F.explode_outer(F.from_json(src, "ARRAY<STRING>"))
        return Outcome(put(kept, column, value), L.modify(column),
                       note="one job found arrays: one row per element", **extra)
    leaves: dict[tuple[str, ...], str | None] = {}
    for d in docs:
        if isinstance(d, dict):
            _json_leaves(d, depth, leaves)
    names = {path: "_".join((column,) + path) for path in leaves}
    before = [c for c in df.columns if c != column]
    for n in names.values():
        if n in before:
            raise step.error(f"parsed column {n!r} already exists")
    if len(set(names.values())) != len(names):
        raise step.error("two JSON keys give the same column name")
    tree = _json_tree(leaves)
    values = _json_values(F.from_json(src, _json_schema(tree)), tree) if leaves else {}
    new: list[tuple[str, "Column"]] = [(name, values[path]) for path, name in names.items()]
    out = kept.select([F.col(quote(c)) for c in before] + [v.alias(n) for n, v in new])
    # the source is READ into the new columns and gone after the step (Wrangler removes
    # it); only when no key was found is it simply dropped
    labels = L.read(column) + L.add(L.all_columns_minus(*before)) if new else L.drop(column)
    return Outcome(out, labels, note=f"one job found {len(leaves)} keys", **extra)


# -- json-path -----------------------------------------------------------------

def _json_path_check(path: str) -> str | None:
    if not path.startswith("$"):
        return "a JSON path starts with $"
    if needs_python(path):
        try:
            compile_path(path)
        except JsonPathError as exc:
            return str(exc)
    return None


def _json_path_udf(path: str):
    read = compile_path(path)
    return F.udf(lambda text: evaluate(read, text), StringType(), useArrow=False)


@register_directive("json-path <source:column> <destination:column> <path:text>",
                    checks={"path": _json_path_check})
def json_path(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Read the value at a JSON path (``$.a.b[0]``, ``$.a[*].b``) of the JSON text in
    ``source`` into ``destination`` (set or appended); no match gives null.

    Wrangler uses Jayway JsonPath and gives typed values; fll gives text (objects and
    arrays as JSON text). Plain paths run as Spark's get_json_object; deep scans
    (``$..author``), filters (``[?(@.price < 10 && @.isbn)]``, ``=~ /re/i``, ``in``,
    ``$['root']`` references), slices, unions and tail functions (``length()``,
    ``min()``…) run as one Python UDF reading them as Jayway does (`fll.directives.
    jsonpath`): such a path always gives the JSON array of its matches. As Wrangler's
    code does, a row whose source is null is dropped.
    Labels: READ source, ADD destination (MODIFY when they are the same column).
    """
    step.require(df, [a.source])
    kind = df.schema[a.source].dataType.typeName()
    src = step.col(a.source)
    text = src if kind == "string" else F.to_json(src) if kind in ("struct", "array", "map") \
        else None
    if text is None:
        raise step.error(f"column {a.source!r} has type {kind}; it should be JSON text, "
                         f"an object or an array")
    kept = df.where(src.isNotNull())
    value = _json_path_udf(a.path)(text) if needs_python(a.path) \
        else F.get_json_object(text, a.path)
    if a.source == a.destination:
        return Outcome(put(kept, a.destination, value), L.modify(a.source))
    return Outcome(put(kept, a.destination, value), L.read(a.source) + L.add(a.destination))


# -- parse-xml-to-json ---------------------------------------------------------------

_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _xml_value(text: str, keep_strings: bool):
    """org.json's XML.stringToValue: true/false, null, numbers; the rest stays text."""
    if keep_strings or text == "":
        return text
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return text


def _accumulate(obj: dict, key: str, value) -> None:
    # a repeated key becomes an array of its values, as org.json's accumulate
    if key not in obj:
        obj[key] = value
    elif isinstance(obj[key], list):
        obj[key].append(value)
    else:
        obj[key] = [obj[key], value]


def _element(node, keep_strings: bool):
    obj: dict = {}
    for name, value in node.attributes.items():
        _accumulate(obj, name, _xml_value(value, keep_strings))
    for child in node.childNodes:
        if child.nodeType == child.ELEMENT_NODE:
            _accumulate(obj, child.tagName, _element(child, keep_strings))
        elif child.nodeType in (child.TEXT_NODE, child.CDATA_SECTION_NODE):
            text = child.data.strip()
            if text:
                _accumulate(obj, "content", _xml_value(text, keep_strings))
    if not obj:
        return ""
    if list(obj) == ["content"] and not isinstance(obj["content"], list):
        return obj["content"]
    return obj


def xml_to_json(text: str | None, keep_strings: bool = False) -> str | None:
    """An XML document as the JSON text org.json's XML.toJSONObject gives (keys in
    document order); None when the text is not well-formed XML."""
    import json
    from xml.dom import minidom
    from xml.parsers.expat import ExpatError

    if text is None:
        return None
    try:
        root = minidom.parseString(text.encode("utf-8")).documentElement
    except (ExpatError, ValueError):
        return None
    if root is None:
        return None
    return json.dumps({root.tagName: _element(root, keep_strings)})


def _xml_udf(keep_strings: bool):
    return F.udf(lambda text: xml_to_json(text, keep_strings), StringType(), useArrow=False)


@register_directive("parse-xml-to-json <column:column> [<depth:int>] [<keep_strings:bool>]")
def parse_xml_to_json(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """Convert an XML document to JSON as Wrangler does (org.json: the root element is
    the first key, attributes and child elements are keys, text beside attributes is
    ``content``, a repeated element is an array, an empty one is ``""``, values become
    numbers and booleans unless ``keep_strings``), then flatten it as parse-as-json
    does: ``column_root_child`` columns opened down to ``depth``, the source removed.
    Text that is not well-formed XML, or a null value, stops the run with the recipe
    line, as in Wrangler.

    Spark's from_xml drops the root element and names attributes and text its own
    way, so the conversion is a Python UDF (per-row cost); keys come in document order
    (org.json's are unordered) and arrays stay JSON text as in fll's parse-as-json.
    Labels: READ column (read into the new columns, then gone), ADD all columns minus
    <the columns before>.
    """
    step.require(df, [a.column])
    kind = df.schema[a.column].dataType.typeName()
    if kind != "string":
        raise step.error(f"column {a.column!r} has type {kind}; it should be of type string")
    raw = step.col(a.column)
    converted = _xml_udf(bool(a.keep_strings))(raw)
    checked = fail_when(step, raw.isNull(), converted,
                        f"column '{a.column}' has a null value; it should be an XML document")
    checked = fail_when(step, raw.isNotNull() & converted.isNull(), checked,
                        f"column '{a.column}' holds text that is not well-formed XML",
                        F.concat(F.lit(f"column '{a.column}' holds text that is not "
                                       f"well-formed XML: "), F.substring(raw, 1, 80)))
    return flatten_json(step, df, a.column, checked, a.depth)


# -- xpath / xpath-array -------------------------------------------------------

def _check_xpath(step: StepContext, path: str) -> None:
    jvm = getattr(step.spark, "_jvm", None)
    if jvm is None:
        return
    try:
        jvm.javax.xml.xpath.XPathFactory.newInstance().newXPath().compile(path)
    except Exception as exc:
        raise step.error(f"bad XPath {path!r}: {java_message(exc) or 'cannot compile it'}") \
            from None


def _xpath_common(step: StepContext, df: "DataFrame", a: Args) -> "Column":
    require_string(step, df, a.column)
    _check_xpath(step, a.xpath)
    return step.col(a.column)


@register_directive("xpath <column:column> <destination:column> <xpath:text>")
def xpath(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """The string value of the first node an XPath selects in the XML text of ``column``,
    into ``destination``; null when nothing matches or the value is null.

    Wrangler documents this directive (on a parse-as-xml VTD navigator) but no longer
    ships it; fll builds it from the documentation on Spark's xpath functions, reading
    the XML text directly. Invalid XML stops the run. Labels: READ column, ADD destination.
    """
    src = _xpath_common(step, df, a)
    value = F.when(F.xpath_boolean(src, F.lit(a.xpath)), F.xpath_string(src, F.lit(a.xpath)))
    return Outcome(put(df, a.destination, value), L.derive(a.column, a.destination))


@register_directive("xpath-array <column:column> <destination:column> <xpath:text>")
def xpath_array(step: StepContext, df: "DataFrame", a: Args) -> Outcome:
    """All the values an XPath selects in the XML text of ``column``, as a JSON array
    text in ``destination``; null when nothing matches.

    Built from Wrangler's documentation (no implementation ships). Spark's xpath gives
    the values of text and attribute nodes; an element node has no value there, so
    select its text (``/a/b/text()``). Labels: READ column, ADD destination.
    """
    src = _xpath_common(step, df, a)
    found = F.xpath(src, F.lit(a.xpath))
    value = F.when(F.size(found) > 0, F.to_json(found))
    return Outcome(put(df, a.destination, value), L.derive(a.column, a.destination))
