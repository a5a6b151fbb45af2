"""Labels and field operations never contradict each other, for every directive.

Each registered directive runs over one sample recipe on a shared small frame; for every
step the field operations must say exactly what its labels say: an ADD or MODIFY column
is produced by one transform whose inputs are the step's READ columns (plus the column
itself for MODIFY), a DROP column by a transform with no outputs, a RENAME by an
identity transform, and no operation reads a column the step did not label. The recipes
read the sample from a Parquet file, and must give, column by column, the sources
Spark's own plan gives (`fll.spark.column_lineage`, direct or conditional).
"""
from __future__ import annotations

import datetime as dt

import pytest

from fll import EndPoint
from fll.directives import Recipe
from fll.directives.labels import ADD, DROP, MODIFY, READ, RENAME
from fll.directives.registry import DEFAULT_REGISTRY

SCHEMA = ("s string, n string, j string, x string, d string, c string, u string, e string, "
          "num double, i int, ts timestamp_ntz, tz timestamp, bin binary, arr array<string>, "
          "rec struct<p: string, q: int>, lg string, h string, b64 string")
ROW = ("Hello World", "12", '{"a": 1, "b": {"c": 2}}', "<r><a>1</a><a>2</a><k>v</k></r>",
       "2020-01-02", "a,b", "http://x.org/p?q=1", "ann@example.com", 12.5, 3,
       dt.datetime(2020, 1, 2, 3, 4, 5), dt.datetime(2020, 1, 2, 3, 4, 5), b"hi", ["p", "q"],
       ("v", 1), '127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 26',
       "6869", "aGk=")

#: one sample per directive (several lines where a directive needs another first)
SAMPLES = {
    "change-column-case": "change-column-case upper",
    "cleanse-column-names": "cleanse-column-names",
    "columns-replace": "columns-replace s/^n$/number/g",
    "copy": "copy s s2",
    "create-record": "create-record r2 s,n",
    "current-datetime": "current-datetime now",
    "cut-character": "cut-character s s3 1-3",
    "datetime-to-timestamp": "datetime-to-timestamp ts",
    "decode": "decode base64 b64",
    "diff-date": "parse-as-simple-date d yyyy-MM-dd\ndiff-date d d gap",
    "drop": "drop s, n",
    "encode": "encode hex s",
    "extract-regex-groups": "extract-regex-groups s ([A-Z])([a-z])?",
    "fail": "fail i > 100",
    "fill-null-or-empty": "fill-null-or-empty s none",
    "filter-by-regex": "filter-by-regex if-matched s 'xyz.*'",
    "filter-empty-or-null": "filter-empty-or-null s",
    "filter-row": "filter-row i > 100 true",
    "filter-row-if-false": "filter-row-if-false i < 100",
    "filter-row-if-matched": "filter-row-if-matched s 'xyz.*'",
    "filter-row-if-not-matched": "filter-row-if-not-matched s '.*'",
    "filter-row-if-true": "filter-row-if-true i > 100",
    "filter-rows-on": "filter-rows-on condition-true i > 100",
    "find-and-replace": "find-and-replace s,n s/l/L/g",
    "flatten": "flatten arr",
    "flatten-record": "flatten-record rec",
    "format-as-currency": "format-as-currency num money",
    "format-date": "parse-as-simple-date d yyyy-MM-dd\nformat-date d 'dd/MM/yyyy'",
    "format-datetime": "format-datetime ts 'yyyy-MM-dd HH:mm'",
    "format-unix-timestamp": "format-unix-timestamp i 'yyyy-MM-dd'",
    "generate-uuid": "generate-uuid id",
    "hash": "hash s SHA-256",
    "increment-variable": "set-variable k cast(i as bigint)\nincrement-variable k 1 i > 0\nset-column m k",
    "json-path": "json-path j ja $.a",
    "keep": "keep s, n, i",
    "lowercase": "lowercase s",
    "ltrim": "ltrim s",
    "mask-number": "mask-number n x#",
    "mask-shuffle": "mask-shuffle s",
    "merge": "merge s n sn '-'",
    "parse-as-bytesize": "parse-as-bytesize n size",
    "parse-as-csv": "parse-as-csv c ,",
    "parse-as-currency": "parse-as-currency n amount",
    "parse-as-date": "parse-as-date d",
    "parse-as-datetime": "parse-as-datetime d yyyy-MM-dd",
    "parse-as-fixed-length": "parse-as-fixed-length n 1,1",
    "parse-as-json": "parse-as-json j",
    "parse-as-log": "parse-as-log lg common",
    "parse-as-simple-date": "parse-as-simple-date d yyyy-MM-dd",
    "parse-as-timeduration": "parse-as-timeduration n took",
    "parse-timestamp": "parse-timestamp i seconds",
    "parse-xml-to-json": "parse-xml-to-json x",
    "quantize": "quantize num band 0:20=LOW,20:100=HIGH",
    "rename": "rename s greeting",
    "rtrim": "rtrim s",
    "send-to-error": "send-to-error i > 100",
    "send-to-error-and-continue": "send-to-error-and-continue i > 100",
    "set-charset": "set-charset bin utf-8",
    "set-column": "set-column t num * i",
    "set-headers": "set-headers a1,a2",
    "set-record-delim": "set-record-delim s ' '",
    "set-type": "set-type n int",
    "set-variable": "set-variable v num * 2\nset-column w v",
    "split-email": "split-email e",
    "split-to-columns": "split-to-columns c ,",
    "split-to-rows": "split-to-rows c ,",
    "split-url": "split-url u",
    "swap": "swap s n",
    "text-distance": "text-distance levenshtein s n dist",
    "text-metric": "text-metric cosine s n sim",
    "timestamp-to-datetime": "timestamp-to-datetime tz",
    "titlecase": "titlecase s",
    "trim": "trim s",
    "uppercase": "uppercase s",
    "url-decode": "url-decode u",
    "url-encode": "url-encode u",
    "write-as-csv": "write-as-csv all",
    "write-as-json-map": "write-as-json-map all",
    "write-as-json-object": "write-as-json-object obj s,n",
    "xpath": "xpath x first /r/k",
    "xpath-array": "xpath-array x all_a /r/a",
}
SRC, DST = EndPoint("ns", "src"), EndPoint("ns", "dst")


def test_every_directive_has_a_sample():
    assert sorted(SAMPLES) == sorted(DEFAULT_REGISTRY._specs)


def _step_ops(operations, index: int, directive: str):
    prefix = f"r.{index}.{directive}."
    return [op for op in operations if op.name.startswith(prefix)]


@pytest.fixture(scope="module")
def frame(spark, tmp_path_factory):
    """The sample row read from Parquet, so Spark's plan names its source columns."""
    path = str(tmp_path_factory.mktemp("labels") / "sample")
    spark.createDataFrame([ROW], SCHEMA).write.parquet(path)
    return spark.read.parquet(path)


#: directives whose added column has no source column at all (Spark's plan agrees:
#: it traces the column to nothing), so only the labels-versus-operations half applies
NO_SOURCE = {"current-datetime", "generate-uuid"}


def assert_operations_agree(compiled) -> None:
    """Every step's field operations say exactly what its labels say."""
    operations = compiled.field_operations("r").operations
    for st in compiled.steps:
        ops = _step_ops(operations, st.index, st.directive)
        reads = {c for c, k in st.labels.items() if k == READ}
        labelled = set(st.labels)
        produced: dict[str, set[str]] = {}
        dropped = set()
        for op in ops:
            inputs = {i.name for i in op.inputs}
            assert inputs <= labelled, f"{st.text}: {op.name} reads {inputs - labelled}"
            if not op.outputs:
                dropped |= inputs
                continue
            for out in op.outputs:
                produced[out] = inputs
        want_produced = {c for c, k in st.labels.items() if k in (ADD, MODIFY)} | {
            new for _, new in st.renames}
        assert set(produced) == want_produced, st.text
        assert dropped == {c for c, k in st.labels.items() if k == DROP}, st.text
        for col, kind in st.labels.items():
            if kind == ADD:
                assert produced[col] == reads, f"{st.text}: {col} from {produced[col]}"
            elif kind == MODIFY:
                assert produced[col] == reads | {col}, f"{st.text}: {col} from {produced[col]}"
        for old, new in st.renames:
            assert produced[new] == {old}, st.text
        assert not any(k == RENAME for k in st.labels.values()) or st.renames


@pytest.mark.spark
@pytest.mark.parametrize("directive", sorted(SAMPLES))
def test_field_operations_and_spark_plan_say_what_the_labels_say(spark, frame, directive):
    from fll.spark import column_lineage

    compiled = Recipe.parse(SAMPLES[directive]).compile(frame)
    assert_operations_agree(compiled)

    # the whole recipe: each output column's source columns, by the labels and by Spark
    incoming = compiled.to_lineage(SRC, DST).incoming_summary()
    labels = {f.field: sorted(s.field for s in srcs) for f, srcs in incoming.items()}
    fields = column_lineage(compiled.dataframe, spark)["fields"]
    plan = {f: sorted({i["field"] for i in v["inputFields"]}) for f, v in fields.items()}
    assert labels == plan
    if directive in NO_SOURCE:
        assert [f for f, srcs in labels.items() if not srcs]
