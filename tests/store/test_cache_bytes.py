"""Memory bounded in bytes (`fll.store.cache`): every cache of a process within
``cache_mb``, measured with tracemalloc, not only by the caches' own count."""
from __future__ import annotations

import gc
import tracemalloc

from fll import EndPoint, EndPointField, open_store
from fll.model import InputField, ReadOperation, Transformation, TransformOperation, WriteOperation
from fll.opset import FieldLineageInfo
from fll.rowkeys import MAX_TIME
from fll.store.cache import CacheBudget, SizedLRU
from fll.store.reads import ReadView, SetMerges

T0 = 1_700_000_000_000


def test_a_sized_lru_keeps_its_bytes_and_counts_growth_on_each_hit():
    sizes = {"a": 40, "b": 40, "c": 40}
    lru: SizedLRU[str] = SizedLRU(100, lambda k: sizes[k], count=10)
    lru.put("a", "a")
    lru.put("b", "b")
    assert lru.bytes == 80 and len(lru) == 2
    lru.put("c", "c")  # 120 > 100: the least recently used goes
    assert lru.get("a") is None and lru.get("b") == "b" and lru.bytes == 80
    sizes["b"] = 90  # b answered more since it was stored: counted at its next use
    assert lru.get("b") == "b"
    assert lru.get("c") is None and lru.bytes == 90  # c, older, made room
    sizes["a"] = 500
    lru.put("a", "a")  # alone past the budget: kept (the question is answered), b goes
    assert len(lru) == 1 and lru.get("a") == "a"
    few: SizedLRU[str] = SizedLRU(10**9, lambda k: 1, count=2)
    for k in "xyz":
        few.put(k, k)
    assert len(few) == 2 and few.get("x") is None


def _wide(n: int, dst: EndPoint, src: EndPoint) -> FieldLineageInfo:
    cols = [f"c{i}" for i in range(n)]
    ins = [InputField("read", c) for c in cols]
    tags = {i: (Transformation("DIRECT", "TRANSFORMATION"),) for i in ins[: n // 2]}
    return FieldLineageInfo([
        ReadOperation("read", "read", src, cols),
        TransformOperation("mix", "all to all", ins, cols, tags),
        WriteOperation("write", "write", dst, [InputField("mix", c) for c in cols])])


def test_every_cache_stays_within_cache_mb_as_measured(tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    n_sets, width = 60, 300
    dsts = [EndPoint("mem", f"out{k}") for k in range(n_sets)]
    with open_store(url) as store:
        store.record_many([(_wide(width, d, EndPoint("mem", f"in{k}")), f"r{k}",
                            T0 + k * 1000, None) for k, d in enumerate(dsts)])
    budget_mb = 4
    with open_store(url, cache_mb=budget_mb) as store:
        merges = SetMerges(budget=store.cache_budget.merges)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for d in dsts:
                view = ReadView(store, merges)
                for i in range(0, width, 7):
                    ef = EndPointField(d, f"c{i}")
                    got = view.incoming(ef, 0, MAX_TIME)
                    assert len(got) == width  # every answer still whole
                cached = store._cache.bytes + store._shapes.bytes
                assert cached <= sum(CacheBudget.of_mb(budget_mb)[:2])
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    # the sets asked would hold far more than the budget without it...
    assert len(store._cache) < n_sets
    # ...and what the process holds after asking them all is within the budget
    # (the estimates are above what tracemalloc measures, so the real bytes
    # are lower than the counted ones)
    assert held <= budget_mb * 2**20, f"{held / 2**20:.1f} MiB held, budget {budget_mb} MiB"
