"""``fll tag`` and ``fll diff``: classification tags that follow column lineage,
and how a field's lineage changed between two time ranges (`fll.govern`).

Loaded lazily by the ``fll`` group (`fll.cli.root`); the global options
(``--store``, ``--verbose``) and every error's one line and exit code are the
group's.
"""
from __future__ import annotations

import contextlib
import gc
import getpass
import json
import os
from typing import Iterator

import click

from .common import (FllGroup, State, echo_json, end_option, format_option, pass_state,
                     start_option, time_range)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a walk builds 100k acyclic rows (each
    collection would only rescan them); the collector's state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _who(by: str | None) -> str:
    if by:
        return by
    try:
        return os.environ.get("FLL_USER") or getpass.getuser()
    except (KeyError, OSError):
        return ""


@click.group(cls=FllGroup)
def tag() -> None:
    """Classification tags (PII…) put on fields, and where they reach along lineage.

    A tag follows DIRECT edges downstream: it passes IDENTITY and
    TRANSFORMATION, and stops at AGGREGATION and at masked edges (hashes,
    mask(), counts) unless its policy lets it pass them (fll tag define
    --pass aggregation / --pass masking). INDIRECT edges never carry it.
    """


def _target(state: State, ref: str, on_dataset: bool):
    from ..names import resolve_dataset, resolve_field

    store = state.store()
    if on_dataset:
        ep = resolve_dataset(store, ref, parameter="NS:DATASET")
        return store, ep.namespace, ep.name, ""
    f = resolve_field(store, ref, parameter="NS:DATASET:FIELD")
    return store, f.endpoint.namespace, f.endpoint.name, f.field


@tag.command("add")
@click.argument("ref", metavar="NS:DATASET:FIELD")
@click.argument("tag_name", metavar="TAG")
@click.option("--on-dataset", is_flag=True, help="REF is NS:DATASET: tag the dataset itself "
              "(a dataset's tag is shown with it; only field tags propagate).")
@click.option("--by", metavar="WHO", help="Who tags (default: $FLL_USER, else the login).")
@pass_state
def add(state: State, ref: str, tag_name: str, on_dataset: bool, by: str | None) -> None:
    """Put TAG on a field (or a dataset); the tag is defined if new. Kept with
    who and when; tagging twice keeps the first."""
    from ..store.tags import Tags, tag_name as norm

    store, ns, name, fld = _target(state, ref, on_dataset)
    new = Tags(store.table).add(ns, name, fld, tag_name, _who(by))
    where = f"{ns}:{name}" + (f":{fld}" if fld else "")
    click.echo(f"{'tagged' if new else 'already tagged'} {where} {norm(tag_name)}")


@tag.command("remove")
@click.argument("ref", metavar="NS:DATASET:FIELD")
@click.argument("tag_name", metavar="TAG")
@click.option("--on-dataset", is_flag=True, help="REF is NS:DATASET.")
@pass_state
def remove(state: State, ref: str, tag_name: str, on_dataset: bool) -> None:
    """Take TAG off a field (or a dataset); exit 1 (not found) if it was not there."""
    from ..errors import NotFound
    from ..store.tags import Tags, tag_name as norm

    store, ns, name, fld = _target(state, ref, on_dataset)
    where = f"{ns}:{name}" + (f":{fld}" if fld else "")
    if not Tags(store.table).remove(ns, name, fld, tag_name):
        raise NotFound(f"{where} has no tag {norm(tag_name)}")
    click.echo(f"removed {norm(tag_name)} from {where}")


@tag.command("define")
@click.argument("tag_name", metavar="TAG")
@click.option("--description", metavar="TEXT", help="What the tag means.")
@click.option("--pass", "passes", multiple=True, type=click.Choice(["aggregation", "masking"]),
              help="Let the tag pass AGGREGATION (sums, counts…) or masked edges (hashes, "
              "mask()); repeat for both. Given, it replaces the policy.")
@click.option("--stop-all", is_flag=True, help="Reset the policy: stop at aggregation and "
              "masking (the default).")
@click.option("--by", metavar="WHO", help="Who defines it (default: $FLL_USER, else the login).")
@format_option("text", "json")
@pass_state
def define(state: State, tag_name: str, description: str | None, passes: tuple[str, ...],
           stop_all: bool, by: str | None, fmt: str) -> None:
    """Create a tag or change its description or propagation policy."""
    from ..errors import BadRequest
    from ..store.tags import Tags

    if stop_all and passes:
        raise BadRequest("--stop-all and --pass contradict each other", "--stop-all")
    policy = [] if stop_all else (list(passes) if passes else None)
    found = Tags(state.store(create=True).table).define(tag_name, description, policy,
                                                        _who(by))
    if fmt == "json":
        echo_json(found.to_dict())
        return
    click.echo(_def_line(found))


def _def_line(t) -> str:
    passes = ", ".join(sorted(p.lower() for p in t.passes)) or "nothing"
    return f"{t.name}: passes identity, transformation and {passes}" + \
        (f" - {t.description}" if t.description else "")


@tag.command("list")
@format_option("text", "json")
@pass_state
def list_tags(state: State, fmt: str) -> None:
    """Every tag, its policy, and where it is put."""
    from ..store.tags import Tags

    tags = Tags(state.store().table)
    defs = tags.all()
    placed = tags.assignments()
    if fmt == "json":
        echo_json({"tags": [{**t.to_dict(),
                              "taggedAt": [a.to_dict() for a in placed if a.tag == t.name]}
                             for t in defs]})
        return
    for t in defs:
        click.echo(_def_line(t))
        for a in placed:
            if a.tag == t.name:
                where = f"{a.namespace}:{a.name}" + (f":{a.field}" if a.field else "")
                click.echo(f"  {where} (by {a.by or '?'})")


@tag.command("show")
@click.argument("tag_name", metavar="TAG")
@start_option
@end_option
@click.option("--max-hops", type=click.IntRange(min=1), default=100, show_default=True,
              help="Hops downstream before the answer is cut (and says so).")
@format_option("text", "json")
@pass_state
def show(state: State, tag_name: str, start: str | None, end: str | None, max_hops: int,
         fmt: str) -> None:
    """Every field TAG reaches through the lineage of [start, end), and the fields
    where it was stopped (with the transformation that stopped it).

    json: one array, an object per field: field, direct, origins, path,
    stopped (and, when stopped, stoppedAt and transformations)."""
    from .. import govern
    from ..store.reads import ReadView, SetMerges

    store = ReadView(state.store(), SetMerges())
    lo, hi = time_range(start, end)
    with _gc_paused():
        reach = govern.propagate(store, tag_name, lo, hi, max_hops=max_hops)
        rows = reach.fields_json()
    if reach.truncated:
        click.echo(f"fll tag show: warning: cut after {max_hops} hops; more fields may carry "
                   f"{reach.tag.name} (raise --max-hops)", err=True)
    if fmt == "json":
        click.echo("[" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "]")
        return
    carried = [r for r in rows if not r["stopped"]]
    stopped = [r for r in rows if r["stopped"]]
    lines = [f"{reach.tag.name}: {len(carried)} field(s) carry it, stopped at {len(stopped)}"]
    for r in carried:
        how = "tagged" if r["direct"] else "from " + ", ".join(r["origins"])
        lines.append(f"  {r['field']}  ({how})")
    for r in stopped:
        what = ", ".join("/".join(filter(None, (t["type"], t["subtype"])))
                         + ("+masked" if t["masking"] else "") for t in r["transformations"])
        lines.append(f"  stopped: {r['field']}  ({what} of {r['stoppedAt']})")
    click.echo("\n".join(lines))


@click.command()
@click.argument("ref", metavar="NS:DATASET[:FIELD]")
@click.option("--before", required=True, metavar="START..END",
              help="The earlier range, e.g. now-2d..now-1d (each end: epoch seconds, "
              "now-7d, ISO 8601; an empty end: 0 or now).")
@click.option("--after", required=True, metavar="START..END", help="The later range.")
@click.option("--depth", type=click.IntRange(min=1, max=100), default=1, show_default=True,
              help="Field hops up and down from REF.")
@format_option("text", "json")
@pass_state
def diff(state: State, ref: str, before: str, after: str, depth: int, fmt: str) -> None:
    """How the lineage around a field (or every field of a dataset) changed between
    two ranges: edges added, removed, and with other transformations.

    json: {"added": [edge…], "removed": [edge…], "changed": [{"edge", "before",
    "after"}]}, an edge being {"source", "destination", "transformations"}."""
    from .. import govern
    from ..errors import BadRequest, NotFound
    from ..names import resolve_dataset, resolve_field
    from ..store.reads import ReadView, SetMerges

    store = ReadView(state.store(), SetMerges())
    b = govern.parse_span(before, "--before")
    a = govern.parse_span(after, "--after")
    try:
        roots = [resolve_field(store, ref, parameter="NS:DATASET[:FIELD]")]
    except (NotFound, BadRequest) as field_error:
        try:  # not a field: a dataset, every field of it in either range
            ep = resolve_dataset(store, ref, parameter="NS:DATASET[:FIELD]")
        except (NotFound, BadRequest) as dataset_error:
            # too few parts for a field: the dataset's error says what is wrong
            raise (dataset_error if isinstance(field_error, BadRequest)
                   else field_error) from None
        roots = govern.dataset_roots(store, ep, [b, a])
    with _gc_paused():
        answer = govern.diff(store, roots, b, a, depth)
    if fmt == "json":
        echo_json(answer)
    else:
        click.echo(govern.diff_text(answer), nl=False)
