"""The plugin API of fll pipelines: stage-level field operations, plugin base
classes per kind, the context a plugin records through, and the registry plugins add
themselves to (`register`; `fll.pipeline.catalog` looks names up).

Plugins describe lineage the way CDAP pipeline plugins do: on plain field
names, local to their stage (``FieldTransformOperation("concat", ..., ["a",
"b"], ["c"])``). They never build `fll.model` operations or name another
stage's operations: `fll.pipeline.processor` turns stage operations into one
run's `FieldLineageInfo`. This module must never import Spark at import time
(specs are validated before Spark starts).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, NamedTuple,
                    Sequence, Union)

from ..errors import PipelineError
from ..model import EndPoint, Transformation

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "StageField", "OperationField", "FieldReadOperation", "FieldTransformOperation", "FieldWriteOperation",
    "FieldOperation", "Property", "Plugin", "Source", "Transform", "Joiner", "Sink",
    "StageContext", "register", "registered_plugins", "load_object", "KINDS",
]


class StageField(NamedTuple):
    """A field as it arrives at the recording stage, before any of its operations.

    ``stage=None`` means the stage's input (the merged input when it has
    several); a stage name picks that upstream stage's output, which is how a
    joiner tells ``Person.SSN`` from ``HR.SSN`` without a dotted string.
    A plain ``str`` input instead means the field as last produced inside the
    stage (or its input when no earlier operation of the stage produced it).
    """

    field: str
    stage: str | None = None


class OperationField(NamedTuple):
    """Field ``field`` as output by the earlier operation ``operation`` of the
    recording stage: for engines (a directive recipe) that already know which
    of their steps produced each input."""

    operation: str
    field: str


FieldRef = Union[str, StageField, OperationField]


@dataclass(frozen=True)
class FieldReadOperation:
    """Reads ``outputs`` from the dataset ``source`` (CDAP's FieldReadOperation)."""

    name: str
    description: str
    source: EndPoint
    # Sequence so callers may pass lists; __post_init__ always stores a tuple
    outputs: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", _field_names(self.outputs, self.name, "outputs"))


@dataclass(frozen=True)
class FieldTransformOperation:
    """Every output is computed from every input; no outputs drops the inputs.

    ``transformations`` optionally tags inputs (by their position in
    ``inputs``' field name) with OpenLineage transformation types.
    """

    name: str
    description: str
    # Sequence so callers may pass lists; __post_init__ always stores tuples
    inputs: Sequence[FieldRef] = ()
    outputs: Sequence[str] = ()
    transformations: Mapping[str, tuple[Transformation, ...]] = field(
        default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _field_refs(self.inputs, self.name))
        object.__setattr__(self, "outputs", _field_names(self.outputs, self.name, "outputs"))


@dataclass(frozen=True)
class FieldWriteOperation:
    """Writes ``inputs`` under their own names to the dataset ``sink``."""

    name: str
    description: str
    sink: EndPoint
    # Sequence so callers may pass lists; __post_init__ always stores a tuple
    inputs: Sequence[FieldRef] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _field_refs(self.inputs, self.name))


FieldOperation = Union[FieldReadOperation, FieldTransformOperation, FieldWriteOperation]


def _field_names(values: Iterable[str], op: str, what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise PipelineError(f"field operation {op!r}: {what} must be a list of field names, "
                            f"not the single string {values!r}")
    out = tuple(values)
    for v in out:
        if not isinstance(v, str) or not v:
            raise PipelineError(f"field operation {op!r}: {what} must be non-empty field "
                                f"names, got {v!r}")
    return out


def _field_refs(values: Iterable[FieldRef], op: str) -> tuple[FieldRef, ...]:
    if isinstance(values, str):
        raise PipelineError(f"field operation {op!r}: inputs must be a list of field names, "
                            f"not the single string {values!r}")
    out: list[FieldRef] = []
    for v in values:
        if isinstance(v, (StageField, OperationField)):
            out.append(v)
        elif isinstance(v, tuple) and len(v) == 2:
            out.append(StageField(*v))
        elif isinstance(v, str) and v:
            out.append(v)
        else:
            raise PipelineError(f"field operation {op!r}: an input must be a field name or a "
                                f"StageField(field, stage), got {v!r}")
    return tuple(out)


# -- plugin properties -------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "int": (int,), "bool": (bool,), "list": (list,), "dict": (dict,),
    "any": (object,),
}


@dataclass(frozen=True)
class Property:
    """One configuration property of a plugin, checked before Spark starts."""

    name: str
    type: str = "string"  # string | int | bool | list | dict | any
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] = ()
    help: str = ""

    def check(self, value: Any) -> str | None:
        """What is wrong with ``value`` (None when it is fine)."""
        kinds = _TYPES[self.type]
        if self.type == "int" and isinstance(value, bool):
            return "must be an integer, got a boolean"
        if not isinstance(value, kinds):
            return f"must be a {self.type}, got {type(value).__name__} {value!r}"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(map(str, self.choices))}, got {value!r}"
        if self.type == "string" and self.required and not value:
            return "must not be empty"
        return None


# -- plugins -----------------------------------------------------------------

class Plugin:
    """Base of every plugin. Subclasses set ``kind`` (by their base class),
    ``plugin_name`` (the registry name), ``properties`` and a docstring."""

    kind: ClassVar[str] = ""
    plugin_name: ClassVar[str] = ""
    properties: ClassVar[tuple[Property, ...]] = ()

    def __init__(self, config: Mapping[str, Any]):
        #: the stage's properties with defaults filled in
        self.config = dict(config)

    @classmethod
    def validate(cls, config: Mapping[str, Any], inputs: list[str]) -> None:
        """Plugin-specific checks beyond `properties` (before Spark starts).

        ``inputs`` are the names of the upstream stages. Raise
        `PropertyError(property, message)`; the spec loader adds the stage name.
        """


class PropertyError(PipelineError):
    """Raised by `Plugin.validate`: a property value is wrong."""

    def __init__(self, property: str, message: str):
        super().__init__(f"property {property!r}: {message}")
        self.property = property
        self.reason = message


class Source(Plugin):
    """Reads a dataset; must record a `FieldReadOperation` for its fields."""

    kind = "source"

    def read(self, ctx: "StageContext") -> "DataFrame":  # pragma: no cover - abstract
        raise NotImplementedError


class Transform(Plugin):
    """Turns its input into its output. With several upstream stages the
    input is their union by field name, and the processor adds merge
    operations for fields arriving from more than one of them."""

    kind = "transform"

    def transform(self, ctx: "StageContext", df: "DataFrame") -> "DataFrame":  # pragma: no cover
        raise NotImplementedError


class Joiner(Plugin):
    """Joins several inputs, given by upstream stage name; refers to input
    fields as `StageField(field, stage)`."""

    kind = "joiner"

    def join(self, ctx: "StageContext",
             inputs: Mapping[str, "DataFrame"]) -> "DataFrame":  # pragma: no cover
        raise NotImplementedError


class Sink(Plugin):
    """Writes a dataset. `prepare` records the `FieldWriteOperation` (lineage
    is validated before any sink writes); `write` writes and returns rows."""

    kind = "sink"

    def prepare(self, ctx: "StageContext", df: "DataFrame") -> None:  # pragma: no cover
        raise NotImplementedError

    def write(self, ctx: "StageContext", df: "DataFrame") -> int:  # pragma: no cover
        raise NotImplementedError


KINDS = ("source", "transform", "joiner", "sink")


# -- context -----------------------------------------------------------------

@dataclass
class StageContext:
    """What a plugin sees of the run: its stage, Spark, and `record`."""

    stage: str
    plugin: str
    namespace: str
    pipeline: str
    spark: "SparkSession | None" = None
    input_stages: tuple[str, ...] = ()
    input_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    base_dir: str | None = None
    warn: Callable[[str], None] = print
    operations: list[FieldOperation] = field(default_factory=list)

    def record(self, operations: Iterable[FieldOperation] | FieldOperation) -> None:
        """Record this stage's field operations (may be called several times)."""
        if isinstance(operations, (FieldReadOperation, FieldTransformOperation,
                                   FieldWriteOperation)):
            operations = [operations]
        for op in operations:
            if not isinstance(op, (FieldReadOperation, FieldTransformOperation,
                                   FieldWriteOperation)):
                raise PipelineError(
                    f"stage {self.stage!r}: record() takes FieldReadOperation, "
                    f"FieldTransformOperation or FieldWriteOperation, got {op!r}")
            self.operations.append(op)

    def endpoint(self, name: str, properties: Mapping[str, Any] | None = None) -> EndPoint:
        """The dataset ``name`` in the pipeline's namespace (properties as strings)."""
        props = {k: _prop_str(v) for k, v in (properties or {}).items() if v is not None}
        return EndPoint(self.namespace, name, props)

    def resolve_path(self, path: str) -> str:
        """A spec path made absolute against the spec file's directory."""
        import os

        if "://" in path or os.path.isabs(path) or not self.base_dir:
            return path
        return os.path.normpath(os.path.join(self.base_dir, path))


def _prop_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


# -- registry ----------------------------------------------------------------

_BUILTIN: dict[str, type[Plugin]] = {}


def registered_plugins() -> dict[str, type[Plugin]]:
    """The plugins `register`ed so far, by name (`fll.pipeline.catalog` loads the built-ins)."""
    return dict(_BUILTIN)


def register(cls: type[Plugin]) -> type[Plugin]:
    """Class decorator: make a plugin available under ``cls.plugin_name``."""
    if not cls.plugin_name or cls.kind not in KINDS:
        raise PipelineError(f"plugin class {cls.__name__} needs a plugin_name and must derive "
                            f"from Source, Transform, Joiner or Sink")
    _BUILTIN[cls.plugin_name] = cls
    return cls


def load_object(path: str, what: str) -> Any:
    """Import ``module:attr`` or ``module.attr``."""
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise PipelineError(f"{what} {path!r} is not a dotted path module:name")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise PipelineError(f"{what} {path!r}: cannot import module {module!r}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PipelineError(f"{what} {path!r}: module {module!r} has no {attr!r}") from None
    return obj
