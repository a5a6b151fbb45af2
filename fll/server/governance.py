"""REST routes of classification tags and lineage diffs (`fll.govern`).

Marquez's tag routes, with its shapes: ``GET /api/v1/tags`` (``{"tags": [...]}``),
``PUT /api/v1/tags/{tag}`` (a tag with a description; fll adds its propagation
policy), ``POST``/``DELETE /api/v1/namespaces/{ns}/datasets/{ds}/tags/{tag}`` and
``…/datasets/{ds}/fields/{field}/tags/{tag}`` (each answers the dataset, its
``tags`` and ``fields[].tags``; fll adds ``fields[].propagatedTags``, the tags
reaching a field through lineage, told apart from those put on it). And fll's
own: ``GET /api/v1/tags/{tag}/fields`` (where a tag reaches over a range) and
``GET /api/v1/column-lineage/diff`` (what changed between two ranges).

Writes go straight to the store's tag rows (`fll.store.tags`; the token
middleware guards them like every write). This module must never write
lineage, and answers errors only as fll errors (400, 404, 503).
"""
from __future__ import annotations

from typing import Any, Callable

from fastapi import APIRouter, Body, Query

from .. import govern
from ..errors import BadRequest
from ..model import EndPoint, EndPointField
from ..names import resolve_dataset, resolve_field
from ..rowkeys import MAX_TIME
from ..store.tags import Tags
from ..timerange import now_ms, parse_time
from .paths import segment
from .responses import JSONResponse
from .column_graph import parse_node_id
from .views import known_fields

_TIME_HELP = "epoch seconds, or now / now-7d / now-1d+4h; start inclusive (default 0)"
_END_HELP = "epoch seconds, or now / now-7d; end exclusive (default now)"
_SPAN_HELP = "START,END: each epoch seconds or now-7d… (an empty START: 0, END: now)"


def _range(start: str | None, end: str | None) -> tuple[int, int]:
    clock = now_ms()
    s = parse_time(start, "start", now=clock, default=0)
    e = parse_time(end, "end", now=clock, default=clock + 1)
    if s > e:
        raise BadRequest(f"start must not be after end (start={start!r}, end={end!r})", "start")
    return s, e


def dataset_json(store: Any, ep: EndPoint) -> dict:
    """A dataset as Marquez's tag routes answer it: its name, its fields (with
    their types where a schema was reported) and their tags. The full Marquez
    dataset (versions, facets) is `fll.server.marquez`'s; this carries what
    tagging changes, from `fll.govern.dataset_tags`."""
    tags = govern.dataset_tags(store, ep.namespace, ep.name, 0, MAX_TIME)
    ep = EndPoint(tags["namespace"], tags["name"])
    schema = store.schema(ep.namespace, ep.name, 0, MAX_TIME) or {}
    names = sorted(set(known_fields(store, ep, 0, MAX_TIME)) | set(tags["fields"]))
    fields = []
    for n in names:
        mine = tags["fields"].get(n, {"tags": [], "propagatedTags": []})
        fields.append({"name": n, "type": schema.get(n), "tags": mine["tags"],
                       "propagatedTags": mine["propagatedTags"], "description": None})
    return {"id": {"namespace": ep.namespace, "name": ep.name}, "type": "DB_TABLE",
            "name": ep.name, "physicalName": ep.name, "namespace": ep.namespace,
            "sourceName": ep.namespace, "fields": fields, "tags": tags["tags"],
            "description": None, "facets": {}}


def routes(store: Any, reader: Callable[[], Any], max_level: int = govern.MAX_HOPS
           ) -> APIRouter:
    """The routes over ``store``; ``reader()`` gives the store as one request reads it."""
    api = APIRouter()

    def _dataset(ns: str, ds: str) -> EndPoint:
        return resolve_dataset(store, None, segment(ns), segment(ds))

    @api.get("/api/v1/tags", tags=["marquez"])
    def list_tags() -> JSONResponse:
        """Every tag (Marquez: name and description; fll: its propagation policy)."""
        return JSONResponse({"tags": [t.to_dict() for t in Tags(store.table).all()]})

    @api.put("/api/v1/tags/{tag}", tags=["marquez"])
    def put_tag(tag: str, body: dict[str, Any] | None = Body(
                    None, description='{"description": "...", "propagation": '
                                      '{"aggregation": false, "masking": false}}')
                ) -> JSONResponse:
        """Create a tag or change its description and propagation policy."""
        body = body or {}
        description = body.get("description")
        passes = None
        policy = body.get("propagation")
        if policy is not None:
            if not isinstance(policy, dict) or not all(
                    k in ("aggregation", "masking") and isinstance(v, bool)
                    for k, v in policy.items()):
                raise BadRequest('propagation must look like {"aggregation": true|false, '
                                 '"masking": true|false}', "propagation")
            passes = [k for k, v in policy.items() if v]
        found = Tags(store.table).define(segment(tag), description, passes,
                                         str(body.get("createdBy") or ""))
        return JSONResponse(found.to_dict())

    @api.post("/api/v1/namespaces/{ns}/datasets/{ds}/tags/{tag}", tags=["marquez"])
    def tag_dataset(ns: str, ds: str, tag: str) -> JSONResponse:
        ep = _dataset(ns, ds)
        Tags(store.table).add(ep.namespace, ep.name, "", segment(tag))
        return JSONResponse(dataset_json(reader(), ep))

    @api.delete("/api/v1/namespaces/{ns}/datasets/{ds}/tags/{tag}", tags=["marquez"])
    def untag_dataset(ns: str, ds: str, tag: str) -> JSONResponse:
        ep = _dataset(ns, ds)
        Tags(store.table).remove(ep.namespace, ep.name, "", segment(tag))
        return JSONResponse(dataset_json(reader(), ep))

    @api.post("/api/v1/namespaces/{ns}/datasets/{ds}/fields/{field}/tags/{tag}",
              tags=["marquez"])
    def tag_field(ns: str, ds: str, field: str, tag: str) -> JSONResponse:
        f = resolve_field(store, None, segment(ns), segment(ds), segment(field))
        Tags(store.table).add(f.endpoint.namespace, f.endpoint.name, f.field, segment(tag))
        return JSONResponse(dataset_json(reader(), f.endpoint))

    @api.delete("/api/v1/namespaces/{ns}/datasets/{ds}/fields/{field}/tags/{tag}",
                tags=["marquez"])
    def untag_field(ns: str, ds: str, field: str, tag: str) -> JSONResponse:
        f = resolve_field(store, None, segment(ns), segment(ds), segment(field))
        Tags(store.table).remove(f.endpoint.namespace, f.endpoint.name, f.field, segment(tag))
        return JSONResponse(dataset_json(reader(), f.endpoint))

    @api.get("/api/v1/tags/{tag}/fields", tags=["governance"])
    def tag_fields(tag: str, start: str | None = Query(None, description=_TIME_HELP),
                   end: str | None = Query(None, description=_END_HELP),
                   maxHops: int = Query(govern.MAX_HOPS,  # noqa: N803
                                        description="hops before the answer is cut")
                   ) -> JSONResponse:
        """Every field the tag reaches through the lineage of [start, end), then the
        fields where it was stopped (``stopped: true``, with the transformations)."""
        s, e = _range(start, end)
        if not 1 <= maxHops <= 10_000:
            raise BadRequest(f"maxHops must be between 1 and 10000, got {maxHops}", "maxHops")
        return JSONResponse(govern.propagate(reader(), segment(tag), s, e,
                                             max_hops=maxHops).to_dict())

    @api.get("/api/v1/column-lineage/diff", tags=["governance"])
    def lineage_diff(nodeId: str | None = Query(  # noqa: N803
                         None, description="datasetField:<ns>:<dataset>:<field> or "
                                           "dataset:<ns>:<name>"),
                     before: str | None = Query(None, description=_SPAN_HELP),
                     after: str | None = Query(None, description=_SPAN_HELP),
                     depth: int = Query(1, description="field hops up and down")
                     ) -> JSONResponse:
        """Edges added, removed and changed between the ``before`` and ``after`` ranges."""
        if not nodeId:
            raise BadRequest("nodeId is required", "nodeId")
        if not 1 <= depth <= max_level:
            raise BadRequest(f"depth must be between 1 and {max_level}, got {depth}", "depth")
        b = govern.parse_span(before, "before", separator=",")
        a = govern.parse_span(after, "after", separator=",")
        view = reader()
        ep, field = parse_node_id(view, nodeId)
        roots = [EndPointField(ep, field)] if field is not None else \
            govern.dataset_roots(view, ep, [b, a])
        return JSONResponse(govern.diff(view, roots, b, a, depth))

    return api
