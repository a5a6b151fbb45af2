"""What a walk reads of one hop: every dataset's names and operation sets in
the round trips of one store read (`Levels.read_level`), however many
datasets the hop touches."""
from __future__ import annotations

from typing import Callable, Collection, Iterable, NamedTuple, Sequence

from .. import rowkeys as rk
from ..summaries import Summaries
from .base import Span
from .datarows import SHAPED, _Cached, shape_ref
from .layout import _target, alias_candidates, confirmed_aliases
from .reader import Reader


#: datasets a level reads ahead at most: about as many scanners as one
#: pipelined burst holds on HBase (`fll.store.hbase_pipe.MAX_BURST`)
AHEAD_MAX = 100


#: what a level read reads of each dataset: a direction and a range ``[start, end)``
View = tuple[str, int, int]


class Level(NamedTuple):
    """`LineageStore.read_level`'s answer, by ``(namespace, name)``."""

    resolved: dict[tuple[str, str], tuple[str, str]]  # as resolve_dataset answers
    aliases: dict[tuple[str, str], list[tuple[str, str]]]  # as aliases answers
    checksums: dict[tuple[str, str], list[str]]  # as checksums answers
    #: with ``schemas`` (on a table whose ``first_cells`` reads whole rows):
    #: each dataset's whole ``S|`` row (None: none), for `Datasets.schemas_in_rows`
    schema_rows: dict[tuple[str, str], dict[str, bytes] | None] = {}


class Levels(Reader):
    """The level reads of a `LineageStore` (see the module doc)."""

    def read_level(self, datasets: Iterable[tuple[str, str]], start: int, end: int,
                   direction: str = "incoming", *, schemas: bool = False) -> "Level":
        """What a walk needs of every dataset of one hop, in the round trips of
        one read (`Table.read_span_groups`): the dataset each name stands for
        (`resolve_dataset`), the aliases naming it (`aliases`), and its
        operation sets in the range (`checksums`). Every dataset's names are
        two keys (its alias row and its ``A|`` row); the top buckets of a
        range over more than 64 of them are one span per dataset, or, where
        a span takes a scanner (HBase), keys read with the directory row
        (`Reader._index_plan`); a second read confirms any aliases found and
        reads any top bucket the directory lists beside those read.
        A dataset that turns out to be an alias is answered under its own
        name here; the walk reads its target as it reads any other dataset.
        ``schemas``: their ``S|`` rows too (`Level.schema_rows`)."""
        return self._read_level(list(dict.fromkeys(datasets)), ((direction, start, end),),
                                schemas=schemas)[0]

    def read_level_both(self, datasets: Iterable[tuple[str, str]], start: int, end: int
                        ) -> tuple["Level", dict[tuple[str, str], list[str]]]:
        """`read_level` of the incoming sets, and the outgoing sets of the same
        datasets (as `checksums` answers them), in the round trips of one: what
        a question naming a dataset first asks of it (its fields are those of
        both directions)."""
        level, (outgoing,) = self.read_level_views(
            datasets, (("incoming", start, end), ("outgoing", start, end)))
        return level, outgoing

    def read_level_views(self, datasets: Iterable[tuple[str, str]], views: Sequence[View],
                         *, schemas: bool = False
                         ) -> tuple["Level", list[dict[tuple[str, str], list[str]]]]:
        """`read_level` of the first view (a direction and a range), and the
        sets of the same datasets in each other view (as `checksums` answers
        them), in the round trips of one: what a question naming a dataset
        first asks of it (its fields are those of both directions over all
        time; its walk, the sets of the walk's range). ``schemas``: their
        ``S|`` rows too, in the same call, where `Table.first_cells` reads
        whole rows (`Level.schema_rows`; elsewhere none are read)."""
        level, others, _ = self._read_level(list(dict.fromkeys(datasets)), views,
                                            schemas=schemas)
        return level, others

    def _read_level(self, ds: list[tuple[str, str]], views: Sequence[View],
                    also: Sequence[bytes] = (), *, schemas: bool = False
                    ) -> tuple["Level", list[dict[tuple[str, str], list[str]]],
                               dict[bytes, dict[str, bytes]]]:
        """The level read of ``ds`` in each view (the first's sets in the
        `Level`, the others' apart), and the rows of the keys ``also``, read
        in the same call (`Table.read_span_groups`); with ``schemas``, the
        datasets' ``S|`` rows among them where the table's ``first_cells``
        reads whole rows (``first_cells_reads_rows``)."""
        if not ds:
            return (Level({}, {}, {}), [{} for _ in views[1:]],
                    self.table.get_many(list(also)) if also else {})
        # where `first_cells` would read the whole rows anyway (HBase); elsewhere
        # it reads one cell of each, far less than a row with a cell per run
        schemas = schemas and bool(getattr(self.table, "first_cells_reads_rows", False))
        schema_keys = [rk.schemas(ns, n) for ns, n in ds] if schemas else []
        also = [*also, *schema_keys]
        alias_keys = [rk.alias(ns, n) for ns, n in ds]
        reverse_keys = [rk.aliased_by(ns, n) for ns, n in ds]
        plans = [self._index_plan(ns, n, start, end, direction, top_span=True)
                 for direction, start, end in views for ns, n in ds]
        *reads, extra = self.table.read_span_groups(
            [([Span(k, k + b"\x00", (k,)) for k in alias_keys + reverse_keys], (), ())]
            + [p.group for p in plans]
            + [([Span(k, k + b"\x00", (k,)) for k in also], (), ())])
        names = reads[0].rows
        resolved = {}
        for d, key in zip(ds, alias_keys, strict=True):
            row = names.get(key)
            # b"": a turned pair being deleted, as `resolve_dataset` reads it
            resolved[d] = _target(self.url, key, row["t"]) if row and row.get("t") else d
        candidates = {d: alias_candidates(self.url, key, names.get(key))
                      for d, key in zip(ds, reverse_keys, strict=True)}
        # the aliases found are confirmed in one more call (none without)
        answers, rows = self._index_answers_and_rows(
            plans, reads[1:], sorted({rk.alias(*a) for c in candidates.values() for a in c}))
        named = confirmed_aliases(candidates, rows)
        per_view = [dict(zip(ds, answers[i:i + len(ds)], strict=True))
                    for i in range(0, len(answers), len(ds))]
        rows = extra.rows
        schema_rows = {d: rows.pop(k, None) for d, k in zip(ds, schema_keys, strict=True)} \
            if schemas else {}
        return Level(resolved, named, per_view[0], schema_rows), per_view[1:], rows

    def summaries_reading_ahead(
            self, checksums: Iterable[str], start: int, end: int, direction: str,
            known: Callable[[tuple[str, str]], bool], leads: Collection[str] | None = None,
            *, schemas: bool = False
    ) -> tuple[dict[str, Summaries], list[tuple[str, str]], "Level"]:
        """`summaries` of one level's sets, and `read_level` of the datasets
        the next level may reach: those the sets read (incoming) or write
        (outgoing), ``known`` ones left out. The next level is read only in a
        call the sets need anyway, the shapes of those not cached (with them,
        in one `Table.read_span_groups`: a walk's level then costs its sets,
        and their shapes with the next level's index rows); with every shape
        cached, nothing is read ahead (the second answer is empty).
        ``leads``: the sets whose datasets are read ahead (default: all);
        ``schemas``: their ``S|`` rows too (`Level.schema_rows`)."""
        wanted = list(dict.fromkeys(checksums))
        found: dict[str, _Cached] = dict(self._cache.get_many(wanted))  # type: ignore[arg-type]
        missing = [c for c in wanted if c not in found]
        rows = self.table.get_many([rk.data(c) for c in missing]) if missing else {}
        shapes, unread = self._cached_shapes(rows.values())
        ahead: list[tuple[str, str]] = []
        level = Level({}, {}, {})
        if unread:
            # the sets whole in their rows first: what they lead to is known
            for c in missing:
                row = rows.get(rk.data(c))
                if row is not None and SHAPED not in row:
                    found[c] = cached = self._decode(c, row, shapes)
                    self._remember(c, cached)
            leading = wanted if leads is None else [c for c in wanted if c in leads]
            ahead = self._next_datasets(
                [found[c] for c in leading if c in found],
                [r for c in leading for r in [rows.get(rk.data(c))] if r and SHAPED in r],
                direction, known)
            level, _, got = self._read_level(ahead, ((direction, start, end),),
                                             sorted(rk.shape(c) for c in unread),
                                             schemas=schemas)
            self._keep_shapes(unread, got, shapes)
        for c in missing:
            if c not in found:
                cached = self._decode(c, rows.get(rk.data(c)), shapes)
                self._remember(c, cached)
                found[c] = cached
        return {c: found[c].summaries for c in wanted}, ahead, level

    def _next_datasets(self, cached: Iterable[_Cached], shaped: Iterable[dict[str, bytes]],
                       direction: str, known: Callable[[tuple[str, str]], bool]
                       ) -> list[tuple[str, str]]:
        """The datasets sets may lead a walk to, in ``direction``: their
        sources (incoming) or destinations (outgoing); of a set whose shape
        is not read yet (its ``d|`` row in ``shaped``) every endpoint it
        names. At most `AHEAD_MAX`, else none (a level read past a burst
        costs more round trips)."""
        out: dict[tuple[str, str], None] = {}
        for c in cached:
            s = c.summaries
            for f in (s.source_fields if direction == "incoming" else s.destination_fields):
                out[(f.endpoint.namespace, f.endpoint.name)] = None
        for row in shaped:
            try:
                eps = shape_ref(row)[1]
            except ValueError:
                continue  # decoding it says what is wrong
            for e in eps:
                out[(e["namespace"], e["name"])] = None
        ahead = [d for d in out if not known(d)]
        return ahead if len(ahead) <= AHEAD_MAX else []
