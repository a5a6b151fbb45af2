"""Shared fixtures: one local Spark session for the whole run, temporary stores."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    """One `local[2]` SparkSession shared by every test (Spark takes seconds to start)."""
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("fll-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def store(tmp_path):
    """A fresh embedded SQLite lineage store."""
    from fll import open_store

    s = open_store(f"sqlite:///{tmp_path}/fll.db")
    yield s
    s.close()


@pytest.fixture(scope="session")
def validators():
    """(RunEvent validator, ColumnLineageDatasetFacet validator) from the OpenLineage
    JSON Schemas copied under tests/server/spec; the facet's $ref to OpenLineage.json
    resolves through the registry."""
    import json
    from pathlib import Path

    import jsonschema
    from referencing import Registry, Resource

    spec = Path(__file__).parent / "server" / "spec"
    core = json.loads((spec / "OpenLineage.json").read_text())
    facet = json.loads((spec / "ColumnLineageDatasetFacet.json").read_text())
    registry = Registry().with_resources([(core["$id"], Resource.from_contents(core)),
                                          (facet["$id"], Resource.from_contents(facet))])
    event = jsonschema.Draft202012Validator({"$ref": core["$id"] + "#/$defs/RunEvent"},
                                            registry=registry)
    col = jsonschema.Draft202012Validator(
        {"$ref": facet["$id"] + "#/$defs/ColumnLineageDatasetFacet"}, registry=registry)
    return event, col
