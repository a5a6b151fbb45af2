"""An invalid operation set is refused with every problem named, not only the first.

CDAP's validator collects all problems of an operation set before failing; fll
does the same: one line per problem, a summary line first when there are
several, and the error still carries the first problem's operation and field.
"""
from __future__ import annotations

import pytest

from fll import (EndPoint, FieldLineageInfo, InputField, InvalidLineageError, ReadOperation,
                 TransformOperation, WriteOperation)
from fll.graph import _PROBLEMS_SHOWN

SRC = EndPoint("ns", "src")
DST = EndPoint("ns", "dst")


def read() -> ReadOperation:
    return ReadOperation("read", "", SRC, ["a", "b"])


def refused(ops) -> InvalidLineageError:
    with pytest.raises(InvalidLineageError) as err:
        FieldLineageInfo(ops)
    return err.value


CASES = {
    "two unknown origins": (
        [read(), TransformOperation("t", "", [InputField("ghost1", "a")], ["x"]),
         WriteOperation("w", "", DST, [InputField("ghost2", "x"), InputField("read", "b")])],
        ["'ghost1'", "'ghost2'"]),
    "an unknown origin and a field that is not an output": (
        [read(), WriteOperation("w", "", DST, [InputField("nobody", "a"),
                                               InputField("read", "zzz")])],
        ["'nobody'", "'zzz' is not an output of operation 'read'"]),
    "a repeated name and no WRITE": (
        [read(), ReadOperation("read", "", SRC, ["c"]),
         TransformOperation("t", "", [InputField("read", "a")], ["x"])],
        ["'read' is used more than once", "no WRITE operation"]),
    "a self-input and an unknown origin": (
        [read(), TransformOperation("t", "", [InputField("t", "x"), InputField("read", "a")],
                                    ["x"]),
         WriteOperation("w", "", DST, [InputField("t", "x"), InputField("lost", "q")])],
        ["'t' takes its own output 'x'", "'lost'"]),
}


@pytest.mark.parametrize("ops,expected", CASES.values(), ids=CASES.keys())
def test_an_invalid_set_is_refused_naming_every_problem_on_its_own_line(ops, expected):
    message = str(refused(ops))
    lines = message.split("\n")
    assert lines[0] == f"the operation set has {len(expected)} problems:", message
    assert len(lines) == len(expected) + 1, message
    for want, line in zip(expected, lines[1:], strict=True):
        assert line.startswith("- ") and want in line, (want, line)


def test_the_error_carries_the_operation_and_field_of_the_first_problem():
    ops, _ = CASES["two unknown origins"]
    err = refused(ops)
    assert (err.operation, err.field) == ("t", "a")


def test_a_single_problem_is_one_line_without_a_summary():
    message = str(refused([read(), WriteOperation("w", "", DST, [InputField("ghost", "a")])]))
    assert "\n" not in message and "'ghost'" in message
    assert not message.startswith("the operation set has")


def test_a_set_with_thousands_of_problems_lists_a_bounded_number_and_counts_the_rest():
    inputs = [InputField(f"ghost{i}", "a") for i in range(3000)]
    message = str(refused([read(), WriteOperation("w", "", DST, inputs)]))
    lines = message.split("\n")
    assert lines[0] == "the operation set has 3000 problems:"
    assert len(lines) == _PROBLEMS_SHOWN + 2
    assert lines[-1] == f"- … and {3000 - _PROBLEMS_SHOWN} more"
    assert len(message) < 20_000  # the known-operation list is bounded too


def test_a_valid_set_still_builds():
    ops = [read(), TransformOperation("t", "", [InputField("read", "a")], ["x"]),
           WriteOperation("w", "", DST, [InputField("t", "x"), InputField("read", "b")])]
    assert len(FieldLineageInfo(ops).operations) == 3
