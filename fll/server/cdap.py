"""fll's own read routes: the service's health, the dataset list, CDAP v3's
field lineage, the seed design's paths and Marquez's column lineage.

Each route decodes its parameters (`fll.server.shared`) and answers with a
view (`fll.server.views`, `fll.server.column_graph`) of the request's store.
The hottest of them (the CDAP field routes and the column lineage) are also
answered in front of the framework (`fast_routes`, served by
`fll.server.fast.FastReads`) with the same views, the same checks and the
same error bodies; the framework's routes below stay the reference (and
answer what the fast path declines).

This module must never write to the store, and never answer a fast route
differently from its framework route.
"""
from __future__ import annotations

from typing import Any, Callable

from fastapi import APIRouter, Query, Request

from .. import __version__
from ..errors import BadRequest
from ..model import EndPoint, EndPointField
from ..render import parse_indirect
from ..store.lineage import LineageStore
from . import column_graph, shared, views
from .fast import Handler, bool_param, int_param, str_param
from .responses import JSONResponse

V3 = "/v3/namespaces/{ns}/datasets/{ds}"

router = APIRouter()

# -- service -------------------------------------------------------------

@router.get("/health", tags=["service"])
def health() -> dict:
    return {"status": "ok", "version": __version__}


@router.get("/api/v1/datasets", tags=["explorer"])
def list_datasets(request: Request) -> JSONResponse:
    """Every dataset a run read or wrote, or an event reported the schema of."""
    return JSONResponse(views.datasets(shared.reader(request)))


# -- CDAP v3 -------------------------------------------------------------

@router.get(V3 + "/lineage/fields", tags=["cdap"])
def lineage_fields(request: Request, ns: str, ds: str,
                   start: str | None = Query(None, description=shared.TIME_HELP),
                   end: str | None = Query(None, description=shared.END_HELP),
                   prefix: str | None = Query(None, description="case-insensitive"),
                   includeCurrent: bool = Query(False),
                   includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                   ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.dataset_fields(shared.reader(request, includeFailed),
                                             shared.endpoint(ns, ds), s, e, prefix,
                                             includeCurrent))


@router.get(V3 + "/lineage/fields/{field}", tags=["cdap"])
def lineage_field(request: Request, ns: str, ds: str, field: str,
                  direction: str | None = Query(None, description="incoming|outgoing|both"),
                  start: str | None = Query(None, description=shared.TIME_HELP),
                  end: str | None = Query(None, description=shared.END_HELP),
                  level: int = Query(shared.DEFAULT_FIELD_LEVEL, description="hops"),
                  indirect: str = Query("show", description=shared.INDIRECT_HELP),
                  includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                  ) -> JSONResponse:
    if direction is None:
        raise BadRequest("direction is required: incoming, outgoing or both", "direction")
    s, e = shared.time_range(start, end)
    return JSONResponse(views.field_summary(shared.reader(request, includeFailed),
                                            shared.endpoint_field(ns, ds, field), s, e, direction,
                                            shared.level(request, level, "level"), parse_indirect(indirect)))


@router.get(V3 + "/lineage/fields/{field}/operations", tags=["cdap"])
def lineage_field_operations(request: Request, ns: str, ds: str, field: str,
                             direction: str = Query("both",
                                                    description="incoming|outgoing|both"),
                             start: str | None = Query(None, description=shared.TIME_HELP),
                             end: str | None = Query(None, description=shared.END_HELP),
                             includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                             ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.field_operations(shared.reader(request, includeFailed),
                                               shared.endpoint_field(ns, ds, field), s, e,
                                               direction))


@router.get(V3 + "/lineage/allfieldlineage", tags=["cdap"])
def all_field_lineage(request: Request, ns: str, ds: str,
                      direction: str = Query("both", description="incoming|outgoing|both"),
                      start: str | None = Query(None, description=shared.TIME_HELP),
                      end: str | None = Query(None, description=shared.END_HELP),
                      includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                      ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.all_field_lineage(shared.reader(request, includeFailed),
                                                shared.endpoint(ns, ds), s, e, direction))


# -- the seed design's paths ----------------------------------------------

@router.get(V3 + "/fields/lineage", tags=["design"])
def dataset_field_lineage(request: Request, ns: str, ds: str,
                          start: str | None = Query(None, description=shared.TIME_HELP),
                          end: str | None = Query(None, description=shared.END_HELP),
                          level: int = Query(shared.DEFAULT_DATASET_LEVEL,
                                             description="dataset hops each way"),
                          indirect: str = Query("show", description=shared.INDIRECT_HELP),
                          includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                          ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.dataset_field_mappings(shared.reader(request, includeFailed),
                                                     shared.endpoint(ns, ds), s, e,
                                                     shared.level(request, level, "level"),
                                                     parse_indirect(indirect)))


@router.get(V3 + "/fields/{field}/lineage", tags=["design"])
def field_lineage_detail(request: Request, ns: str, ds: str, field: str,
                         start: str | None = Query(None, description=shared.TIME_HELP),
                         end: str | None = Query(None, description=shared.END_HELP),
                         direction: str = Query("backward", description="backward|forward"),
                         includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                         ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.field_detail(shared.reader(request, includeFailed),
                                           shared.endpoint_field(ns, ds, field), s, e, direction))


@router.get(V3 + "/properties", tags=["design"])
def dataset_properties(request: Request, ns: str, ds: str,
                       start: str | None = Query(None, description=shared.TIME_HELP),
                       end: str | None = Query(None, description=shared.END_HELP),
                       includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                       ) -> JSONResponse:
    s, e = shared.time_range(start, end)
    return JSONResponse(views.dataset_properties(shared.reader(request, includeFailed),
                                                 shared.endpoint(ns, ds), s, e))


# -- Marquez-compatible ---------------------------------------------------

@router.get("/api/v1/column-lineage", tags=["marquez"])
def column_lineage(request: Request, nodeId: str | None = Query(  # noqa: N803
                       None, description="datasetField:<ns>:<dataset>:<field> or "
                                         "dataset:<ns>:<name>"),
                   depth: int = Query(shared.DEFAULT_DEPTH, description="field hops"),
                   withDownstream: bool = Query(False),  # noqa: N803
                   start: str | None = Query(None, description=shared.TIME_HELP + "; default 0"),
                   end: str | None = Query(None, description=shared.END_HELP + "; default now"),
                   indirect: str = Query("show", description=shared.INDIRECT_HELP),
                   includeFailed: bool = Query(False, description=shared.FAILED_HELP)  # noqa: N803
                   ) -> JSONResponse:
    if not nodeId:
        raise BadRequest("nodeId is required", "nodeId")
    s, e = shared.time_range(start, end, required=False)
    return JSONResponse(column_graph.column_lineage(
        shared.reader(request, includeFailed), nodeId,
        shared.level(request, depth, "depth", minimum=0), withDownstream, s, e,
        parse_indirect(indirect)))


# -- the same routes in front of the framework (fll.server.fast) ----------------------

def fast_routes(reader: Callable[[bool], LineageStore], max_level: int
                ) -> dict[tuple[str | None, ...], Handler]:
    """The hot routes by path shape, for `fll.server.fast.FastReads`: each
    answers as its route above does, reading through ``reader`` (the app's,
    given whether to include failed runs) with ``level``/``depth`` capped at
    ``max_level``."""

    def failed(q: dict[str, str]) -> bool:
        return bool_param(q, "includeFailed", False)

    def lvl(value: int, name: str, minimum: int = 1) -> int:
        return shared.limit(value, name, minimum=minimum, cap=max_level)

    def fields(names: list[str], q: dict[str, str]) -> Any:
        start, end, prefix = str_param(q, "start"), str_param(q, "end"), str_param(q, "prefix")
        current = bool_param(q, "includeCurrent", False)
        s, e = shared.time_range(start, end)
        return views.dataset_fields(reader(failed(q)),
                                    EndPoint(names[0], names[1]), s, e, prefix, current)

    def field(names: list[str], q: dict[str, str]) -> Any:
        direction, start, end = str_param(q, "direction"), str_param(q, "start"), str_param(q, "end")
        level = int_param(q, "level", shared.DEFAULT_FIELD_LEVEL)
        indirect = str_param(q, "indirect", "show")
        if direction is None:
            raise BadRequest("direction is required: incoming, outgoing or both", "direction")
        s, e = shared.time_range(start, end)
        return views.field_summary(reader(failed(q)),
                                   EndPointField(EndPoint(names[0], names[1]), names[2]), s, e,
                                   direction, lvl(level, "level"), parse_indirect(indirect or ""))

    def operations(names: list[str], q: dict[str, str]) -> Any:
        direction = str_param(q, "direction", "both")
        start, end = str_param(q, "start"), str_param(q, "end")
        s, e = shared.time_range(start, end)
        return views.field_operations(reader(failed(q)),
                                      EndPointField(EndPoint(names[0], names[1]), names[2]),
                                      s, e, direction or "")

    def all_fields(names: list[str], q: dict[str, str]) -> Any:
        direction = str_param(q, "direction", "both")
        start, end = str_param(q, "start"), str_param(q, "end")
        s, e = shared.time_range(start, end)
        return views.all_field_lineage(reader(failed(q)),
                                       EndPoint(names[0], names[1]), s, e, direction or "")

    def columns(names: list[str], q: dict[str, str]) -> Any:
        node = str_param(q, "nodeId")
        depth = int_param(q, "depth", shared.DEFAULT_DEPTH)
        downstream = bool_param(q, "withDownstream", False)
        start, end = str_param(q, "start"), str_param(q, "end")
        indirect = str_param(q, "indirect", "show")
        if not node:
            raise BadRequest("nodeId is required", "nodeId")
        s, e = shared.time_range(start, end, required=False)
        return column_graph.column_lineage(reader(failed(q)), node,
                                           lvl(depth, "depth", minimum=0),
                                           downstream, s, e, parse_indirect(indirect or ""))

    def v3(*rest: str | None) -> tuple[str | None, ...]:
        return ("v3", "namespaces", None, "datasets", None, *rest)

    return {
        v3("lineage", "fields"): fields,
        v3("lineage", "fields", None): field,
        v3("lineage", "fields", None, "operations"): operations,
        v3("lineage", "allfieldlineage"): all_fields,
        ("api", "v1", "column-lineage"): columns,
    }
