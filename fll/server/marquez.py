"""Marquez's read API (``/api/v1``): namespaces, sources, datasets and their
versions; `install` mounts it with the lineage graph
(`fll.server.marquez_lineage`) and search and statistics
(`fll.server.marquez_search`).

What a Marquez client (marquez-python, Marquez's web UI) reads, built from
what fll keeps (`fll.server.marquez_model` says how). Marquez's own column
lineage (``GET /api/v1/column-lineage``) is `fll.server.cdap`'s, and its
jobs, runs and events `fll.server.runs`'.

This module must never write to the store; an unknown namespace, source,
dataset or version is a 404 in fll's one error shape, with Marquez's message.
"""
from __future__ import annotations

from fastapi import APIRouter, FastAPI, Query, Request

from ..store.lineage import LineageStore
from . import marquez_lineage, marquez_search, shared
from .marquez_model import (DEFAULT_LIMIT, Catalog, MarquezNotFound, dataset_facts,
                            dataset_json, namespace_json, paged, source_json, source_spans,
                            version_json)
from .paths import segment
from .responses import JSONResponse

router = APIRouter(prefix="/api/v1", tags=["marquez"])


def install(app: FastAPI) -> None:
    """Mount the routes. Their errors keep fll's one shape (``{"error", "status"}``,
    design/rest-api.md), with Marquez's messages (``Dataset 'x' not found.``);
    a Marquez client tells a failure by its status."""
    app.include_router(router)
    app.include_router(marquez_lineage.router)
    app.include_router(marquez_search.router)
    app.include_router(marquez_search.beta)


@router.get("/namespaces")
def list_namespaces(request: Request, limit: int = Query(DEFAULT_LIMIT),
                    offset: int = Query(0)) -> JSONResponse:
    """Every namespace of a dataset or of a job (a run's program)."""
    spans = Catalog(shared.reader(request)).namespaces()
    page = paged(list(spans.items()), limit, offset)
    return JSONResponse({"namespaces": [namespace_json(n, s) for n, s in page]})


@router.get("/sources")
def list_sources(request: Request, limit: int = Query(DEFAULT_LIMIT),
                 offset: int = Query(0)) -> JSONResponse:
    """Every dataset namespace, as Marquez's sources."""
    spans = source_spans(Catalog(shared.reader(request)))
    return JSONResponse({"sources": [source_json(n, s) for n, s in
                                     paged(list(spans.items()), limit, offset)]})


@router.get("/sources/{source}")
def get_source(request: Request, source: str) -> JSONResponse:
    name = segment(source)
    spans = source_spans(Catalog(shared.reader(request)))
    if name not in spans:
        raise MarquezNotFound(f"Source '{name}' not found.")
    return JSONResponse(source_json(name, spans[name]))


def _namespace_span(store: LineageStore, ns: str) -> tuple[int | None, int | None]:
    spans = Catalog(store).namespaces()
    if ns not in spans:
        raise MarquezNotFound(f"Namespace '{ns}' not found.")
    return spans[ns]


@router.get("/namespaces/{ns}")
def get_namespace(request: Request, ns: str) -> JSONResponse:
    ns = segment(ns)
    return JSONResponse(namespace_json(ns, _namespace_span(shared.reader(request), ns)))


@router.get("/namespaces/{ns}/datasets")
def list_datasets(request: Request, ns: str, limit: int = Query(DEFAULT_LIMIT),
                  offset: int = Query(0)) -> JSONResponse:
    """The namespace's datasets by name, paged (``totalCount``: all of them)."""
    ns = segment(ns)
    catalog = Catalog(shared.reader(request))
    eps = [ep for ep in catalog.datasets if ep.namespace == ns]
    if not eps and ns not in catalog.namespaces():  # a namespace of jobs only: no datasets
        raise MarquezNotFound(f"Namespace '{ns}' not found.")
    page = paged(sorted(eps, key=lambda e: e.name), limit, offset)
    return JSONResponse({"totalCount": len(eps),
                         "datasets": [dataset_json(catalog.datasets[ep]) for ep in page]})


@router.get("/namespaces/{ns}/datasets/{ds}")
def get_dataset(request: Request, ns: str, ds: str) -> JSONResponse:
    return JSONResponse(dataset_json(dataset_facts(shared.reader(request), segment(ns), segment(ds)),
                                     propagated=True))


@router.get("/namespaces/{ns}/datasets/{ds}/versions")
def list_dataset_versions(request: Request, ns: str, ds: str,
                          limit: int = Query(DEFAULT_LIMIT),
                          offset: int = Query(0)) -> JSONResponse:
    """One version per run that wrote the dataset, newest first, paged."""
    facts = dataset_facts(shared.reader(request), segment(ns), segment(ds))
    versions = facts.versions()
    return JSONResponse({"totalCount": len(versions),
                         "versions": [version_json(facts, v)
                                      for v in paged(versions, limit, offset)]})


@router.get("/namespaces/{ns}/datasets/{ds}/versions/{version}")
def get_dataset_version(request: Request, ns: str, ds: str, version: str) -> JSONResponse:
    facts = dataset_facts(shared.reader(request), segment(ns), segment(ds))
    wanted = segment(version)
    for v in facts.versions():
        if v.id == wanted:
            return JSONResponse(version_json(facts, v))
    raise MarquezNotFound(f"Dataset version '{wanted}' not found.")
