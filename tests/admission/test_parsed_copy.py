"""`admit_parsed` (restore's R1) copies the common payload by a short recursion and leaves
the rest to its walk; both must give the same copy, or the same error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.admission.admit import _parsed_copy, _walked_copy, admit_parsed
from kernel.errors import KernelError
from kernel.values.json import freeze
from properties import strategies as gen
from properties.profiles import share_of_examples


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (`True` is not `1`, `-0.0` is not `0.0`,
    NaN is NaN); iterative, for values deeper than the call stack."""
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        if type(x) is not type(y):
            return False
        if type(x) is dict:
            if list(x) != list(y):
                return False
            pairs.extend((x[k], y[k]) for k in x)
        elif type(x) is list:
            if len(x) != len(y):
                return False
            pairs.extend(zip(x, y, strict=True))
        elif type(x) is float:
            if not (math.isnan(x) and math.isnan(y)) and (
                x != y or math.copysign(1, x) != math.copysign(1, y)
            ):
                return False
        elif x != y:
            return False
    return True


def _outcome(copy: Any, value: Any) -> tuple[Any, ...]:
    try:
        return ("copied", copy(value))
    except KernelError as exc:
        return ("refused", type(exc), str(exc))


def _agree(value: Any) -> None:
    fast, walked = (
        _outcome(lambda v: admit_parsed(v, "event"), value),
        _outcome(lambda v: _walked_copy(v, "event"), value),
    )
    if fast[0] == "copied" and walked[0] == "copied":
        assert _same(fast[1], walked[1])
    else:
        assert fast == walked


_PARSED_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 2**64, -(2**80), True, False, None, "é\ud800"]),
)
_PARSED_VALUES = st.recursive(
    st.one_of(_PARSED_SCALARS, gen.json_scalars()),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "é", "0"]), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.one_of(_PARSED_VALUES, gen.payload_values(), gen.deep_chains()).filter(
        lambda value: type(value) in (dict, list)
    )
)
def test_the_recursion_copies_what_the_walk_copies(value: Any) -> None:
    _agree(value)


@pytest.mark.parametrize("label", sorted(gen.DEFECTS))
@share_of_examples(4)
@given(data=st.data())
def test_each_defect_is_copied_or_refused_as_the_walk_does(label: str, data: st.DataObject) -> None:
    value = data.draw(gen.bad_json(labels=[label])).value
    _agree([value])


def _nested(depth: int) -> Any:
    value: Any = {"x": 1.5}
    for _ in range(depth):
        value = [value]
    return value


_cycle: list[Any] = []
_cycle.append({"again": _cycle})

_OTHER_VALUES = {
    "NaN": {"x": [float("nan")]},
    "a tuple": {"x": (1,)},
    "a str subclass key": {type("K", (str,), {})("k"): 1},
    "an int key": {1: 1},
    "a frozen view": {"x": freeze({"y": [1]})},
    "a set": [{1}],
    "a cycle": _cycle,
    "past the recursion's depth": _nested(40),
}


@pytest.mark.parametrize("value", list(_OTHER_VALUES.values()), ids=list(_OTHER_VALUES))
def test_other_values_take_the_walk(value: Any) -> None:
    assert _parsed_copy(value, 0) is None
    _agree(value)


def test_the_copy_is_the_callers_no_longer() -> None:
    value: dict[str, Any] = {"a": [1, {"b": 2.5}], "c": -0.0}
    copy = admit_parsed(value, "event")
    assert _parsed_copy(value, 0) is not None
    assert _same(copy, value)
    assert copy is not value and copy["a"] is not value["a"]
    assert copy["a"][1] is not value["a"][1]
