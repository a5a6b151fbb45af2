"""The HBase-shaped `Table` protocol every backend implements, and the
registry that builds a backend from a store URL.

A table maps a row key (bytes) to columns (str → bytes). Backends promise:
`put` applies one batch (atomically where the backend can; SQLite can),
`get` returns a row or None, `scan` yields rows in key order within
``[start, stop)`` (``stop=b""`` means to the end), honouring ``limit`` and
``reverse``, and `delete` removes whole rows. Nothing above this module may
know which backend it talks to.
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Protocol, runtime_checkable
from urllib.parse import urlsplit

from ..errors import StoreError

Row = Mapping[str, bytes]


@runtime_checkable
class Table(Protocol):
    """One wide table. Each call is a round trip for remote backends: batch."""

    url: str

    def put(self, rows: Mapping[bytes, Row]) -> None:
        """Write every row of the batch (columns merged into existing rows)."""

    def get(self, row: bytes) -> dict[str, bytes] | None:
        """One row's columns, or None."""

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        """Several rows in one call; absent rows are left out."""

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Rows with ``start <= key < stop`` in key order (descending if reverse)."""

    def delete(self, rows: list[bytes]) -> None:
        """Remove these rows entirely."""

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Row) -> bool:
        """Atomically: if ``row``'s ``column`` holds exactly ``expected`` (None: the
        cell is absent), put ``values`` into ``row`` and return True; else change
        nothing and return False. The one check-then-act every backend offers
        (SQLite: one ``BEGIN IMMEDIATE`` transaction; Bigtable: CheckAndMutateRow;
        HBase: Thrift ``checkAndPut``)."""

    def close(self) -> None:
        """Release connections."""


def scan_bounds(start: bytes, stop: bytes, limit: int | None) -> tuple[bytes, bytes] | None:
    """The protocol's scan arguments as plain bytes, or None when the scan is
    empty by definition (``limit <= 0``, or a stop at or before the start)."""
    if limit is not None and limit <= 0:
        return None
    start, stop = bytes(start), bytes(stop)
    if stop and stop <= start:
        return None
    return start, stop


_BACKENDS: dict[str, Callable[[str], Table]] = {}
_EXTRAS: dict[str, str] = {}


def register_backend(scheme: str, factory: Callable[[str], Table], extra: str | None = None
                     ) -> None:
    """Make ``<scheme>://…`` URLs open tables built by ``factory(url)``."""
    _BACKENDS[scheme] = factory
    if extra:
        _EXTRAS[scheme] = extra


def known_schemes() -> list[str]:
    _load_builtin()
    return sorted(_BACKENDS)


def redact(url: str) -> str:
    """The URL with any password or token removed, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable store URL>"
    if parts.password or "@" in (parts.netloc or ""):
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        netloc = (parts.username + ":***@" if parts.username else "***@") + host
        parts = parts._replace(netloc=netloc)
    query = parts.query
    if query:
        redacted = []
        for item in query.split("&"):
            k, _, _v = item.partition("=")
            if k.lower() in ("token", "password", "secret", "key", "credentials"):
                item = f"{k}=***"
            redacted.append(item)
        parts = parts._replace(query="&".join(redacted))
    if parts == urlsplit(url):
        return url  # nothing secret: keep it exact (geturl drops a slash of sqlite:////abs)
    return parts.geturl()


def _load_builtin() -> None:
    if "sqlite" in _BACKENDS:
        return
    from . import sqlite  # noqa: F401  (registers itself)
    try:
        from . import hbase  # noqa: F401
    except ImportError:
        pass
    try:
        from . import bigtable  # noqa: F401
    except ImportError:
        pass


def open_table(url: str) -> Table:
    """Build the backend a store URL names; a bad URL is a `StoreError` listing the schemes."""
    _load_builtin()
    if not isinstance(url, str) or "://" not in url:
        raise StoreError(f"store URL {redact(str(url))!r} has no scheme; use one of "
                         f"{', '.join(s + '://' for s in known_schemes())}")
    scheme = url.split("://", 1)[0].lower()
    factory = _BACKENDS.get(scheme)
    if factory is None:
        raise StoreError(f"unknown store URL scheme {scheme!r} in {redact(url)!r}; known: "
                         f"{', '.join(s + '://' for s in known_schemes())}")
    return factory(url)
