"""Pipeline specs are validated completely, before Spark starts, naming stage and property."""
from __future__ import annotations

import copy
import json
import os

import pytest

from fll.errors import PipelineError
from fll.pipeline.spec import SpecError, load_spec, parse_spec

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
DEMO = os.path.join(ROOT, "conf", "pipelines", "employee.json")


def demo_spec() -> dict:
    with open(DEMO, encoding="utf-8") as fh:
        return json.load(fh)


def _stage(spec, name):
    return next(s for s in spec["stages"] if s["name"] == name)


def _set(stage, prop, value):
    def mutate(spec):
        _stage(spec, stage)["properties"][prop] = value
    return mutate


def _delete(stage, prop):
    def mutate(spec):
        del _stage(spec, stage)["properties"][prop]
    return mutate


def _connect(src, dst):
    def mutate(spec):
        spec["connections"].append({"from": src, "to": dst})
    return mutate


def _plugin(stage, plugin):
    def mutate(spec):
        _stage(spec, stage)["plugin"] = plugin
    return mutate


# (case, mutation, expected stage, expected property, message fragment)
INVALID = [
    ("a missing required property", _delete("HR File Reader", "path"),
     "HR File Reader", "path", "required"),
    ("an unknown property", _set("HR File Parser", "colums", ["a"]),
     "HR File Parser", "colums", "unknown property"),
    ("a property of the wrong type", _set("Employee Data Writer", "partitions", "one"),
     "Employee Data Writer", "partitions", "must be a int"),
    ("a value outside its choices", _set("Employee Joiner", "joinType", "sideways"),
     "Employee Joiner", "joinType", "must be one of"),
    ("join keys that miss an input", _set("Employee Joiner", "joinKeys",
                                          {"Person File Parser": ["SSN"]}),
     "Employee Joiner", "joinKeys", "missing input stage(s) 'HR File Parser'"),
    ("an unknown plugin", _plugin("Field Normalizer", "no-such-plugin"),
     "Field Normalizer", "plugin", "unknown plugin 'no-such-plugin'"),
    ("a connection into a source", _connect("HR File Parser", "Person File Reader"),
     "Person File Reader", "connections", "a source takes no input"),
    ("a cycle", _connect("Field Normalizer", "Employee Joiner"),
     None, "connections", "cycle"),
    ("a python transform without a dotted path", _set("Field Normalizer", "function", "x"),
     "Field Normalizer", "function", "dotted path"),
    ("a stage leading nowhere", lambda s: s["connections"].remove(
        {"from": "HR File Parser", "to": "Employee Joiner"}),
     "HR File Parser", "connections", "not connected to anything"),
    ("a joiner with one input", lambda s: s["connections"].__setitem__(
        3, {"from": "HR File Parser", "to": "Employee Data Writer"}),
     "Employee Joiner", "connections", "at least two input"),
]


@pytest.mark.parametrize("case,mutate,stage,prop,fragment", INVALID,
                         ids=[c[0] for c in INVALID])
def test_an_invalid_spec_is_rejected_naming_stage_and_property(case, mutate, stage, prop,
                                                                fragment):
    spec = copy.deepcopy(demo_spec())
    mutate(spec)
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    assert info.value.property == prop
    if stage is not None:
        assert info.value.stage == stage
        assert f"stage {stage!r}" in str(info.value)
    assert fragment in str(info.value)


def test_the_demo_spec_loads_in_topological_order():
    spec = load_spec(DEMO)
    names = [s.name for s in spec.stages]
    assert names.index("Employee Joiner") > names.index("HR File Parser")
    assert names[-1] == "Employee Data Writer"
    assert spec.stage("Employee Joiner").inputs == ("Person File Parser", "HR File Parser")
    assert spec.stage("Employee Data Writer").properties["mode"] == "overwrite"  # default


def test_a_yaml_spec_loads_like_its_json(tmp_path):
    import yaml

    path = tmp_path / "employee.yaml"
    # its input files stay beside the shipped spec (a spec's local inputs must exist)
    path.write_text(yaml.safe_dump({**demo_spec(), "baseDir": os.path.dirname(DEMO)}))
    assert [s.name for s in load_spec(path).stages] == [s.name for s in load_spec(DEMO).stages]


def test_malformed_json_names_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"name": "x",\n "stages": [}')
    with pytest.raises(SpecError, match="line 2, column"):
        load_spec(path)


def test_an_invalid_spec_is_rejected_before_spark_starts(monkeypatch, tmp_path):
    from fll.pipeline import runner

    def no_spark(*args, **kwargs):
        raise AssertionError("a SparkSession was requested for an invalid spec")

    monkeypatch.setattr(runner, "start_spark", no_spark)
    spec = demo_spec()
    del _stage(spec, "HR File Parser")["properties"]["columns"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="stage 'HR File Parser', property 'columns'"):
        runner.run_pipeline(str(path), store_url=f"sqlite:///{tmp_path}/fll.db", echo=None)
    assert not (tmp_path / "fll.db").exists()


def test_a_third_party_plugin_loads_by_dotted_path():
    from fll.pipeline.catalog import plugin_class
    from fll.pipeline.plugins.transforms import Projection

    assert plugin_class("fll.pipeline.plugins.transforms:Projection") is Projection
    with pytest.raises(PipelineError, match="not a Source, Transform, Joiner or Sink"):
        plugin_class("fll.pipeline.spec:load_spec")
