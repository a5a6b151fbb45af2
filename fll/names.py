"""Naming a dataset or a field on the command line when names are URIs.

OpenLineage namespaces are ``scheme://authority`` (``postgres://db:5432``,
``duckdb:///data/shop.duckdb``), so the compact ``NS:NAME`` / ``NS:NAME:FIELD``
forms cannot be split at a fixed colon. This module resolves them the way the
REST ``nodeId`` parser does: every split at a colon is a candidate, and the
candidates the store knows (a run read or wrote the dataset, an event
reported its schema, or it is an alias of one) are kept. One known candidate
is the answer; several are ambiguous and the error lists them with the
explicit options (``--namespace``, ``--dataset``, ``--field``) that always
work; none is "not found", naming the first-colon reading.

It also names a storage location the way OpenLineage does (`dataset_name`,
`location_name`), so every producer (a pipeline's file source or sink,
`track()`, a Spark plan or listener event) gives one dataset one name.

This module must never write to a store and never guess between two known
datasets.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .errors import BadRequest, NotFound
from .model import EndPoint, EndPointField
from .rowkeys import MAX_TIME

__all__ = ["dataset_name", "location_name", "resolve_dataset", "resolve_field", "splits"]


def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a storage location, the way the OpenLineage Spark integration
    names it: ``file:/a/b`` → ``("file", "/a/b")``; ``hdfs://nn:8020/a`` →
    ``("hdfs://nn:8020", "/a")``; ``s3a://bucket/k`` → ``("s3://bucket", "k")``."""
    parts = urlsplit(location)
    scheme = (parts.scheme or "file").lower()
    path = parts.path or "/"
    if scheme == "file" or len(scheme) == 1:  # a bare path, or a Windows drive letter
        return "file", path if scheme == "file" else location
    if scheme in ("s3", "s3a", "s3n"):
        return f"s3://{parts.netloc}", path.lstrip("/")
    if scheme == "gs":
        return f"gs://{parts.netloc}", path.lstrip("/")
    if path != "/" and len(path) > 1:
        path = path.rstrip("/")
    return f"{scheme}://{parts.netloc}", path


_GLOB = set("*?[{")


def location_name(path: str, base_dir: str | None = None) -> tuple[str, str]:
    """(namespace, name) of a file or directory as the OpenLineage Spark integration
    (and `track()`) names it: the scheme and authority are the namespace
    (``hdfs://nn:8020``, ``s3://bucket``), the path the name; a local path
    (``file:``, or none) is ``file`` + its absolute, normalised path, a relative
    one taken against ``base_dir`` (else the working directory). A glob names
    the directory it lists (``/in/day=*/x.csv`` → ``/in``), since what it
    matches changes from run to run."""
    import os

    if not isinstance(path, str) or not path.strip():
        raise BadRequest(f"a dataset path must be a non-empty string, got {path!r}", "path")
    local = path
    if path.startswith("file:"):
        local = path[5:]
        if local.startswith("//"):  # file:///a (empty authority) or file://localhost/a
            local = "/" + local[2:].partition("/")[2]
    elif "://" in path:
        scheme, _, rest = path.partition("://")
        authority, slash, key = rest.partition("/")
        key = _glob_dir(key) if slash else key
        return dataset_name(f"{scheme}://{authority}/{key}" if key else
                            f"{scheme}://{authority}")
    if not os.path.isabs(local):
        local = os.path.join(base_dir or os.getcwd(), local)
    local = _glob_dir(os.path.normpath(local)) or "/"
    return "file", local


def _glob_dir(path: str) -> str:
    """``path`` up to (not including) its first component holding a glob character."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _GLOB & set(part):
            return "/".join(parts[:i])
    return path


def splits(text: str, parts: int) -> list[list[str]]:
    """Every cut of ``text`` at colons into ``parts`` non-empty pieces, in order of
    the first cut, then the second."""
    colons = [i for i, c in enumerate(text) if c == ":"]
    if parts == 2:
        return [[text[:i], text[i + 1:]] for i in colons if 0 < i < len(text) - 1]
    return [[text[:a], text[a + 1:b], text[b + 1:]]
            for a in colons for b in colons if 0 < a < b - 1 and b < len(text) - 1]


def suggest(name: str, known: list[str], what: str = "known") -> str:
    """`` (did you mean: a, b?)`` from the closest names, else a few known ones."""
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if not close:
        lowered = name.lower()
        close = [k for k in known if lowered in k.lower() or k.lower() in lowered][:3]
    if close:
        return f" (did you mean: {', '.join(close)}?)"
    if not known:
        return ""
    return f" ({what}: {', '.join(known[:10])}{', …' if len(known) > 10 else ''})"


#: datasets whose aliases are offered as suggestions (one scan each, on an error path)
_ALIAS_SUGGESTIONS = 500


def _dataset_names(store: Any) -> list[str]:
    """Every dataset's name, and the aliases (reference names) of the first few."""
    found = store.datasets(with_schemas=True)
    names = [f"{d.namespace}:{d.name}" for d in found]
    aliases = getattr(store, "aliases", None)
    if aliases is not None:
        names += [f"{a}:{b}" for d in found[:_ALIAS_SUGGESTIONS]
                  for a, b in aliases(d.namespace, d.name)]
    return names


def _known(store: Any, ep: EndPoint) -> EndPoint | None:
    """The dataset an alias stands for (a file's ``referenceName`` → its location),
    else ``ep`` itself if the store knows it, else None. A name that is both an
    alias and holds runs of its own (recorded before the alias) is answered as
    the alias's dataset: readers take both names' runs (`fll.render.Names`)."""
    target = EndPoint(*store.resolve_dataset(ep.namespace, ep.name))
    if target != ep and _has_data(store, target):
        return target
    return ep if _has_data(store, ep) else None


def _has_data(store: Any, ep: EndPoint) -> bool:
    return store.exists(ep) or store.schema(ep.namespace, ep.name, 0, MAX_TIME) is not None


def _fields(store: Any, ep: EndPoint) -> set[str]:
    names = set(store.fields(ep, 0, MAX_TIME))
    names.update(store.schema(ep.namespace, ep.name, 0, MAX_TIME) or {})
    return names


def _explicit(namespace: str | None, dataset: str | None, parameter: str) -> EndPoint | None:
    if namespace is None and dataset is None:
        return None
    if not namespace or not dataset:
        raise BadRequest("--namespace and --dataset go together: give both (or the compact "
                         f"{parameter} form alone)", "namespace" if not namespace else "dataset")
    return EndPoint(namespace, dataset)


def resolve_dataset(store: Any, text: str | None, namespace: str | None = None,
                    dataset: str | None = None, parameter: str = "NS:NAME") -> EndPoint:
    """The dataset named by the compact ``NS:NAME`` form or by ``--namespace`` and
    ``--dataset``; NotFound when the store does not know it."""
    ep = _explicit(namespace, dataset, parameter)
    if ep is not None:
        if text:
            raise BadRequest(f"give the dataset either as {parameter} or with --namespace/"
                             f"--dataset, not both", parameter)
        found = _known(store, ep)
        if found is None:
            raise NotFound(f"dataset {ep.namespace}:{ep.name} not found (namespace "
                           f"{ep.namespace!r}, dataset {ep.name!r})"
                           + suggest(f"{ep.namespace}:{ep.name}", _dataset_names(store),
                                     "datasets"))
        return found
    if not text:
        raise BadRequest(f"name a dataset: {parameter}, or --namespace NS --dataset NAME",
                         parameter)
    candidates = [EndPoint(a, b) for a, b in splits(text, 2)]
    if not candidates:
        raise BadRequest(f"{parameter} {text!r} must look like NAMESPACE:DATASET "
                         f"(or use --namespace and --dataset)", parameter)
    known: dict[EndPoint, None] = {}
    for c in candidates:
        hit = _known(store, c)
        if hit is not None:
            known.setdefault(hit)
    if len(known) > 1:
        raise BadRequest(f"{parameter} {text!r} is ambiguous: it names "
                         + " and ".join(f"--namespace {e.namespace!r} --dataset {e.name!r}"
                                        for e in known)
                         + "; give one with --namespace and --dataset", parameter)
    if not known:
        first = candidates[0]
        raise NotFound(f"dataset {text} not found (no split at ':' names a known dataset; "
                       f"e.g. namespace {first.namespace!r}, dataset {first.name!r}; "
                       f"--namespace/--dataset name one whole)"
                       + suggest(text, _dataset_names(store), "datasets"))
    return next(iter(known))


def resolve_field(store: Any, text: str | None, namespace: str | None = None,
                  dataset: str | None = None, field: str | None = None,
                  parameter: str = "NS:NAME:FIELD") -> EndPointField:
    """The field named by ``NS:NAME:FIELD`` or by ``--namespace/--dataset/--field``."""
    if namespace is not None or dataset is not None or field is not None:
        if text:
            raise BadRequest(f"give the field either as {parameter} or with --namespace/"
                             f"--dataset/--field, not both", parameter)
        if not field:
            raise BadRequest("--field is required with --namespace and --dataset", "field")
        ep = resolve_dataset(store, None, namespace, dataset, parameter)
        return _require_field(store, ep, field)
    if not text:
        raise BadRequest(f"name a field: {parameter}, or --namespace NS --dataset NAME "
                         f"--field F", parameter)
    cuts = splits(text, 3)
    if not cuts:
        raise BadRequest(f"{parameter} {text!r} must look like NAMESPACE:DATASET:FIELD "
                         f"(or use --namespace, --dataset and --field)", parameter)
    with_dataset: list[tuple[EndPoint, str]] = []
    for a, b, f in cuts:
        hit = _known(store, EndPoint(a, b))
        if hit is not None:
            with_dataset.append((hit, f))
    if not with_dataset:
        first = cuts[0]
        raise NotFound(f"dataset {first[0]}:{first[1]} not found (no split of {text!r} at "
                       f"':' names a known dataset; --namespace/--dataset/--field name "
                       f"one whole)"
                       + suggest(f"{first[0]}:{first[1]}", _dataset_names(store), "datasets"))
    exact = list(dict.fromkeys(EndPointField(ep, f) for ep, f in with_dataset
                               if f in _fields(store, ep)))
    if len(exact) > 1:
        raise BadRequest(f"{parameter} {text!r} is ambiguous: it names "
                         + " and ".join(f"--namespace {e.endpoint.namespace!r} --dataset "
                                        f"{e.endpoint.name!r} --field {e.field!r}"
                                        for e in exact)
                         + "; give one with --namespace, --dataset and --field", parameter)
    if exact:
        return exact[0]
    ep, f = with_dataset[-1]  # the longest dataset reading: the field is the last part
    return _require_field(store, ep, f)


def _require_field(store: Any, ep: EndPoint, field: str) -> EndPointField:
    known = sorted(_fields(store, ep))
    if field not in known:
        raise NotFound(f"field {field!r} not found in dataset {ep}" + suggest(field, known))
    return EndPointField(ep, field)
