"""PySpark pipelines whose plugins record field operations, like CDAP's.

`run_pipeline(spec)` validates a spec, runs it on Spark, turns every stage's
recorded operations into one `FieldLineageInfo` and records the run in the
lineage store. Importing this package must never start Spark.
"""
from .api import (FieldReadOperation, FieldTransformOperation, FieldWriteOperation, Joiner, Plugin,
                  Property, PropertyError, Sink, Source, StageContext, StageField, Transform,
                  register)
from .catalog import plugin_class
from .processor import StageLineage, process
from .runner import RunResult, run_pipeline
from .spec import PipelineSpec, SpecError, StageSpec, load_spec, parse_spec

__all__ = [
    "FieldReadOperation", "FieldTransformOperation", "FieldWriteOperation", "StageField",
    "Plugin", "Source", "Transform", "Joiner", "Sink", "StageContext", "Property",
    "PropertyError", "register", "plugin_class", "StageLineage", "process", "RunResult",
    "run_pipeline", "PipelineSpec", "StageSpec", "SpecError", "load_spec", "parse_spec",
]
