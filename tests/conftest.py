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
