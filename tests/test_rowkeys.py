"""Key layout: escaping, inverted time, ranges that never overlap."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fll import rowkeys as rk


def test_newest_runs_sort_first():
    assert rk.backward("n", "d", 2000, "r") < rk.backward("n", "d", 1000, "r")


def test_keys_decode_back_to_their_parts():
    key = rk.by_set(rk.BACKWARD_BY_SET, "a|b", "c%d e/f", "abc", 42, "run|1")
    k = rk.decode(key)
    assert (k.kind, k.namespace, k.name, k.checksum, k.start_ms, k.run_id) == \
        ("backward-by-set", "a|b", "c%d e/f", "abc", 42, "run|1")
    assert rk.decode(rk.data("ff00")).checksum == "ff00"
    assert rk.decode(rk.run("r|x")).run_id == "r|x"


def test_time_range_is_start_inclusive_end_exclusive():
    prefix = rk.dataset_prefix(rk.BACKWARD, "n", "d")
    lo, hi = rk.time_range(prefix, 0, 10000)
    assert not lo <= rk.backward("n", "d", 10000, "r") < hi
    lo, hi = rk.time_range(prefix, 0, 10001)
    assert lo <= rk.backward("n", "d", 10000, "r") < hi
    lo, hi = rk.time_range(prefix, 10000, 10001)
    assert lo <= rk.backward("n", "d", 10000, "r") < hi
    assert not lo <= rk.backward("n", "d", 9999, "r") < hi


names = st.text(alphabet=st.sampled_from("ab|%:/ \x00\x7c\xff"), min_size=1, max_size=6)


@given(names, names, names, names, st.integers(0, 2**40), st.text(max_size=5))
@settings(max_examples=500, deadline=None)
def test_two_datasets_never_share_a_key_range(ns1, n1, ns2, n2, t, run):
    if (ns1, n1) == (ns2, n2):
        return
    p1 = rk.dataset_prefix(rk.BACKWARD, ns1, n1)
    key2 = rk.backward(ns2, n2, t, run)
    assert not key2.startswith(p1)
    assert rk.decode(key2)[1:3] == (ns2, n2)


@given(st.text(max_size=20))
def test_escape_round_trips_and_never_contains_the_separator(s):
    e = rk.escape(s)
    assert b"|" not in e
    assert rk.unescape(e) == s


@given(names, names, st.integers(0, len(rk.LEVELS) - 1), st.integers(0, 2**45),
       st.binary(min_size=16, max_size=16))
@settings(max_examples=300, deadline=None)
def test_bucket_keys_of_both_formats_decode_to_the_same_parts(ns, name, level, t, raw):
    """Format 3 ends a bucket key in the checksum's 16 raw bytes (any byte, ``|``
    too), format 2 in its hex digits; both decode to the same checksum and bucket."""
    checksum = raw.hex()
    new = rk.bucket(ns, name, rk.BACKWARD_BUCKET, level, t, checksum)
    old = rk.bucket_v2(ns, name, rk.BACKWARD_BUCKET, level, t, checksum)
    assert new.endswith(raw) and old.endswith(checksum.encode()) and len(old) == len(new) + 16
    bucket_start = t - t % rk.LEVELS[level]
    for key in (new, old):
        k = rk.decode(key)
        assert (k.namespace, k.name, k.level, k.start_ms, k.checksum) == \
            (ns, name, level, bucket_start, checksum)
    assert not rk.is_wide(new) and not rk.is_wide(old)  # what an upgrade removes


@given(names, names, st.integers(1, rk.TOP), st.integers(0, 2**45), st.integers(0, 2**45))
@settings(max_examples=300, deadline=None)
def test_format_4_keys_decode_to_their_endpoint_level_and_time(ns, name, level, t, u):
    run = rk.run_row(rk.FORWARD, ns, name, t)
    k = rk.decode(run)
    assert (k.kind, k.namespace, k.name, k.level, k.start_ms) == \
        ("forward", ns, name, 0, t - t % rk.LEVELS4[0])
    assert rk.run_of(k.start_ms, rk.run_value(t, bytes(16))) == (t, "00" * 16)
    bucket = rk.bucket4(rk.BACKWARD_BUCKET, ns, name, level, u - u % rk.LEVELS4[level])
    k = rk.decode(bucket)
    assert (k.namespace, k.name, k.level, k.start_ms, k.checksum) == \
        (ns, name, level, u - u % rk.LEVELS4[level], None)
    assert rk.is_wide(run) and rk.is_wide(bucket)
    assert rk.decode(rk.directory(rk.FORWARD_BUCKET, ns, name)).level == rk.DIRECTORY_LEVEL
    # newest first at every level
    assert rk.run_row(rk.FORWARD, ns, name, t + 64) < run


@given(st.integers(0, 2**44), st.integers(1, 2**43))
@settings(max_examples=1000, deadline=None)
def test_the_cover_tiles_the_range_with_whole_buckets_inside_and_run_rows_at_the_edges(
        start, length):
    end = start + length
    cover, top = rk.cover4(start, end)
    spans = sorted([(t, t + rk.LEVELS4[k]) for k, t in cover] + ([top] if top else []))
    assert spans[0][0] == start - start % rk.LEVELS4[0]
    assert 0 <= spans[-1][1] - end < rk.LEVELS4[0]
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # no gap, no overlap
    for k, t in cover:
        assert t % rk.LEVELS4[k] == 0
        if k:  # a bucket is read whole: it must lie inside the range
            assert start <= t and t + rk.LEVELS4[k] <= end
    for k in range(rk.TOP + 1):  # at most 63 per side per level (64 with an edge row)
        assert sum(1 for level, _ in cover if level == k) <= 128 + (rk.TOP_ENUM if k == rk.TOP
                                                                    else 0)


@given(st.integers(0, 2**44), st.integers(1, 2**43))
@settings(max_examples=300, deadline=None)
def test_the_cover_runs_are_the_cover_rows_grouped_by_level(start, length):
    cover, top = rk.cover4(start, start + length)
    runs, runs_top = rk.cover4_runs(start, start + length)
    assert runs_top == top
    rows = [(k, t) for k, first, last in runs for t in range(first, last + 1, rk.LEVELS4[k])]
    assert rows == cover
    # a run ends where the next row is not the next bucket of its level
    assert all(a[0] != b[0] or a[2] + rk.LEVELS4[a[0]] != b[1]
               for a, b in zip(runs, runs[1:], strict=False))
