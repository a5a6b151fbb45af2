"""What a store knows of datasets besides their lineage: the schemas runs
reported (a ``S|`` row per dataset, a column per run naming a ``q|``
body, stored once per distinct schema) and aliases (``a|``, and the target's
``A|`` row, a column per alias)."""
from __future__ import annotations

from typing import AbstractSet, Callable, Iterable, Mapping, Sequence

import msgpack
import xxhash

from .. import rowkeys as rk
from ..errors import InvalidLineageError, StoreError
from ..model import EndPoint
from .base import first_cells_in
from .layout import (_check_name, _check_run, _corrupt, _decode_key, _target, alias_candidates,
                     confirmed_aliases)
from .state import StoreState

#: schemas a store keeps decoded by digest
_SCHEMAS_KEPT = 1024


def schema_body(namespace: str, name: str, fields: Sequence[tuple[str, str | None]],
                *, checked: bool = False) -> tuple[bytes, bytes]:
    """A dataset's reported schema checked, as its ``q|`` body and digest
    (`Datasets.record_schema`; the ingest joins these rows to its others).
    ``checked``: the fields are (name, type or None) pairs already (as the
    OpenLineage facet parser makes them), packed as they are: msgpack packs
    a tuple as the list it is checked into."""
    _check_name(namespace, "namespace")
    _check_name(name, "dataset name")
    if checked:
        body = msgpack.packb(fields, use_bin_type=True)
        return body, xxhash.xxh3_128_digest(body)
    pairs: list[list[str | None]] = []
    for i, f in enumerate(fields):
        if not (isinstance(f, (tuple, list)) and len(f) == 2 and isinstance(f[0], str)
                and f[0] and (f[1] is None or isinstance(f[1], str))):
            raise InvalidLineageError(f"schema of {namespace}:{name}, field {i + 1}: "
                                      f"expected (name, type or None), got {f!r}")
        pairs.append([f[0], f[1]])
    body = msgpack.packb(pairs, use_bin_type=True)
    return body, xxhash.xxh3_128_digest(body)


class Datasets(StoreState):
    """Schemas and aliases of datasets."""

    def record_schema(self, namespace: str, name: str, run_id: str, start_ms: int,
                      fields: Sequence[tuple[str, str | None]]) -> None:
        """Store the schema (field name → type or None) a run reported for a dataset.
        Idempotent (a blind put); time-ranged like runs, so `schema` answers for
        any range. The fields are stored once per distinct schema (``q|``), the
        run's column of the dataset's ``S|`` row names them by digest."""
        self.record_schemas([(namespace, name, fields)], run_id, start_ms)

    def record_schemas(self, schemas: Sequence[tuple[str, str, Sequence[tuple[str, str | None]]]],
                       run_id: str, start_ms: int, *, checked: bool = False) -> None:
        """`record_schema` of several datasets (namespace, name, fields) one run
        reported, in ONE put: an event names its inputs' and outputs' schemas,
        which cost a store call each before. All are checked before any is
        written (``checked``: the fields are pairs already, `schema_body`)."""
        _check_run(run_id, start_ms)
        rows: dict[bytes, dict[str, bytes]] = {}
        refs: dict[bytes, dict[str, bytes]] = {}
        column = rk.schema_column(start_ms, run_id)
        for namespace, name, fields in schemas:
            body, digest = schema_body(namespace, name, fields, checked=checked)
            # the body always, in the batch of its reference (one transaction on
            # SQLite): a purge removing an unused body between a cached "already
            # there" and the reference would leave the reference naming nothing.
            # Content-addressed, so a body written again is the same row.
            rows[rk.schema_body(rk.checksum_of(digest))] = {"f": body}
            refs.setdefault(rk.schemas(namespace, name), {})[column] = digest
        if rows:
            self.table.put(rows | refs)

    def schema(self, namespace: str, name: str, start_ms: int,
               end_ms: int) -> dict[str, str | None] | None:
        """The schema the latest run in ``[start, end)`` reported for the dataset
        (field name → type or None, in the reported order), or None; of several
        reported in one millisecond, the first by run id."""
        return self.schemas([(namespace, name)], start_ms, end_ms)[(namespace, name)]

    def schemas(self, datasets: Iterable[tuple[str, str]], start_ms: int, end_ms: int
                ) -> dict[tuple[str, str], dict[str, str | None] | None]:
        """`schema` of several datasets: the first column in the range's column
        range of each dataset's ``S|`` row, for every dataset in ONE call
        (`Table.first_cells`), then one multi-get of the schemas not cached."""
        ds = list(dict.fromkeys(datasets))
        columns = rk.schema_columns(start_ms, end_ms)
        if not ds or columns is None:
            return {d: None for d in ds}
        keys = {d: rk.schemas(*d) for d in ds}
        return self._schemas_of(keys, self.table.first_cells(list(keys.values()), *columns))

    def schemas_in_rows(self, rows: Mapping[tuple[str, str], Mapping[str, bytes] | None],
                        start_ms: int, end_ms: int
                        ) -> dict[tuple[str, str], dict[str, str | None] | None]:
        """`schemas` of datasets whose whole ``S|`` rows were read already (by
        a level read, `Levels.read_level_views` ``schemas=True``; None: no
        row): only the schemas not cached are read, in one multi-get."""
        columns = rk.schema_columns(start_ms, end_ms)
        if columns is None:
            return {d: None for d in rows}
        keys = {d: rk.schemas(*d) for d in rows}
        return self._schemas_of(keys, first_cells_in(
            {keys[d]: row for d, row in rows.items() if row}, *columns))

    def _schemas_of(self, keys: dict[tuple[str, str], bytes],
                    cells: Mapping[bytes, tuple[str, bytes]]
                    ) -> dict[tuple[str, str], dict[str, str | None] | None]:
        """Each dataset's schema from the first cell of its ``S|`` row in the
        range (``cells``, by row key; none: no schema), the bodies read once."""
        digests: dict[tuple[str, str], bytes] = {}
        for d, key in keys.items():
            if key in cells:
                digest = cells[key][1]
                if len(digest) != 16:
                    raise _corrupt(self.url, key)
                digests[d] = digest
        bodies = self._schema_fields(set(digests.values()), lambda missing: next(
            f"{ns}:{n}" for (ns, n), dg in digests.items() if dg == missing))
        out: dict[tuple[str, str], dict[str, str | None] | None] = {d: None for d in keys}
        for d, digest in digests.items():
            try:
                out[d] = {str(n): (None if t is None else str(t)) for n, t in bodies[digest]}
            except Exception:
                raise _corrupt(self.url, rk.schema_body(rk.checksum_of(digest))) from None
        return out

    def _schema_fields(self, digests: AbstractSet[bytes], what: Callable[[bytes], str]
                       ) -> dict[bytes, list]:
        """The decoded ``q|`` rows of these digests: those cached, then one
        multi-get of the others (cached once they decode). A missing one is a
        store error naming ``what(digest)`` (a dataset naming it)."""
        with self._lock:
            known = {d: self._schema_bodies[d] for d in digests if d in self._schema_bodies}
            for d in known:
                self._schema_bodies.move_to_end(d)
        wanted = sorted(set(digests) - set(known))
        rows = self.table.get_many([rk.schema_body(rk.checksum_of(d)) for d in wanted]) \
            if wanted else {}
        for d in wanted:
            key = rk.schema_body(rk.checksum_of(d))
            row = rows.get(key)
            if row is None:
                raise StoreError(f"store {self.url}: a schema row of {what(d)} names a schema "
                                 f"whose row is missing (run `fll admin fsck`)")
            try:
                if xxhash.xxh3_128_digest(row["f"]) != d:
                    raise ValueError("not the schema named")
                pairs = msgpack.unpackb(row["f"], raw=False)
                if not isinstance(pairs, list):
                    raise ValueError("not a list of fields")
            except Exception:
                raise _corrupt(self.url, key) from None  # never cached
            known[d] = pairs
        with self._lock:
            for d in wanted:
                self._schema_bodies[d] = known[d]
            while len(self._schema_bodies) > _SCHEMAS_KEPT:
                self._schema_bodies.popitem(last=False)
        return known

    def schema_history(self, namespace: str, name: str, start_ms: int, end_ms: int
                       ) -> list[tuple[int, str, list[tuple[str, str | None]]]]:
        """Every schema reported for the dataset in ``[start_ms, end_ms)``: (time,
        owner, fields), oldest first; of several reported in one millisecond,
        the one `schema` answers. The owner is what reported it (a run id, or
        what `fll.openlineage.static_owner` names). One read of the dataset's
        ``S|`` row and one multi-get of the schemas not cached."""
        columns = rk.schema_columns(start_ms, end_ms)
        key = rk.schemas(namespace, name)
        row = self.table.get(key) if columns is not None else None
        first: dict[int, tuple[str, bytes]] = {}
        for col in sorted(row or (), key=lambda c: c.encode("utf-8")):
            if columns is None or not columns[0] <= col < columns[1]:
                continue
            try:
                at, owner = rk.schema_column_of(col)
            except ValueError:
                raise _corrupt(self.url, key) from None
            digest = (row or {})[col]
            if len(digest) != 16:
                raise _corrupt(self.url, key)
            first.setdefault(at, (owner, digest))  # the column `schema` reads
        known = self._schema_fields({d for _, d in first.values()},
                                    lambda _: f"{namespace}:{name}")
        try:
            return [(at, owner, [(str(n), None if t is None else str(t))
                                 for n, t in known[d]])
                    for at, (owner, d) in sorted(first.items())]
        except Exception:
            raise _corrupt(self.url, key) from None

    def record_alias(self, alias_ns: str, alias_name: str, namespace: str, name: str) -> bool:
        """Make ``alias_ns:alias_name`` (a logical name, e.g. a pipeline's
        ``referenceName``) stand for the dataset ``namespace:name``. Idempotent;
        the latest target wins. Returns True when something changed."""
        for value, what in ((alias_ns, "alias namespace"), (alias_name, "alias name"),
                            (namespace, "namespace"), (name, "dataset name")):
            _check_name(value, what)
        if (alias_ns, alias_name) == (namespace, name):
            return False
        key = rk.alias(alias_ns, alias_name)
        target = msgpack.packb([namespace, name], use_bin_type=True)
        # the pair the other way round (a store written when the location was the
        # alias and the logical name the dataset) is turned: one direction per
        # pair, so resolving never goes round in a circle
        back = rk.alias(namespace, name)
        row = self.table.get(back)
        if row and row.get("t") == msgpack.packb([alias_ns, alias_name], use_bin_type=True):
            if self.table.check_and_put(back, "t", row["t"], {"t": b""}):
                self.table.delete([back])
                self.table.delete_columns(
                    {rk.aliased_by(alias_ns, alias_name): [rk.alias_column(namespace, name)]})
        # the alias's column in its target's row first: a crash leaves a column
        # the alias row does not confirm, which `aliases` ignores
        reverse = {rk.aliased_by(namespace, name): {rk.alias_column(alias_ns, alias_name): b""}}
        for _ in range(16):
            row = self.table.get(key)
            current = row.get("t") if row else None
            self.table.put(reverse)  # idempotent: it may be missing after a crash
            if current == target:
                return False
            if self.table.check_and_put(key, "t", current, {"t": target}):
                if current:
                    old_ns, old_name = _target(self.url, key, current)
                    self.table.delete_columns({rk.aliased_by(old_ns, old_name):
                                               [rk.alias_column(alias_ns, alias_name)]})
                return True
        raise StoreError(f"store {self.url}: alias {alias_ns}:{alias_name} kept changing; retry")

    def resolve_dataset(self, namespace: str, name: str) -> tuple[str, str]:
        """The dataset an alias stands for, else ``(namespace, name)`` itself."""
        row = self.table.get(rk.alias(namespace, name))
        if not row or not row.get("t"):  # b"": a turned pair being deleted
            return namespace, name
        return _target(self.url, rk.alias(namespace, name), row["t"])

    def aliases(self, namespace: str, name: str) -> list[tuple[str, str]]:
        """Every alias that stands for ``namespace:name``, sorted: the columns
        of its ``A|`` row that the aliases' own rows confirm (two reads)."""
        key = rk.aliased_by(namespace, name)
        found = alias_candidates(self.url, key, self.table.get(key))
        if not found:
            return []
        rows = self.table.get_many([rk.alias(*a) for a in found])
        return confirmed_aliases({(namespace, name): found}, rows)[(namespace, name)]

    def all_aliases(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Every alias in the store, by the dataset it stands for (one scan of the
        alias rows, however many datasets there are)."""
        prefix = rk.ALIAS + rk.SEP
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
            if not cols.get("t"):  # a turned pair being deleted
                continue
            k = _decode_key(self.url, key)
            if k.namespace is None or k.name is None:
                continue
            out.setdefault(_target(self.url, key, cols["t"]), []).append((k.namespace, k.name))
        return {t: sorted(a) for t, a in out.items()}

    def schema_spans(self) -> dict[EndPoint, tuple[int, int]]:
        """Every dataset a schema was reported for: the times of its first and
        latest report. One scan of the ``S|`` rows (no schema is read)."""
        out: dict[EndPoint, tuple[int, int]] = {}
        prefix = rk.SCHEMAS + rk.SEP
        for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
            k = _decode_key(self.url, key)
            try:
                times = [rk.schema_column_of(c)[0] for c in cols]
            except ValueError:
                raise _corrupt(self.url, key) from None
            if k.namespace is None or k.name is None or not times:
                raise _corrupt(self.url, key)
            out[EndPoint(k.namespace, k.name)] = (min(times), max(times))
        return out
