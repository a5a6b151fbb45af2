"""What a walk reads of one hop: every dataset's names and operation sets in
the round trips of one store read (`Levels.read_level`), however many
datasets the hop touches."""
from __future__ import annotations

from typing import Iterable, NamedTuple

import msgpack

from .. import rowkeys as rk
from .base import Span
from .layout import _decode_key, _target
from .reader import Reader


class Level(NamedTuple):
    """`LineageStore.read_level`'s answer, by ``(namespace, name)``."""

    resolved: dict[tuple[str, str], tuple[str, str]]  # as resolve_dataset answers
    aliases: dict[tuple[str, str], list[tuple[str, str]]]  # as aliases answers
    checksums: dict[tuple[str, str], list[str]]  # as checksums answers


class Levels(Reader):
    """The level reads of a `LineageStore` (see the module doc)."""

    def read_level(self, datasets: Iterable[tuple[str, str]], start: int, end: int,
                   direction: str = "incoming") -> "Level":
        """What a walk needs of every dataset of one hop, in the round trips of
        one read (`Table.read_span_groups`): the dataset each name stands for
        (`resolve_dataset`), the aliases naming it (`aliases`), and its
        operation sets in the range (`checksums`). The aliases are read as one
        span over the hop's datasets (the aliased-by rows between the first and
        the last: only aliases have them), the top buckets of a range over
        more than 64 of them as one span per dataset (no directory row to read
        first); a second read confirms any aliases found.
        A dataset that turns out to be an alias is answered under its own
        name here; the walk reads its target as it reads any other dataset."""
        return self._read_level(list(dict.fromkeys(datasets)), start, end, (direction,))[0]

    def read_level_both(self, datasets: Iterable[tuple[str, str]], start: int, end: int
                        ) -> tuple["Level", dict[tuple[str, str], list[str]]]:
        """`read_level` of the incoming sets, and the outgoing sets of the same
        datasets (as `checksums` answers them), in the round trips of one: what
        a question naming a dataset first asks of it (its fields are those of
        both directions)."""
        return self._read_level(list(dict.fromkeys(datasets)), start, end,
                                ("incoming", "outgoing"))

    def _read_level(self, ds: list[tuple[str, str]], start: int, end: int,
                    directions: tuple[str, ...]
                    ) -> tuple["Level", dict[tuple[str, str], list[str]]]:
        if not ds:
            return Level({}, {}, {}), {}
        alias_keys = [rk.alias(ns, n) for ns, n in ds]
        heads = sorted(rk.dataset_prefix(rk.ALIASED_BY, ns, n) for ns, n in ds)
        plans = [self._index_plan(ns, n, start, end, direction, top_span=True)
                 for direction in directions for ns, n in ds]
        reads = self.table.read_span_groups(
            [([Span(k, k + b"\x00", (k,)) for k in alias_keys], (), ()),
             ([Span(heads[0], rk.prefix_end(heads[-1]))], (), ())] + [p.group for p in plans])
        resolved = {}
        for d, key in zip(ds, alias_keys, strict=True):
            row = reads[0].rows.get(key)
            # b"": a turned pair being deleted, as `resolve_dataset` reads it
            resolved[d] = _target(self.url, key, row["t"]) if row and row.get("t") else d
        wanted = set(ds)
        candidates: dict[tuple[str, str], list[tuple[str, str]]] = {d: [] for d in ds}
        for key in reads[1].rows:
            k = _decode_key(self.url, key)
            target = (k.namespace, k.name)
            if k.alias is not None and target in wanted:
                candidates[target].append(k.alias)
        # the aliases found are confirmed in one more call (none without)
        answers, rows = self._index_answers_and_rows(
            plans, reads[2:], sorted({rk.alias(*a) for c in candidates.values() for a in c}))
        named = {}
        for d, found in candidates.items():
            want = msgpack.packb(list(d), use_bin_type=True)
            named[d] = sorted(a for a in found if rows.get(rk.alias(*a), {}).get("t") == want)
        sets = dict(zip(ds, answers[:len(ds)], strict=True))
        other = dict(zip(ds, answers[len(ds):], strict=True)) if len(directions) > 1 else {}
        return Level(resolved, named, sets), other
