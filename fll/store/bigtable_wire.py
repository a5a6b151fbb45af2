"""Bigtable's data calls on the bare gRPC channel, with the protobuf messages
themselves (`fll.store.bigtable` builds them).

The generated client wraps every call in retry, timeout and error layers
and every message in proto-plus, which marshals each field on each access:
about half of a call's CPU in this process (a MutateRows of 4 rows: 1.2 ms
through the client, 0.6 ms here). fll does its own retries (`BigtableTable._call`)
and reads each field once, so the data calls go straight to the channel the
client made (its credentials included), with the routing header the client
would send (the table and the app profile, which Bigtable routes by). Table
administration stays on the generated admin client.

`DataCalls` answers the three calls fll makes with the generated client's
names and arguments, so either can stand behind `BigtableTable`.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Iterator

FAMILY = "c"


def messages() -> SimpleNamespace:
    """The protobuf classes of the v2 data API (raises ImportError without the extra)."""
    global _MESSAGES
    if _MESSAGES is None:
        from google.cloud.bigtable_v2 import types

        _MESSAGES = SimpleNamespace(**{name: getattr(types, name).pb() for name in (
            "MutateRowsRequest", "MutateRowsResponse", "Mutation", "ReadRowsRequest",
            "ReadRowsResponse", "RowSet", "RowRange", "RowFilter", "ColumnRange",
            "ValueRange", "CheckAndMutateRowRequest", "CheckAndMutateRowResponse")})
    return _MESSAGES


_MESSAGES: SimpleNamespace | None = None
_SERVICE = "/google.bigtable.v2.Bigtable/"


class DataCalls:
    """MutateRows, ReadRows and CheckAndMutateRow on ``channel``."""

    def __init__(self, channel: Any, table_path: str, app_profile: str):
        from google.api_core.gapic_v1 import routing_header

        m = messages()
        self._mutate = channel.unary_stream(
            _SERVICE + "MutateRows", request_serializer=m.MutateRowsRequest.SerializeToString,
            response_deserializer=m.MutateRowsResponse.FromString)
        self._read = channel.unary_stream(
            _SERVICE + "ReadRows", request_serializer=m.ReadRowsRequest.SerializeToString,
            response_deserializer=m.ReadRowsResponse.FromString)
        self._check = channel.unary_unary(
            _SERVICE + "CheckAndMutateRow",
            request_serializer=m.CheckAndMutateRowRequest.SerializeToString,
            response_deserializer=m.CheckAndMutateRowResponse.FromString)
        self._routing = (routing_header.to_grpc_metadata(
            {"table_name": table_path, "app_profile_id": app_profile}),)

    def mutate_rows(self, request: Any, timeout: float | None = None, retry: Any = None
                    ) -> Iterator[Any]:
        return self._mutate(request, timeout=timeout, metadata=self._routing)

    def read_rows(self, request: Any, timeout: float | None = None, retry: Any = None,
                  metadata: Any = ()) -> Iterator[Any]:
        return self._read(request, timeout=timeout, metadata=self._routing + tuple(metadata))

    def check_and_mutate_row(self, request: Any, timeout: float | None = None,
                             retry: Any = None) -> Any:
        return self._check(request, timeout=timeout, metadata=self._routing)


def merge_chunks(stream: Any) -> Iterator[tuple[bytes, dict[str, bytes]]]:
    """Rows from ReadRows responses: a row's cells arrive as chunks, a cell's
    value may be split over several (value_size > 0 until the last piece)."""
    key = b""
    cols: dict[str, bytes] = {}
    family = qualifier = None
    parts: list[bytes] = []
    for response in stream:
        for ch in response.chunks:
            if ch.reset_row:
                key, cols, family, qualifier, parts = b"", {}, None, None, []
                continue
            if ch.row_key and ch.row_key != key:
                # a new row (the emulator repeats the key on every chunk of a row)
                key, cols = ch.row_key, {}
            if ch.HasField("family_name"):
                family = ch.family_name.value
            if ch.HasField("qualifier"):
                qualifier = ch.qualifier.value
            parts.append(ch.value)
            if ch.value_size == 0:
                if family == FAMILY and qualifier is not None:
                    cols[qualifier.decode("utf-8")] = b"".join(parts)
                parts = []
            if ch.commit_row:
                yield key, cols
                key, cols = b"", {}
