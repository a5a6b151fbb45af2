"""The spans of one endpoint's time-index rows that a superseded run's cleanup
reads (`fll.store.layout._children`): on a backend that reads keys, not
ranges (HBase), their keys are the index rows' own keys."""
from __future__ import annotations

import pytest

from fll import rowkeys as rk
from fll.store.layout import _children

T0 = 1_700_000_000_000 - 1_700_000_000_000 % rk.LEVELS4[rk.TOP]  # a top bucket's start


def test_a_spans_keys_are_the_index_rows_keys_at_every_level():
    """The keys a span of one endpoint's index rows gives a backend that reads
    keys (HBase) are `rk.run_row`'s (level 0) and `rk.bucket4`'s, newest
    first, and its range holds exactly them."""
    for k in range(len(rk.LEVELS4) - 1):
        size = rk.LEVELS4[k + 1]
        first = T0 + 3 * size
        span = _children(rk.BACKWARD_BUCKET, "s3://la|ke", "d|st", k, first, size)
        times = range(first, first + size, rk.LEVELS4[k])
        want = [rk.run_row(rk.BACKWARD_BUCKET, "s3://la|ke", "d|st", t) if k == 0 else
                rk.bucket4(rk.BACKWARD_BUCKET, "s3://la|ke", "d|st", k, t)
                for t in reversed(times)]
        assert list(span.keys) == want and len(want) == 64
        assert span.lo == want[0] and span.hi == want[-1] + b"\x00"
        assert all(span.lo <= key < span.hi for key in want)
    with pytest.raises(ValueError):
        _children(rk.BACKWARD_BUCKET, "s3://lake", "dst", 1, T0 + 1, rk.LEVELS4[2])
