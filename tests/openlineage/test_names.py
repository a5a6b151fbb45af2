"""Naming datasets and fields on the CLI when namespaces are URIs (fll.names), and
`fll scan --prefix` with key prefixes as keys are printed."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fll import EndPoint, FieldLineageInfo, InputField, ReadOperation, WriteOperation, open_store
from fll.cli import main

PG = EndPoint("postgres://db:5432", "public.t")
S3 = EndPoint("s3://bucket", "out:1")
# two datasets whose compact forms overlap: "a:b:c" is a:(b:c) and (a:b):c
AB_C, A_BC = EndPoint("a:b", "c"), EndPoint("a", "b:c")


def copy(src: EndPoint, dst: EndPoint, field: str) -> FieldLineageInfo:
    return FieldLineageInfo([ReadOperation("r", "", src, (field,)),
                             WriteOperation("w", "", dst, (InputField("r", field),))])


@pytest.fixture
def url(tmp_path) -> str:
    u = f"sqlite:///{tmp_path}/names.db"
    with open_store(u) as s:
        s.record(copy(PG, S3, "id:x"), "run-1", 1_000, "job/one")
        s.record(copy(PG, AB_C, "f"), "run-2", 2_000, "job/two")
        s.record(copy(PG, A_BC, "f"), "run-3", 3_000, "job/three")
    return u


def fll(url: str, *args: str):
    return CliRunner().invoke(main, ["--store", url, *args])


@pytest.mark.parametrize("args", [
    ["lineage", "s3://bucket:out:1:id:x"],
    ["lineage", "--namespace", "s3://bucket", "--dataset", "out:1", "--field", "id:x"],
])
def test_a_field_under_a_uri_namespace_resolves_compactly_and_whole(url, args):
    r = fll(url, *args, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "postgres://db:5432" in r.stdout


@pytest.mark.parametrize("args", [
    ["runs", "postgres://db:5432:public.t", "--format", "json"],
    ["runs", "--namespace", "postgres://db:5432", "--dataset", "public.t", "--format", "json"],
])
def test_runs_resolve_a_uri_namespace(url, args):
    r = fll(url, *args)
    assert r.exit_code == 0, r.stderr
    assert [x["run_id"] for x in json.loads(r.stdout)] == ["run-3", "run-2", "run-1"]


def test_an_ambiguous_compact_form_is_refused_naming_both_readings(url):
    r = fll(url, "fields", "a:b:c")
    assert r.exit_code == 2
    assert "ambiguous" in r.stderr and "--namespace 'a:b'" in r.stderr \
        and "--namespace 'a'" in r.stderr
    r = fll(url, "fields", "--namespace", "a:b", "--dataset", "c")
    assert r.exit_code == 0 and r.stdout.split() == ["f"]


def test_an_unknown_uri_dataset_is_not_found(url):
    r = fll(url, "export", "s3://bucket:nope")
    assert r.exit_code == 1 and "dataset s3://bucket:nope not found" in r.stderr


@pytest.mark.parametrize("prefix, kinds", [
    ("b", {"backward"}), ("b|", {"backward"}), ("r|run-2", {"run"}),
    ("b|a%3Ab|", set()), ("b|a:b|", {"backward"}),
])
def test_scan_prefix_takes_a_row_kind_or_a_printed_key_prefix(url, prefix, kinds):
    r = fll(url, "scan", "--prefix", prefix, "--format", "json")
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert {row["kind"] for row in rows} == kinds
    assert all(row["key"].startswith(prefix) for row in rows) or prefix == "b"


def test_scan_prefix_of_one_dataset_lists_only_its_rows(url):
    r = fll(url, "scan", "--prefix", "b|s3://bucket|out:1", "--format", "json")
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and rows[0]["runs"] == ["run-1"]  # a column per run
