"""The compiled recipe's DataFrame: every action on it reports a failure of the recipe
as the one-line `RecipeError` naming the recipe line.

A run-time check (``fail``, a null a directive cannot take, a malformed value) raises
inside the Spark job, so the caller of ``collect()`` or ``write.save()`` would get
Spark's own exception. `RecipeFrame` is a classic PySpark DataFrame whose actions
(and whose writers' save methods) pass such a failure through a translator, the
compiled recipe's ``run_error``. Transformations return plain DataFrames: the frame
a user derives is no longer the recipe's, and its failures are Spark's again
(``CompiledRecipe.run_error`` still turns them into the recipe's error).
This module never starts a job itself.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from ..errors import RecipeError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["recipe_frame", "plain_frame", "ACTIONS", "WRITER_ACTIONS"]

#: DataFrame methods that run a job and return (or print) its result.
ACTIONS = ("collect", "count", "first", "head", "take", "tail", "show", "toPandas",
           "toArrow", "toLocalIterator", "foreach", "foreachPartition", "isEmpty",
           "checkpoint", "localCheckpoint", "toJSON")
#: DataFrameWriter / DataFrameWriterV2 methods that run the write.
WRITER_ACTIONS = ("save", "saveAsTable", "insertInto", "parquet", "csv", "json", "orc",
                  "text", "jdbc", "xml", "create", "createOrReplace", "replace", "append",
                  "overwrite", "overwritePartitions")

Translate = Callable[[BaseException], RecipeError]


def _guarded(fn: Callable[..., Any], translate: Translate) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RecipeError:
            raise
        except Exception as exc:   # Py4J/Spark failures of the job
            if not _is_job_failure(exc):
                raise
            raise translate(exc) from exc
    return run


def _is_job_failure(exc: BaseException) -> bool:
    """A failure coming out of Spark (not a bad argument to the Python method)."""
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError
    return isinstance(exc, (PySparkException, Py4JJavaError))


class _Writer:
    """A DataFrameWriter(V2) whose write methods report recipe failures; configuring
    methods (mode, option, partitionBy…) return the wrapper again."""

    def __init__(self, writer: Any, translate: Translate):
        self._writer, self._translate = writer, translate

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._writer, name)
        if not callable(attr):
            return attr
        if name in WRITER_ACTIONS:
            return _guarded(attr, self._translate)

        def chained(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            return _Writer(out, self._translate) if out is self._writer else out
        return chained


def recipe_frame(df: "DataFrame", translate: Translate) -> "DataFrame":
    """``df`` as a `RecipeFrame` (same plan, same session) when it is a classic PySpark
    DataFrame; other DataFrames (Spark Connect) are returned as they are."""
    from pyspark.sql.classic.dataframe import DataFrame as Classic
    if type(df) is not Classic:
        return df
    frame = _frame_class(Classic)(df._jdf, df.sparkSession)
    frame._fll_translate = translate
    return frame


def plain_frame(df: "DataFrame") -> "DataFrame":
    """The same plan as a plain DataFrame (for a caller that translates failures itself,
    such as the pipeline runner, which names the stage as well as the line)."""
    if getattr(df, "_fll_translate", None) is None:
        return df
    from pyspark.sql.classic.dataframe import DataFrame as Classic
    return Classic(df._jdf, df.sparkSession)


@functools.lru_cache(maxsize=None)
def _frame_class(base: Any) -> type:
    def make(name: str) -> Callable[..., Any]:
        method = getattr(base, name)

        def action(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _guarded(method, self._fll_translate)(self, *args, **kwargs)
        action.__name__ = name
        action.__doc__ = method.__doc__
        return action

    body: dict[str, Any] = {name: make(name) for name in ACTIONS if hasattr(base, name)}

    def write(self: Any) -> Any:
        return _Writer(base.write.__get__(self), self._fll_translate)

    def write_to(self: Any, table: str) -> Any:
        return _Writer(base.writeTo(self, table), self._fll_translate)
    body["write"] = property(write, doc=base.write.__doc__)
    body["writeTo"] = write_to
    body["__doc__"] = ("A compiled recipe's DataFrame: a Spark failure of an action is "
                       "raised as the recipe's RecipeError (see fll.directives.frame).")
    return type("RecipeFrame", (base,), body)
