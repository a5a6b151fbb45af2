"""What one REST question reads from the store, read once.

`ReadView` stands in for a `LineageStore` for the length of ONE request: the
store reads a question repeats (the operation sets of a dataset over a range,
alias lookups, whether a dataset exists, its schema) are asked once and
remembered until the answer is sent. A multi-hop question asked the store for
the same dataset and range up to six times.

`SetMerges` is shared by the requests of a server process: what a dataset's
lineage is over a *list of operation sets* (the union of their summaries, the
merged transformation tags of a field). It is keyed by the checksums
themselves, and an operation set never changes under its checksum, so an
entry can never be stale: a write that adds a set to a range changes the list
the next question reads, which is then a different key. Only the list of
sets in a range is read per request.

This module must never keep a store answer that can change (a range's sets,
aliases, schemas) beyond one request, and never write to the store.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Hashable, Iterable

from ..model import DROPPED, EndPoint, EndPointField
from ..summaries import Summaries, summaries_of
from .cache import DEFAULT_CACHE_MB, CacheBudget, SizedLRU, sizeof_merged



class SetMerges:
    """A bounded LRU of values computed from immutable operation sets (see the
    module doc), bounded by ``size`` entries and ``budget`` bytes (each value's
    own estimate, `fll.store.cache.sizeof_merged`); thread-safe. A value is
    computed outside the lock: two threads missing the same key compute it
    twice, never a wrong one."""

    def __init__(self, size: int = 8192, budget: int = CacheBudget.of_mb(DEFAULT_CACHE_MB).merges):
        self._data: SizedLRU[Any] = SizedLRU(budget, sizeof_merged, size)

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        hit = self._data.get(key)
        if hit is not None:
            return hit
        value = compute()
        self._data.put(key, value)
        return value

    def __len__(self) -> int:
        return len(self._data)


_MISS = object()


class _Merged:
    """One dataset's lineage over one list of operation sets, one direction,
    each field's answer merged when first asked (a dataset of an all-to-all set
    of n fields answers n questions of n fields each: merging them all up front
    cost n x n).

    ``fields``: the dataset's destination (incoming) or source (outgoing)
    fields in any of the sets; `targets`: a field's union of sources
    (incoming) or destinations (outgoing) over the sets, the dropped marker
    left out, as `LineageStore.incoming`/`outgoing` answer. With one set the
    set's own answer is shared, not copied."""

    __slots__ = ("_sets", "_load", "_incoming", "fields", "_memo", "_lock", "footprint")

    def __init__(self, ep: EndPoint, direction: str, sets: tuple[str, ...],
                 load: Callable[[tuple[str, ...]], Iterable[Summaries]]):
        """``load``: the sets' summaries (the store's, from its cache): a merged
        answer keeps the checksums, never the sets, so the store's byte budget
        alone decides which decoded sets stay in memory."""
        self._sets, self._load = sets, load
        self._incoming = direction == "incoming"
        self.fields = frozenset(
            f for s in load(sets)
            for f in (s.destination_fields if self._incoming else s.source_fields)
            if f.endpoint == ep)
        self._memo: dict[EndPointField, frozenset[EndPointField]] = {}
        self._lock = threading.Lock()
        # bytes it holds (`fll.store.cache`): its fields and each answer kept
        self.footprint = 240 + 48 * len(self.fields)

    def targets(self, f: EndPointField) -> frozenset[EndPointField]:
        hit = self._memo.get(f)
        if hit is not None:
            return hit
        parts = [t for s in self._load(self._sets)
                 for t in [(s.incoming if self._incoming else s.outgoing).get(f)] if t]
        if len(parts) == 1 and DROPPED not in parts[0]:
            found = parts[0]
        else:
            found = frozenset().union(*parts) - {DROPPED}
        with self._lock:
            if len(self._memo) < _MEMO_FIELDS:
                self._memo[f] = found  # kept alive here even once its set is evicted
                self.footprint += 240 + 48 * len(found)
        return found


def _stored_summaries(store: Any, sets: tuple[str, ...]) -> Iterable[Summaries]:
    """The sets' summaries from the store (its cache of decoded sets)."""
    get = getattr(store, "summaries", None)
    if get is not None:
        return get(sets).values()
    return [summaries_of(store.operation_set(c)) for c in sets]


#: answers a `_Merged` keeps, per dataset, list of sets and direction
_MEMO_FIELDS = 4096


class ReadView:
    """A `LineageStore` for one request (see the module doc): the same answers,
    each store read done once. Anything it does not answer itself goes to the
    store unchanged."""

    def __init__(self, store: Any, merges: SetMerges):
        self.store = store
        self.merges = merges
        self._memo: dict[tuple, Any] = {}
        # datasets read ahead whose sets are not loaded yet, with the range
        self._unloaded: set[tuple[tuple[str, str], int, int, str]] = set()
        # whole ``S|`` rows read with level reads (None: the dataset has
        # none), from which `prefetch_schemas` answers any range
        self._schema_rows: dict[tuple[str, str], dict[str, bytes] | None] = {}
        self._along = False

    def schemas_along(self) -> None:
        """Read each dataset's ``S|`` row with the level read that reads it
        ahead, in the same call, where `Table.first_cells` reads whole rows
        anyway (HBase): `prefetch_schemas` of the datasets a walk reached then
        reads no ``S|`` row again."""
        self._along = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _once(self, key: tuple, compute: Callable[[], Any]) -> Any:
        hit = self._memo.get(key, _MISS)
        if hit is _MISS:
            hit = self._memo[key] = compute()
        return hit

    # -- reads remembered for the request -------------------------------------
    def checksums(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> list[str]:
        key = ("c", endpoint.namespace, endpoint.name, start, end, direction)
        return list(self._once(key, lambda: tuple(
            self.store.checksums(endpoint, start, end, direction))))

    def resolve_dataset(self, namespace: str, name: str) -> tuple[str, str]:
        return self._once(("r", namespace, name),
                          lambda: self.store.resolve_dataset(namespace, name))

    def aliases(self, namespace: str, name: str) -> list[tuple[str, str]]:
        return list(self._once(("a", namespace, name),
                               lambda: tuple(self.store.aliases(namespace, name))))

    def exists(self, endpoint: EndPoint) -> bool:
        return self._once(("e", endpoint.namespace, endpoint.name),
                          lambda: self.store.exists(endpoint))

    def schema(self, namespace: str, name: str, start_ms: int,
               end_ms: int) -> dict[str, str | None] | None:
        found = self._once(("s", namespace, name, start_ms, end_ms),
                           lambda: self.store.schema(namespace, name, start_ms, end_ms))
        return None if found is None else dict(found)

    def prefetch(self, endpoints: Iterable[EndPoint], start: int, end: int,
                 direction: str = "incoming", *, ahead: bool = False) -> None:
        """Read what a walk asks of every dataset of one hop at once: their
        names (`resolve_dataset`, `aliases`) and their operation sets in the
        range (`checksums`) in one store read (`LineageStore.read_level`), then
        the sets not cached in one multi-get. The answers are remembered for
        the request as if each had been asked alone; a dataset already read
        is not read again. A store without `read_level` is asked as before.

        With ``ahead`` (the walk goes on past these datasets), the datasets
        the sets lead to are read with the sets' shapes when those must be
        read (`LineageStore.summaries_reading_ahead`): the next hop then reads
        only their sets."""
        read_level = getattr(self.store, "read_level", None)
        if read_level is None:
            return
        asked = list(dict.fromkeys((e.namespace, e.name) for e in endpoints))
        todo = [d for d in asked if ("c", d[0], d[1], start, end, direction) not in self._memo]
        if todo:
            self._remember_level(todo, read_level(todo, start, end, direction,
                                                  schemas=self._along), start, end, direction)
        early = [d for d in asked if (d, start, end, direction) in self._unloaded]
        self._unloaded.difference_update((d, start, end, direction) for d in early)
        load = todo + early
        if not load:
            return
        sets = {c for d in load for c in self._memo[("c", d[0], d[1], start, end, direction)]}
        reading = getattr(self.store, "summaries_reading_ahead", None)
        if reading is None or not ahead:
            self.summaries(sets)
            return
        _, more, level = reading(sets, start, end, direction, lambda d: (
            "c", d[0], d[1], start, end, direction) in self._memo, schemas=self._along)
        if more:
            self._remember_level(more, level, start, end, direction)
            self._unloaded.update((d, start, end, direction) for d in more)

    def _remember_level(self, datasets: list[tuple[str, str]], level: Any, start: int,
                        end: int, direction: str) -> None:
        """A `LineageStore.read_level` answer, as if each dataset had been asked alone."""
        self._keep_schema_rows(level)
        for d in datasets:
            ns, name = d
            self._memo.setdefault(("r", ns, name), level.resolved[d])
            self._memo.setdefault(("a", ns, name), tuple(level.aliases[d]))
            self._memo[("c", ns, name, start, end, direction)] = tuple(level.checksums[d])

    def _keep_schema_rows(self, level: Any) -> None:
        """The ``S|`` rows a level read brought (`Level.schema_rows`), for `prefetch_schemas`."""
        for d, row in level.schema_rows.items():
            self._schema_rows.setdefault(d, row)

    def prefetch_names(self, datasets: Iterable[tuple[str, str]], start: int, end: int,
                       walk: tuple[int, int] | None = None, *, exists: bool = True) -> None:
        """What a question naming a dataset asks of each name it may mean, in
        one store read (`LineageStore.read_level_both`): the dataset it stands
        for, its aliases, its operation sets both ways in the range (its
        fields), and so whether a run ever touched it (sets found: yes), then
        the sets not cached in one multi-get; remembered for the request.
        Their ``S|`` rows are read in the same store read where the table
        reads whole rows for `Table.first_cells` (`prefetch_schemas`).

        ``walk``: the range of the upstream walk the question goes on to (its
        incoming sets over that range are read in the same store read,
        `LineageStore.read_level_views`, and what they lead to with the sets'
        shapes, as `prefetch` reads ahead). ``exists``: ask at once whether
        the names no set was found for are known otherwise (a run outside the
        range); without, `exists` asks it of a name when asked."""
        read_both = getattr(self.store, "read_level_both", None)
        todo = [d for d in dict.fromkeys(datasets)
                if ("c", d[0], d[1], start, end, "incoming") not in self._memo
                or ("c", d[0], d[1], start, end, "outgoing") not in self._memo]
        if read_both is None or not todo:
            return
        views = getattr(self.store, "read_level_views", None)
        reading = getattr(self.store, "summaries_reading_ahead", None)
        if views is None:
            walk = None
            level, outgoing = read_both(todo, start, end)
        else:  # their schemas too: a question naming a dataset asks them next
            wanted = [("incoming", start, end), ("outgoing", start, end)]
            if walk is not None and reading is not None and walk != (start, end):
                wanted.append(("incoming", *walk))
            level, others = views(todo, wanted, schemas=True)
            outgoing = others[0]
            walk_sets = others[1] if len(others) > 1 else level.checksums
            if reading is None:
                walk = None
            self._keep_schema_rows(level)
        for d in todo:
            ns, name = d
            self._memo.setdefault(("r", ns, name), level.resolved[d])
            self._memo.setdefault(("a", ns, name), tuple(level.aliases[d]))
            self._memo[("c", ns, name, start, end, "incoming")] = tuple(level.checksums[d])
            self._memo[("c", ns, name, start, end, "outgoing")] = tuple(outgoing[d])
            if walk is not None:
                self._memo[("c", ns, name, walk[0], walk[1], "incoming")] = \
                    tuple(walk_sets[d])
            if level.checksums[d] or outgoing[d]:  # a run in the range: it exists
                self._memo.setdefault(("e", ns, name), True)
        sets = {c for d in todo for c in (*level.checksums[d], *outgoing[d])}
        if walk is None or reading is None:
            self.summaries(sets)
        else:
            ws, we = walk
            leads = {c for d in todo for c in walk_sets[d]}
            _, more, ahead = reading(sets | leads, ws, we, "incoming", lambda d: (
                "c", d[0], d[1], ws, we, "incoming") in self._memo, leads,
                schemas=self._along)
            if more:
                self._remember_level(more, ahead, ws, we, "incoming")
                self._unloaded.update((d, ws, we, "incoming") for d in more)
        # the others may still have runs outside the range: asked all at once
        unsure = [EndPoint(*d) for d in todo if ("e", *d) not in self._memo]
        many = getattr(self.store, "exists_many", None)
        if unsure and many is not None and exists:
            for e, found in many(unsure).items():
                self._memo[("e", e.namespace, e.name)] = found

    def prefetch_schemas(self, datasets: Iterable[tuple[str, str]], start_ms: int,
                         end_ms: int) -> None:
        """`schema` of several datasets at once (`LineageStore.schemas`),
        remembered for the request as if each had been asked alone."""
        todo = [d for d in dict.fromkeys(datasets)
                if ("s", d[0], d[1], start_ms, end_ms) not in self._memo]
        many = getattr(self.store, "schemas", None)
        if many is None or not todo:
            return
        read = [d for d in todo if d in self._schema_rows]
        found = self.store.schemas_in_rows(
            {d: self._schema_rows[d] for d in read}, start_ms, end_ms) if read else {}
        rest = [d for d in todo if d not in self._schema_rows]
        if rest:
            found.update(many(rest, start_ms, end_ms))
        for (ns, name), schema in found.items():
            self._memo[("s", ns, name, start_ms, end_ms)] = schema

    # -- answers merged over the range's operation sets ------------------------
    def sets(self, endpoint: EndPoint, start: int, end: int, direction: str) -> tuple[str, ...]:
        """The range's operation sets as a cache key (sorted, as the store gives them)."""
        return tuple(self.checksums(endpoint, start, end, direction))

    def summaries(self, checksums: Iterable[str]) -> dict[str, Summaries]:
        wanted = list(checksums)
        get = getattr(self.store, "summaries", None)
        if get is not None:
            return get(wanted)
        return {c: summaries_of(self.store.operation_set(c)) for c in wanted}

    def _merged(self, endpoint: EndPoint, start: int, end: int, direction: str) -> _Merged:
        sets = self.sets(endpoint, start, end, direction)
        plain = (endpoint.namespace, endpoint.name)
        # the merged answer outlives this request: it loads from the store
        # itself (its cache), never through this view
        return self.merges.get(("merged", plain, direction, sets), lambda: _Merged(
            endpoint, direction, sets, functools.partial(_stored_summaries, self.store)))

    def fields(self, endpoint: EndPoint, start: int, end: int,
               prefix: str | None = None) -> list[str]:
        names = {f.field for d in ("incoming", "outgoing")
                 for f in self._merged(endpoint, start, end, d).fields}
        if prefix:
            low = prefix.lower()
            names = {n for n in names if n.lower().startswith(low)}
        return sorted(names)

    def incoming(self, efield: EndPointField, start: int, end: int) -> set[EndPointField]:
        return set(self._merged(efield.endpoint, start, end, "incoming").targets(efield))

    def outgoing(self, efield: EndPointField, start: int, end: int, *,
                 include_dropped: bool = False) -> set[EndPointField]:
        if include_dropped:
            return self.store.outgoing(efield, start, end, include_dropped=True)
        return set(self._merged(efield.endpoint, start, end, "outgoing").targets(efield))

    def field_map(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> dict[EndPointField, set[EndPointField]]:
        merged = self._merged(endpoint, start, end, direction)
        return {f: set(merged.targets(f)) for f in merged.fields}
