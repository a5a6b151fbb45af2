"""`fll.spark.track`: one recorded run per write made inside the block, nothing else."""
from __future__ import annotations

import os

import pytest

from fll import EndPoint, EndPointField, FllError
from fll.rowkeys import MAX_TIME
from fll.spark import track
from fll.spark.track import WRITER_METHODS, WRITER_V2_METHODS

pytestmark = pytest.mark.spark


def _ep(path) -> EndPoint:
    return EndPoint("file", os.path.abspath(str(path)))


def _incoming(store, dest: EndPoint, field: str) -> set[EndPointField]:
    return store.incoming(EndPointField(dest, field), 0, MAX_TIME)


def _orders_df(spark, lineage_tables):
    return spark.read.parquet(lineage_tables["orders"]).selectExpr(
        "order_id", "upper(status) AS status_uc")


@pytest.mark.covers("InsertIntoHadoopFsRelationCommand",
                    "df.write.parquet/csv/json/orc(path), save(path), option('path')", "track")
@pytest.mark.parametrize("method", ["parquet", "csv", "json", "orc", "save", "option-path"])
def test_a_path_write_records_one_run_named_by_its_absolute_path(spark, lineage_tables, store,
                                                                  tmp_path, method):
    df = _orders_df(spark, lineage_tables)
    out = tmp_path / "out"
    with track(spark, store, program="nightly") as tracker:
        if method == "save":
            df.write.save(str(out), format="parquet")
        elif method == "option-path":
            df.write.format("parquet").option("path", str(out)).save()
        else:
            getattr(df.write, method)(str(out))
    assert [r.destination for r in tracker.runs] == [_ep(out)]
    assert tracker.errors == []
    orders = _ep(lineage_tables["orders"])
    assert _incoming(store, _ep(out), "status_uc") == {EndPointField(orders, "status")}
    runs = store.runs(_ep(out), 0, MAX_TIME)
    assert [(r.run_id, r.program) for r in runs] == [(tracker.runs[0].run_id, "nightly")]


@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "df.write.text(path)", "track")
def test_a_text_write_records_its_single_column(spark, lineage_tables, store, tmp_path):
    out = tmp_path / "text_out"
    with track(spark, store) as tracker:
        spark.read.parquet(lineage_tables["orders"]).select("status").write.text(str(out))
    assert len(tracker.runs) == 1
    assert _incoming(store, _ep(out), "status") == {
        EndPointField(_ep(lineage_tables["orders"]), "status")}


def test_the_run_starts_when_the_write_starts(spark, lineage_tables, store, tmp_path):
    import time

    before = int(time.time() * 1000)
    with track(spark, store) as tracker:
        _orders_df(spark, lineage_tables).write.parquet(str(tmp_path / "o"))
    after = int(time.time() * 1000)
    assert before <= tracker.runs[0].start_ms <= after
    assert store.runs(_ep(tmp_path / "o"), 0, MAX_TIME)[0].start_ms == tracker.runs[0].start_ms


@pytest.mark.covers("CreateDataSourceTableAsSelectCommand", "df.write.saveAsTable (new table)",
                    "track")
@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "df.write.insertInto", "track")
def test_save_as_table_and_insert_into_are_named_by_the_table_location(
        spark, lineage_tables, store, tmp_path):
    loc = tmp_path / "tracked_table"
    orders = _ep(lineage_tables["orders"])
    try:
        with track(spark, store) as tracker:
            _orders_df(spark, lineage_tables).write.option("path", str(loc)).saveAsTable(
                "lin_tracked")
            # insertInto matches by position: the table's names win
            (spark.read.parquet(lineage_tables["orders"])
             .selectExpr("customer_id AS c", "placed AS p").write.insertInto("lin_tracked"))
    finally:
        spark.sql("DROP TABLE IF EXISTS lin_tracked")
    assert [(r.destination, r.method) for r in tracker.runs] == [
        (_ep(loc), "DataFrameWriter.saveAsTable"), (_ep(loc), "DataFrameWriter.insertInto")]
    assert _incoming(store, _ep(loc), "order_id") == {
        EndPointField(orders, "order_id"), EndPointField(orders, "customer_id")}
    assert _incoming(store, _ep(loc), "status_uc") == {
        EndPointField(orders, "status"), EndPointField(orders, "placed")}


@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "spark.sql INSERT INTO … SELECT", "track")
@pytest.mark.covers("CreateDataSourceTableAsSelectCommand", "spark.sql CREATE TABLE … AS SELECT",
                    "track")
def test_sql_insert_and_ctas_are_recorded_and_queries_are_not(spark, lineage_tables, store,
                                                               tmp_path):
    loc, ctas = tmp_path / "ins", tmp_path / "ctas"
    orders = _ep(lineage_tables["orders"])
    spark.sql(f"CREATE TABLE lin_track_ins (id INT, total DOUBLE) USING parquet LOCATION '{loc}'")
    try:
        with track(spark, store) as tracker:
            spark.sql("SELECT * FROM orders").collect()
            spark.sql("INSERT INTO lin_track_ins SELECT customer_id, sum(amount) FROM orders "
                      "GROUP BY customer_id")
            spark.sql(f"/* nightly */ CREATE TABLE lin_track_ctas USING parquet LOCATION "
                      f"'{ctas}' AS SELECT order_id, status FROM orders WHERE amount > 10")
        assert spark.table("lin_track_ins").count() == 2  # the statement really ran
    finally:
        spark.sql("DROP TABLE IF EXISTS lin_track_ins")
        spark.sql("DROP TABLE IF EXISTS lin_track_ctas")
    assert [(r.destination, r.method) for r in tracker.runs] == [
        (_ep(loc), "SparkSession.sql"), (_ep(ctas), "SparkSession.sql")]
    assert _incoming(store, _ep(loc), "total") == {
        EndPointField(orders, "amount"), EndPointField(orders, "customer_id")}
    assert _incoming(store, _ep(ctas), "status") == {
        EndPointField(orders, "status"), EndPointField(orders, "amount")}


def test_a_failing_write_records_nothing_and_its_error_passes_through(
        spark, lineage_tables, store, tmp_path):
    from pyspark.errors import AnalysisException

    out = tmp_path / "exists"
    df = _orders_df(spark, lineage_tables)
    df.write.parquet(str(out))
    with track(spark, store) as tracker:
        with pytest.raises(AnalysisException):
            df.write.parquet(str(out))  # default mode: error if the path exists
        with pytest.raises(AnalysisException):
            spark.sql("INSERT INTO no_such_table_for_track SELECT 1")
    assert tracker.runs == []
    assert store.runs(_ep(out), 0, MAX_TIME) == []


def test_the_wrappers_are_removed_on_exit_even_when_the_block_raises(spark, store):
    from pyspark.sql.readwriter import DataFrameWriter, DataFrameWriterV2

    before = {m: DataFrameWriter.__dict__.get(m) for m in WRITER_METHODS}
    v2_names = ("__init__", *WRITER_V2_METHODS)
    v2_before = {m: DataFrameWriterV2.__dict__.get(m) for m in v2_names}
    sql_before = type(spark).__dict__.get("sql")
    with pytest.raises(RuntimeError, match="boom"):
        with track(spark, store):
            assert DataFrameWriter.__dict__["parquet"] is not before["parquet"]
            assert DataFrameWriterV2.__dict__["append"] is not v2_before["append"]
            raise RuntimeError("boom")
    assert {m: DataFrameWriter.__dict__.get(m) for m in WRITER_METHODS} == before
    assert {m: DataFrameWriterV2.__dict__.get(m) for m in v2_names} == v2_before
    assert type(spark).__dict__.get("sql") is sql_before


def test_writes_outside_the_block_are_not_recorded(spark, lineage_tables, store, tmp_path):
    with track(spark, store):
        pass
    _orders_df(spark, lineage_tables).write.parquet(str(tmp_path / "after"))
    assert store.runs(_ep(tmp_path / "after"), 0, MAX_TIME) == []


def test_writing_rows_that_read_no_dataset_is_skipped_with_a_reason(spark, store, tmp_path):
    with track(spark, store) as tracker:
        spark.range(3).write.parquet(str(tmp_path / "range"))
    assert tracker.runs == [] and tracker.errors == []
    assert tracker.skipped[0][0] == "DataFrameWriter.parquet"
    assert "reads no dataset" in tracker.skipped[0][1]


def test_writing_rows_built_from_an_rdd_is_skipped_as_unknown_not_as_empty(spark, lineage_tables,
                                                                          store, tmp_path):
    rdd = spark.sparkContext.parallelize([(1, "x"), (2, "y")])
    side = spark.createDataFrame(rdd, "k int, label string")
    orders = spark.read.parquet(lineage_tables["orders"])
    with track(spark, store) as tracker:
        side.write.parquet(str(tmp_path / "from_rdd"))
        orders.join(side, orders.order_id == side.k).select("status", "label").write.parquet(
            str(tmp_path / "half_known"))
    assert tracker.errors == []
    assert tracker.skipped == [("DataFrameWriter.parquet",
                                "unknown: built from an RDD (LogicalRDD): nothing to record")]
    # what is known is recorded, and the run says which part is not
    [run] = tracker.runs
    assert run.destination == _ep(tmp_path / "half_known")
    assert run.unknown == ("unknown: built from an RDD (LogicalRDD)",)
    assert _incoming(store, run.destination, "status") == {
        EndPointField(_ep(lineage_tables["orders"]), "status"),
        EndPointField(_ep(lineage_tables["orders"]), "order_id")}


def test_a_store_url_is_opened_for_the_block(spark, lineage_tables, tmp_path):
    from fll import open_store

    url = f"sqlite:///{tmp_path}/tracked.db"
    out = tmp_path / "by_url"
    with track(spark, url) as tracker:
        _orders_df(spark, lineage_tables).write.parquet(str(out))
    assert len(tracker.runs) == 1
    with open_store(url) as reopened:
        assert [r.run_id for r in reopened.runs(_ep(out), 0, MAX_TIME)] == [
            tracker.runs[0].run_id]


def test_a_spark_connect_session_is_refused_clearly(store):
    with pytest.raises(FllError, match="classic SparkSession"):
        with track(object(), store):
            pass


#: a DataSource V2 catalog over Derby's in-memory database (shipped with Spark)
V2_CATALOG = {
    "spark.sql.catalog.lintrack": "org.apache.spark.sql.execution.datasources.v2.jdbc."
                                  "JDBCTableCatalog",
    "spark.sql.catalog.lintrack.url": "jdbc:derby:memory:linv2track;create=true",
    "spark.sql.catalog.lintrack.driver": "org.apache.derby.iapi.jdbc.AutoloadedDriver",
}


@pytest.mark.covers("CreateTableAsSelect", "df.writeTo(t).create() (V2, session catalog)",
                    "track")
@pytest.mark.covers("AppendData", "df.writeTo(t).append()", "track")
@pytest.mark.covers("OverwriteByExpression", "df.writeTo(t).overwrite(condition)", "track")
@pytest.mark.covers("ReplaceTableAsSelect", "df.writeTo(t).createOrReplace()", "track")
def test_data_frame_writer_v2_writes_are_recorded_as_the_listener_names_them(
        spark, lineage_tables, store, tmp_path):
    from pyspark.sql import functions as F

    for k, v in V2_CATALOG.items():
        spark.conf.set(k, v)
    v2, session_table = "lintrack.app.lin_v2", "lin_v2_session"
    loc = tmp_path / "v2_session"
    orders = _ep(lineage_tables["orders"])
    rows = spark.read.parquet(lineage_tables["orders"]).selectExpr(
        "customer_id", "amount * 2 AS doubled")
    spark.sql(f"DROP TABLE IF EXISTS {v2}")
    try:
        with track(spark, store) as tracker:
            rows.writeTo(v2).create()                             # CreateTableAsSelect
            rows.writeTo(v2).append()                             # AppendData
            rows.writeTo(v2).overwrite(F.lit(True))               # OverwriteByExpression
            rows.writeTo(v2).createOrReplace()                    # ReplaceTableAsSelect
            (rows.writeTo(session_table).using("parquet")         # the session catalog
             .option("path", str(loc)).create())
            # (append/overwrite to a session catalog's v1 table: Spark refuses them)
        assert spark.table(v2).count() == 3  # the writes really ran (the last replaced)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {v2}")
        spark.sql(f"DROP TABLE IF EXISTS {session_table}")
    assert not tracker.errors and not tracker.skipped
    # a JDBC table has no location: named by the table's own name (JDBCTable.name())
    named = tracker.runs[0].destination
    assert named.namespace == "spark" and named.name.lower().endswith("lin_v2"), named
    assert [(r.destination, r.method) for r in tracker.runs] == [
        (named, "DataFrameWriterV2.create"), (named, "DataFrameWriterV2.append"),
        (named, "DataFrameWriterV2.overwrite"), (named, "DataFrameWriterV2.createOrReplace"),
        (_ep(loc), "DataFrameWriterV2.create")]
    assert _incoming(store, named, "doubled") == {EndPointField(orders, "amount")}
    assert _incoming(store, _ep(loc), "customer_id") == {EndPointField(orders, "customer_id")}


def test_a_v2_writer_made_before_the_block_is_skipped_with_a_reason(spark, lineage_tables,
                                                                     store):
    writer = spark.read.parquet(lineage_tables["orders"]).writeTo("lin_v2_never")
    with track(spark, store) as tracker:
        with pytest.raises(Exception):  # noqa: B017 (the table does not exist: Spark says so)
            writer.append()
    assert tracker.skipped and "before the track block" in tracker.skipped[0][1]
    assert not tracker.runs
