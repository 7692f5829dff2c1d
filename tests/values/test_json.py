"""Lossless JSON values (docs/format/events.md §1) and exact JSON text
(docs/format/persistence.md §2.4)."""

from __future__ import annotations

import collections
import decimal
import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import FrozenArray, FrozenObject, freeze, thaw
from kernel.errors import NotLosslessJson
from kernel.folds.request_header import ordered_json_equal
from kernel.values.json import admit_json, json_equal, safe_int
from kernel.wire.jsontext import (
    _escape_lone_surrogates,
    encode_json,
    encode_json_bytes,
    format_number,
    parse_json,
)
from properties import _json_values as gen_values


class Color(enum.Enum):
    RED = 1


class MyDict(dict[str, Any]):
    pass


class MyStr(str):
    pass


def _cycle() -> Any:
    value: list[Any] = []
    value.append({"again": value})
    return value


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        -0.0,
        2**53,
        -(2**53),
        (1,),
        {1, 2},
        frozenset(),
        b"x",
        bytearray(b"x"),
        decimal.Decimal(1),
        Color.RED,
        object(),
        MyDict(),
        MyStr("s"),
        collections.OrderedDict(),
        {1: "int key"},
        {None: "none key"},
        {("t",): "tuple key"},
        _cycle(),
    ],
)
def test_lossy_values_are_rejected(value: Any) -> None:
    with pytest.raises(NotLosslessJson):
        admit_json({"nested": [value]})


def test_shared_references_are_copied_independently() -> None:
    shared = [1]
    frozen = freeze({"a": shared, "b": shared})
    shared.append(2)
    assert thaw(frozen) == {"a": [1], "b": [1]}


def test_accepted_domain() -> None:
    value = {
        "n": None,
        "b": True,
        "i": 2**53 - 1,
        "f": 0.5,
        "z": 0.0,
        "s": "\ud800 lone",
        "l": [[]],
    }
    assert thaw(freeze(value)) == value


def test_frozen_values_are_read_only_mappings_and_sequences() -> None:
    frozen = freeze({"a": [1, {"b": 2}]})
    assert isinstance(frozen, FrozenObject) and isinstance(frozen["a"], FrozenArray)
    with pytest.raises(TypeError):
        frozen["a"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        frozen.update({})  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        frozen["a"].append(3)  # type: ignore[attr-defined]
    assert frozen["a"] is frozen["a"], "child views are memoised"
    assert frozen == {"a": [1, {"b": 2}]} and frozen["a"] == [1, {"b": 2}]
    assert hash(frozen) == hash(freeze({"a": [1, {"b": 2}]}))


def test_frozen_values_are_accepted_back_as_plain_values() -> None:
    frozen = freeze({"a": [1]})
    assert admit_json({"x": frozen}) == {"x": {"a": [1]}}


def test_thaw_returns_a_caller_owned_copy() -> None:
    frozen = freeze({"a": [1]})
    plain = thaw(frozen)
    plain["a"].append(2)
    assert frozen == {"a": [1]}


def test_json_equality() -> None:
    assert json_equal({"a": 1, "b": [1.0]}, {"b": [1], "a": 1.0})
    assert not json_equal(True, 1)
    assert not json_equal({"a": None}, {})
    assert not json_equal([1, 2], [2, 1])


SMILE = "\U0001f642"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\ud83d\ude42", SMILE),
        (["a\ud83d\ude42b"], ["a" + SMILE + "b"]),
        ({"\ud83d\ude42": 1, "k": "\ud83d\ude42"}, {SMILE: 1, "k": SMILE}),
        ({"x": {"\ud83d\ude42": [1]}}, freeze({"x": {SMILE: [1.0]}})),
    ],
)
def test_json_equality_joins_split_surrogate_pairs(a: Any, b: Any) -> None:
    # The format's strings are UTF-16: a split pair is the character it encodes
    # (docs/format/events.md §1.4).
    assert json_equal(a, b) and json_equal(b, a)
    assert ordered_json_equal(a, b) and ordered_json_equal(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\ud83d", "\ude42"),  # lone halves compare as themselves
        ("\ude42\ud83d", SMILE),  # low then high is two lone halves, not a pair
        ({"\ud83d\ude42": 1}, {SMILE: 2}),
        ({"\ud83d\ude42": 1, "a": 1}, {SMILE: 1, "b": 1}),
        ({"\ud83d\ude42": 1, SMILE: 1}, {SMILE: 1, "x": 1}),  # two keys that join to one
    ],
)
def test_json_equality_keeps_other_strings_apart(a: Any, b: Any) -> None:
    assert not json_equal(a, b) and not json_equal(b, a)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3.0, 3), (True, None), (2**53, None), (-(2**53 - 1), -(2**53 - 1)), (0.5, None), ("1", None)],
)
def test_safe_int(value: Any, expected: int | None) -> None:
    assert safe_int(value) == expected


# -- docs/format/persistence.md §2.4 ---------------------------------------------------------------

NUMBERS = [
    (3.0, "3"),
    (1e16, "10000000000000000"),
    (1e20, "100000000000000000000"),
    (123.456, "123.456"),
    (1e-5, "0.00001"),
    (1e-6, "0.000001"),
    (1e21, "1e+21"),
    (1e-7, "1e-7"),
    (1.5e300, "1.5e+300"),
    (-0.0, "0"),
    (-2.5, "-2.5"),
    (5e-324, "5e-324"),
    (2**60, "1152921504606847000"),
    (2**53 - 1, "9007199254740991"),
]


@pytest.mark.parametrize(("value", "text"), NUMBERS)
def test_number_spelling(value: float, text: str) -> None:
    assert format_number(value) == text
    assert float(text) == value


def test_serialization_example() -> None:
    event = {
        "type": "user/message",
        "seq": 1,
        "time": 5,
        "data": {
            "id": "u",
            "role": "user",
            "content": [{"type": "text", "text": "naïve\u0007 🙂"}],
            "source": {"kind": "user"},
            "n": 2.50,
        },
        "surfaceOp": "append",
    }
    expected = (
        '{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":'
        '[{"type":"text","text":"naïve\\u0007 🙂"}],"source":{"kind":"user"},"n":2.5},'
        '"surfaceOp":"append"}'
    )
    assert encode_json_bytes(event) == expected.encode("utf-8")


def test_member_order_puts_array_indices_first() -> None:
    assert encode_json({"b": 1, "10": 2, "a": 3, "2": 4}) == '{"2":4,"10":2,"b":1,"a":3}'
    assert encode_json({"01": 1, "-1": 2, "4294967295": 3, "0": 4}) == (
        '{"0":4,"01":1,"-1":2,"4294967295":3}'
    )


def test_string_escapes() -> None:
    text = '"\\\b\t\n\f\r\x00\x1f\x7f\u2028/é'
    assert encode_json(text) == '"\\"\\\\\\b\\t\\n\\f\\r\\u0000\\u001f\x7f\u2028/é"'


def test_lone_surrogates_are_escaped_and_pairs_joined() -> None:
    assert encode_json_bytes(["\ud800", "\udfff x", "\ud83d\ude42"]) == (
        '["\\ud800","\\udfff x","🙂"]'.encode()
    )


def test_encoder_matches_stdlib_on_plain_values() -> None:
    value = {"a": [1, "x", None, True, {"k": "v"}], "b": {"c": []}}
    assert encode_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("bad", [b"NaN", b"[Infinity]", b"-Infinity", b"{not json", b"\xff", b""])
def test_parser_is_strict(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_json(bad)


def test_parser_reads_what_json_allows() -> None:
    assert parse_json(b'"\\ud800"') == "\ud800"
    assert math.isinf(parse_json(b"[1e400]")[0])
    assert parse_json(b' {"a":1}\r') == {"a": 1}


@pytest.mark.slow
def test_regression_equal_frozen_values_hash_equal() -> None:
    # Found in review: the hash was order-sensitive JSON text while equality is not.
    assert freeze({"a": 1, "b": 2}) == freeze({"b": 2, "a": 1})
    assert hash(freeze({"a": 1, "b": 2})) == hash(freeze({"b": 2, "a": 1}))
    assert hash(freeze([1])) == hash(freeze([True])) == hash(freeze([1.0]))
    deep: Any = 1
    for _ in range(20_000):
        deep = [deep]
    assert hash(freeze(deep)) == hash(freeze(deep))


@pytest.mark.slow
@given(
    st.one_of(
        gen_values.json_values(max_leaves=30),
        gen_values.array_index_objects(),
        st.lists(gen_values.js_numbers()),
        gen_values.payload_values(),
    )
)
def test_bytes_writer_spells_every_value_as_the_exact_encoder(value: Any) -> None:
    # encode_json_bytes hands values to orjson when their spelling is the same; the exact
    # encoder is the reference for every value, frozen or plain.
    text = encode_json(value)
    try:
        expected = text.encode("utf-8")
    except UnicodeEncodeError:
        expected = _escape_lone_surrogates(text).encode("utf-8")
    assert encode_json_bytes(value) == expected
    assert encode_json_bytes(freeze(value)) == expected


def test_views_are_the_collections_they_were_when_they_derived_from_the_abcs() -> None:
    from collections.abc import Mapping, Sequence

    import msgspec

    from kernel.values.json import FrozenArray, FrozenObject

    obj = FrozenObject({"a": [1, 2, 2], "b": None})
    arr = obj["a"]
    assert isinstance(obj, Mapping) and not isinstance(obj, Sequence)
    assert isinstance(arr, Sequence) and not isinstance(arr, Mapping)
    assert list(obj.keys()) == ["a", "b"] and list(obj.values())[1] is None
    assert [k for k, _ in obj.items()] == ["a", "b"] and obj.keys() == {"a", "b"}
    assert arr.index(2) == 1 and arr.count(2) == 2 and 2 in arr and list(reversed(arr)) == [2, 2, 1]
    with pytest.raises(TypeError):
        reversed(obj)
    # Plain msgspec structs: an ABC metaclass would put every construction on the slow path.
    assert type(FrozenObject) is msgspec.StructMeta and type(FrozenArray) is msgspec.StructMeta


# -- the plain copy: admit_json's quick path answers as the general walk -----------------------


def _admitted(admit: Any, value: Any) -> Any:
    try:
        return ("ok", admit(value))
    except NotLosslessJson as exc:
        return ("refused", str(exc))


def _nested(depth: int) -> Any:
    value: Any = {"leaf": [1, "a", None, True]}
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@given(
    st.one_of(
        gen_values.json_containers(max_leaves=20),
        gen_values.bad_json().map(lambda bad: bad.value),
        st.integers(10, 24).map(_nested),
    )
)
def test_admit_json_answers_as_the_general_walk_on_any_value(value: Any) -> None:
    from kernel.values.json import _admitted_container

    def general(v: Any) -> Any:
        return _admitted_container(v) if type(v) in (dict, list) else admit_json(v)

    got, expected = _admitted(admit_json, value), _admitted(general, value)
    assert got == expected
    if got[0] == "ok" and type(value) in (dict, list):
        assert got[1] is not value and type(got[1]) is type(value)  # a private copy
        assert not _container_ids(got[1]) & _container_ids(value), "shares a container"


def _container_ids(value: Any) -> set[int]:
    """The ids of every dict and list inside `value`, itself included."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) in (dict, list) and id(item) not in found:
            found.add(id(item))
            stack.extend(item.values() if type(item) is dict else item)
    return found


def test_the_plain_copy_leaves_what_it_is_unsure_of_to_the_general_walk() -> None:
    from kernel.values.json import _UNSURE, _plain_copy

    cycle: list[Any] = []
    cycle.append(cycle)
    for value in (
        {"x": 1.5},
        {"x": "é"},
        {"é": 1},
        {1: "x"},
        [2**53],
        [FrozenObject({"a": 1})],
        [("tuple",)],
        _nested(17),
        cycle,
    ):
        assert _plain_copy(value, 0) is _UNSURE, value
    assert _plain_copy(_nested(15), 0) == _nested(15)
    with pytest.raises(NotLosslessJson, match=r"cycle|itself"):
        admit_json(cycle)


def test_the_index_key_search_finds_what_the_pattern_finds() -> None:
    """The spelling check's index-key search follows each `0":` back over its zeros; it
    answers as the regex `[{,]"0+":` it replaced, on every text of up to six digit shapes
    (digits read as `0`; no float shape among them, so the key alone decides)."""
    import itertools
    import re

    from kernel.wire.jsontext import _spelled_alike

    pattern = re.compile(rb'[{,]"0+":')
    for size in range(7):
        for pieces in itertools.product(b'{,"0:a', repeat=size):
            shapes = bytes(pieces)
            assert _spelled_alike(b"", shapes) == (pattern.search(shapes) is None), shapes
