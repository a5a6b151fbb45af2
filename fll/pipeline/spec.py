"""Pipeline specs: load a JSON or YAML file (or a dict) and validate it completely.

A spec names its stages (each a plugin with properties) and the connections
between them; together they must form a DAG in which sources have no input,
sinks no output, joiners at least two inputs and every stage leads to a sink.
Every error names the stage and property at fault. This module must never
import or start Spark: a bad spec is rejected before a session exists.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import PipelineError
from .api import Plugin, PropertyError
from .catalog import plugin_class

__all__ = ["SpecError", "StageSpec", "PipelineSpec", "load_spec", "parse_spec", "ERROR_PORT"]

#: The port of a stage that sends rows to an error output (``{"from", "to", "port"}``).
ERROR_PORT = "errors"


class SpecError(PipelineError):
    """An invalid spec; ``stage`` and ``property`` say where (either may be None)."""

    def __init__(self, message: str, stage: str | None = None, property: str | None = None):
        where = ""
        if stage is not None:
            where = f"stage {stage!r}" + (f", property {property!r}" if property else "") + ": "
        elif property is not None:
            where = f"{property!r}: "
        super().__init__(where + message)
        self.stage = stage
        self.property = property
        self.reason = message


@dataclass(frozen=True)
class StageSpec:
    name: str
    plugin: str
    plugin_class: type[Plugin]
    properties: Mapping[str, Any]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.plugin_class.kind


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    namespace: str
    description: str
    stages: tuple[StageSpec, ...]  # topological order (ties in declared order)
    base_dir: str | None = None
    path: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def stage(self, name: str) -> StageSpec:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def sinks(self) -> tuple[StageSpec, ...]:
        return tuple(s for s in self.stages if s.kind == "sink")


_TOP_KEYS = {"name", "namespace", "description", "stages", "connections", "baseDir"}
_STAGE_KEYS = {"name", "plugin", "properties", "description"}


def load_spec(path: str | os.PathLike) -> PipelineSpec:
    """Read and validate the spec at ``path`` (``.json``, ``.yaml`` or ``.yml``).

    Relative file paths in stage properties resolve against the spec file's
    directory (or its ``baseDir``, itself relative to that directory).
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise SpecError(f"cannot read pipeline spec {path}: {e.strerror or e}") from e
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SpecError(f"{path} is not valid YAML: {e}") from e
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"{path} is not valid JSON: line {e.lineno}, column {e.colno}: "
                            f"{e.msg}") from e
    return parse_spec(data, base_dir=os.path.dirname(os.path.abspath(path)), path=path)


def parse_spec(data: Any, base_dir: str | None = None, path: str | None = None) -> PipelineSpec:
    """Validate a spec given as a mapping (see the module docstring for the rules)."""
    if not isinstance(data, Mapping):
        raise SpecError(f"a pipeline spec must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise SpecError(f"unknown top-level key(s) {', '.join(map(repr, unknown))} "
                        f"(known: {', '.join(sorted(_TOP_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError("the pipeline needs a non-empty string 'name'", property="name")
    namespace = data.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise SpecError("must be a non-empty string", property="namespace")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError("must be a string", property="description")
    if data.get("baseDir") is not None:
        if not isinstance(data["baseDir"], str):
            raise SpecError("must be a string", property="baseDir")
        base_dir = os.path.join(base_dir or os.getcwd(), data["baseDir"])

    raw_stages = data.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise SpecError("the pipeline needs a non-empty list 'stages'", property="stages")
    declared: dict[str, tuple[str, type[Plugin], dict]] = {}
    for i, st in enumerate(raw_stages):
        if not isinstance(st, Mapping):
            raise SpecError(f"stage #{i + 1} must be a mapping, got {type(st).__name__}",
                            property="stages")
        sname = st.get("name")
        if not isinstance(sname, str) or not sname.strip():
            raise SpecError(f"stage #{i + 1} needs a non-empty string 'name'", property="stages")
        if sname in declared:
            raise SpecError("the stage name is used more than once", stage=sname)
        extra = sorted(set(st) - _STAGE_KEYS)
        if extra:
            raise SpecError(f"unknown key(s) {', '.join(map(repr, extra))} (known: "
                            f"{', '.join(sorted(_STAGE_KEYS))})", stage=sname)
        plugin = st.get("plugin")
        if not isinstance(plugin, str) or not plugin:
            raise SpecError("needs a string 'plugin'", stage=sname, property="plugin")
        try:
            cls = plugin_class(plugin)
        except PipelineError as e:
            raise SpecError(str(e), stage=sname, property="plugin") from e
        props = st.get("properties", {}) or {}
        if not isinstance(props, Mapping):
            raise SpecError("must be a mapping", stage=sname, property="properties")
        declared[sname] = (plugin, cls, dict(props))

    inputs: dict[str, list[str]] = {s: [] for s in declared}
    outputs: dict[str, list[str]] = {s: [] for s in declared}
    conns = data.get("connections", [])
    if not isinstance(conns, list):
        raise SpecError("must be a list of {from, to}", property="connections")
    error_ports: dict[str, list[str]] = {}
    for i, c in enumerate(conns):
        port = None
        if isinstance(c, (list, tuple)) and len(c) == 2:
            src, dst = c
        elif isinstance(c, Mapping) and set(c) in ({"from", "to"}, {"from", "to", "port"}):
            src, dst, port = c["from"], c["to"], c.get("port")
        else:
            raise SpecError(f"connection #{i + 1} must be {{\"from\": stage, \"to\": stage}} "
                            f"(and optionally \"port\": \"errors\"), got {c!r}",
                            property="connections")
        for end in (src, dst):
            if end not in declared:
                raise SpecError(f"connection #{i + 1} names unknown stage {end!r} (stages: "
                                f"{', '.join(map(repr, declared))})", property="connections")
        if src == dst:
            raise SpecError("is connected to itself", stage=src, property="connections")
        if port is not None:
            if port != ERROR_PORT:
                raise SpecError(f"connection #{i + 1}: unknown port {port!r}; the only port "
                                f"is {ERROR_PORT!r}", stage=src, property="connections")
            if getattr(declared[src][1], "error_plugin", None) is None:
                raise SpecError(f"plugin {declared[src][0]!r} has no {ERROR_PORT!r} port",
                                stage=src, property="connections")
            if dst in error_ports.setdefault(src, []):
                raise SpecError(f"is connected to {dst!r} twice", stage=src,
                                property="connections")
            error_ports[src].append(dst)
            continue
        if dst in outputs[src]:
            raise SpecError(f"is connected to {dst!r} twice", stage=src, property="connections")
        outputs[src].append(dst)
        inputs[dst].append(src)
    # A stage's error port is a stage of its own, "<stage>.errors": it reads what the stage
    # reads and outputs the rows the stage sent to its error output.
    for src, dsts in error_ports.items():
        err = f"{src}.{ERROR_PORT}"
        if err in declared:
            raise SpecError(f"the stage name {err!r} is taken; it names the {ERROR_PORT!r} "
                            f"port of stage {src!r}", stage=err)
        _, cls, props = declared[src]
        err_cls = cls.error_plugin  # type: ignore[attr-defined]
        declared[err] = (err_cls.plugin_name, err_cls, dict(props))
        inputs[err] = list(inputs[src])
        outputs[err] = list(dsts)
        for up in inputs[src]:
            outputs[up].append(err)
        for dst in dsts:
            inputs[dst].append(err)

    order = _toposort(list(declared), outputs, inputs)
    stages: list[StageSpec] = []
    for sname in order:
        plugin, cls, props = declared[sname]
        _check_shape(sname, cls.kind, inputs[sname], outputs[sname])
        config = _check_properties(sname, cls, props, inputs[sname])
        stages.append(StageSpec(sname, plugin, cls, config, tuple(inputs[sname]),
                                tuple(outputs[sname])))
    _check_reaches_sink(stages)
    for st in stages:  # inputs that can be checked without Spark (local files) are
        check = getattr(st.plugin_class, "check_local_input", None)
        if check is not None:
            try:
                check(st.properties, base_dir)
            except PropertyError as e:
                raise SpecError(e.reason, stage=st.name, property=e.property) from None
    return PipelineSpec(name, namespace, description, tuple(stages), base_dir, path, dict(data))


def _toposort(names: list[str], outputs: dict[str, list[str]],
              inputs: dict[str, list[str]]) -> list[str]:
    indegree = {n: len(inputs[n]) for n in names}
    ready = [n for n in names if indegree[n] == 0]
    order: list[str] = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for m in outputs[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
        ready.sort(key=names.index)  # declared order breaks ties: stable progress output
    if len(order) != len(names):
        stuck = [n for n in names if indegree[n] > 0]
        raise SpecError(f"the connections form a cycle through {', '.join(map(repr, stuck))}",
                        stage=stuck[0], property="connections")
    return order


def _check_shape(name: str, kind: str, ins: list[str], outs: list[str]) -> None:
    if kind == "source" and ins:
        raise SpecError(f"a source takes no input, but {', '.join(map(repr, ins))} "
                        f"connect(s) to it", stage=name, property="connections")
    if kind != "source" and not ins:
        raise SpecError(f"a {kind} needs at least one input connection", stage=name,
                        property="connections")
    if kind == "joiner" and len(ins) < 2:
        raise SpecError("a joiner needs at least two input connections", stage=name,
                        property="connections")
    if kind == "sink" and outs:
        raise SpecError(f"a sink has no output, but it connects to "
                        f"{', '.join(map(repr, outs))}", stage=name, property="connections")
    if kind != "sink" and not outs:
        raise SpecError(f"this {kind} is not connected to anything (every stage must lead "
                        f"to a sink)", stage=name, property="connections")


def _check_reaches_sink(stages: list[StageSpec]) -> None:
    if not any(s.kind == "sink" for s in stages):
        raise SpecError("the pipeline has no sink stage", property="stages")


def _check_properties(stage: str, cls: type[Plugin], props: dict,
                      inputs: list[str]) -> dict[str, Any]:
    known = {p.name: p for p in cls.properties}
    unknown = sorted(set(props) - set(known))
    if unknown:
        raise SpecError(f"unknown property for plugin {cls.plugin_name!r} (known: "
                        f"{', '.join(sorted(known)) or 'none'})", stage=stage,
                        property=unknown[0])
    config: dict[str, Any] = {}
    for p in cls.properties:
        if p.name not in props or props[p.name] is None:
            if p.required:
                raise SpecError(f"required by plugin {cls.plugin_name!r}"
                                + (f" ({p.help})" if p.help else ""), stage=stage,
                                property=p.name)
            config[p.name] = p.default
            continue
        problem = p.check(props[p.name])
        if problem:
            raise SpecError(problem, stage=stage, property=p.name)
        config[p.name] = props[p.name]
    try:
        cls.validate(config, list(inputs))
    except PropertyError as e:
        raise SpecError(e.reason, stage=stage, property=e.property) from e
    except PipelineError as e:
        raise SpecError(str(e), stage=stage) from e
    return config
