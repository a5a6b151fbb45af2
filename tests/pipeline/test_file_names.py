"""File datasets are named by location, as `track()` and the OpenLineage Spark
integration name them; ``referenceName`` is an alias; runs recorded under the
old names are recognised when recorded again."""
from __future__ import annotations

import pytest

from fll import open_store
from fll.errors import BadRequest, InvalidLineageError
from fll.names import location_name
from fll.pipeline.runner import legacy_info, run_pipeline
from fll.pipeline.spec import parse_spec
from fll.names import dataset_name


@pytest.mark.parametrize("path,base,expected", [
    ("/data/lake/orders.csv", None, ("file", "/data/lake/orders.csv")),
    ("/data/lake/out/", None, ("file", "/data/lake/out")),
    ("/data/lake/./a/../out", None, ("file", "/data/lake/out")),
    ("in/orders.csv", "/specs", ("file", "/specs/in/orders.csv")),
    ("../data/hr.csv", "/repo/conf/pipelines", ("file", "/repo/conf/data/hr.csv")),
    ("file:/data/x", None, ("file", "/data/x")),
    ("file:///data/x", None, ("file", "/data/x")),
    ("file://localhost/data/x", None, ("file", "/data/x")),
    # a glob names the directory it lists: what it matches changes from run to run
    ("/data/in/*.csv", None, ("file", "/data/in")),
    ("/data/in/day=*/part-?.csv", None, ("file", "/data/in")),
    ("in/{a,b}.csv", "/specs", ("file", "/specs/in")),
    ("hdfs://nn:8020/warehouse/orders/", None, ("hdfs://nn:8020", "/warehouse/orders")),
    ("hdfs://nn:8020/warehouse/day=*/x", None, ("hdfs://nn:8020", "/warehouse")),
    ("s3a://bucket/raw/orders", None, ("s3://bucket", "raw/orders")),
    ("s3://bucket/raw/*.json", None, ("s3://bucket", "raw")),
    ("gs://bucket/k/v.parquet", None, ("gs://bucket", "k/v.parquet")),
])
def test_a_path_is_named_as_openlineage_names_it(path, base, expected):
    assert location_name(path, base) == expected


@pytest.mark.parametrize("location", ["file:/data/lake/orders.csv", "hdfs://nn:8020/w/o",
                                      "s3a://bucket/raw/orders", "gs://bucket/k"])
def test_a_pipeline_path_and_a_spark_location_get_one_name(location):
    # track() names what Hadoop qualifies (file:/…, hdfs://…); a spec may hold either
    assert location_name(location) == dataset_name(location)


def test_an_empty_path_is_refused_naming_the_property():
    with pytest.raises(BadRequest, match="path"):
        location_name("  ")


def _spec(tmp_path, keep=("id", "amount")) -> dict:
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / "a.csv").write_text("id,amount\n1,5\n")
    (tmp_path / "in" / "b.csv").write_text("id,amount\n2,7\n")
    return {"name": "clean", "namespace": "shop", "stages": [
        {"name": "orders", "plugin": "csv-source",
         "properties": {"path": "in/*.csv", "referenceName": "Orders"}},
        {"name": "keep", "plugin": "projection", "properties": {"keep": list(keep)}},
        {"name": "sink", "plugin": "csv-sink", "properties": {"path": "out"}}],
        "connections": [["orders", "keep"], ["keep", "sink"]]}


@pytest.mark.spark
@pytest.mark.slow
def test_an_old_run_recorded_again_is_recognised_and_a_real_conflict_still_refused(
        spark, tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    spec = parse_spec(_spec(tmp_path), base_dir=str(tmp_path))
    dry = run_pipeline(spec, spark=spark, echo=None, record=False)
    # the glob source is named by its directory, the sink (default referenceName:
    # the stage name) by its location relative to the spec
    assert {(e.namespace, e.name) for e in dry.info.sources} == {("file", f"{tmp_path}/in")}
    assert {(e.namespace, e.name) for e in dry.info.destinations} == {("file",
                                                                       f"{tmp_path}/out")}
    old = legacy_info(dry.info, "shop")
    assert {(e.namespace, e.name) for e in old.sources} == {("shop", "Orders")}
    assert {(e.namespace, e.name) for e in old.destinations} == {("shop", "sink")}
    with open_store(url) as store:  # as the release before recorded run r1
        store.record(old, "r1", 1_700_000_000_000, "clean")

    lines: list[str] = []
    again = run_pipeline(spec, store_url=url, run_id="r1", spark=spark, echo=lines.append)
    assert again.recorded is False and "already recorded" in "\n".join(lines)
    with open_store(url) as store:
        assert store.run("r1").checksum == old.checksum  # the old set stands
        # and both of its names now reach it
        assert store.resolve_dataset("shop", "Orders") == ("file", f"{tmp_path}/in")
        assert store.resolve_dataset("shop", "sink") == ("file", f"{tmp_path}/out")

    # a different operation set under the same run id is still a conflict
    other = parse_spec(_spec(tmp_path, keep=("id",)), base_dir=str(tmp_path))
    with pytest.raises(InvalidLineageError, match="already recorded"):
        run_pipeline(other, store_url=url, run_id="r1", spark=spark, echo=None)
