"""The one error hierarchy of fll.

Every failure a user can cause is one of these, so the CLI and the REST
server can turn it into one clear line (or one JSON body) without ever
showing a stack trace. Nothing here may import the rest of the package.
"""
from __future__ import annotations


class FllError(Exception):
    """Root of every error fll raises on purpose."""


class InvalidLineageError(FllError, ValueError):
    """An operation set breaks a rule of the model; names the operation and field."""

    def __init__(self, message: str, operation: str | None = None, field: str | None = None):
        super().__init__(message)
        self.operation = operation
        self.field = field


class RecipeError(FllError, ValueError):
    """A directive recipe cannot be parsed or applied.

    Carries the 1-based ``line`` and ``column`` of the offending text, the
    ``directive`` it belongs to and what was ``expected`` there.
    """

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 directive: str | None = None, expected: str | None = None):
        where = ""
        if line is not None:
            where = f"line {line}" + (f", column {column}" if column is not None else "") + ": "
        super().__init__(where + message)
        self.reason = message
        self.line = line
        self.column = column
        self.directive = directive
        self.expected = expected
        #: every bad line of a recipe, set by `Recipe.parse` on the error it raises
        self.errors: list[RecipeError] = []
        #: directive names close to an unknown one
        self.suggestions: list[str] = []


class StoreError(FllError):
    """The backing table failed (I/O, locking, a corrupt row, an unreachable server)."""


class NotFound(FllError, LookupError):
    """An unknown dataset, field, run or row."""


class BadRequest(FllError, ValueError):
    """A parameter (URL, CLI option, time expression) is malformed."""

    def __init__(self, message: str, parameter: str | None = None):
        super().__init__(message)
        self.parameter = parameter


class PipelineError(FllError):
    """A pipeline spec is invalid or a stage failed."""
