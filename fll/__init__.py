"""fll: field-level lineage for Spark pipelines.

Public names only; everything else lives in its module.
"""
from .errors import (BadRequest, FllError, InvalidLineageError, NotFound, PipelineError,
                     RecipeError, StoreError)
from .model import (DROPPED, EndPoint, EndPointField, InputField, ReadOperation, Transformation,
                    TransformOperation, WriteOperation)
from .opset import FieldLineageInfo

__version__ = "0.1.0"

__all__ = [
    "EndPoint", "EndPointField", "InputField", "Transformation", "ReadOperation",
    "TransformOperation", "WriteOperation", "FieldLineageInfo", "DROPPED", "open_store",
    "FllError", "InvalidLineageError", "RecipeError", "StoreError", "NotFound", "BadRequest",
    "PipelineError",
]


def open_store(url: str | None = None, **options):
    """Open the lineage store at ``url`` (default ``sqlite:///./fll-data/fll.db``)."""
    from .store import open_store as _open
    return _open(url, **options)
