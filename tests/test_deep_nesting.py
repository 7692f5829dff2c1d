"""Deep values cost their own containers, not a multiple of them (docs/format/events.md §1.2).

Nesting depth is bounded by memory alone, so the memory a level costs is the bound: loading,
appending, copying and hashing a value n levels deep each hold one copy of it and a few machine
words a level besides. The peaks are `tracemalloc`'s (deterministic for the same code), never
times; `benchmarks/deep_nesting.py` reports both.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from kernel import (
    APPEND,
    SessionLog,
    event_to_json,
    load_jsonl,
    load_jsonl_zstd,
    write_jsonl,
    write_jsonl_zstd,
)
from kernel.admission.admit import admit_parsed
from kernel.errors import NotLosslessJson
from kernel.values.json import admit_json, json_equal, raw, thaw, view
from kernel.wire.jsontext import parse_json, read_json_text

HEADER = {"version": 0, "id": "deep", "createdAt": 1}
_HEADER_LINE = b'{"type":"session","version":0,"id":"deep","createdAt":1,"delegationDepth":0}'
_TURN_START = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
_TURN_END = b'{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}'


def _log(inner: bytes) -> bytes:
    """A closed turn whose second event, an ignorable extension, holds `inner` as `data.d`."""
    deep = b'{"type":"x/deep","seq":1,"time":2,"ignorable":true,"data":{"d":' + inner + b"}}"
    return b"\n".join((_HEADER_LINE, _TURN_START, deep, _TURN_END)) + b"\n"


def _arrays(depth: int, leaf: Any = None) -> Any:
    """`depth` nested lists around `leaf` (the innermost list is empty when `leaf` is None)."""
    value: Any = [] if leaf is None else [leaf]
    for _ in range(depth - 1):
        value = [value]
    return value


def _depth_of_chain(value: Any) -> int:
    """How many single-element lists (the innermost may be empty) are nested in `value`."""
    depth = 0
    while type(value) is list:
        depth += 1
        if not value:
            break
        value = value[0]
    return depth


def _peak_per_level(work: Callable[[], Any], depth: int) -> float:
    """The `tracemalloc` peak of `work()` above its start, in bytes per level."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        result = work()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    del result
    return peak / depth


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["jsonl", "zstd"])
def test_a_value_a_million_levels_deep_loads_and_writes_back_byte_for_byte(layout: str) -> None:
    depth = 1_000_000
    data = _log(b"[" * depth + b"]" * depth)
    if layout == "zstd":
        loaded = load_jsonl_zstd(write_jsonl_zstd(HEADER, load_jsonl(data, now=5).events), now=5)
    else:
        loaded = load_jsonl(data, now=5)
    assert not loaded.torn and [e.seq for e in loaded.events] == [0, 1, 2]
    assert _depth_of_chain(raw(loaded.events[1].data)["d"]) == depth
    assert write_jsonl(loaded.header, loaded.events) == data


def test_loading_a_deep_record_holds_one_copy_of_its_value() -> None:
    # The exact reader kept a tuple per open container and restore copied the parsed
    # value again: about 520 bytes a level at the peak, for a value of 64.
    depth = 10_000
    data = _log(b"[" * depth + b"]" * depth)
    assert _peak_per_level(lambda: load_jsonl(data, now=5), depth) < 100
    assert _peak_per_level(lambda: parse_json(data.split(b"\n")[2]), depth) < 100


def test_appending_seeding_and_restoring_a_deep_value_copy_it_once() -> None:
    # Admission kept an iterator, a tuple and a set entry per open container: about 410
    # bytes a level (restore of wire dicts 430) for a copy of 72.
    depth = 5_000
    inner = _arrays(depth)
    started = SessionLog.empty(header=HEADER).append("turn/start", {"turn": 1}, time=1)
    wire = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "x/deep", "seq": 1, "time": 2, "ignorable": True, "data": {"d": inner}},
    ]

    def append() -> SessionLog:
        return started.append("x/deep", {"d": inner}, time=2, ignorable=True)

    assert _peak_per_level(append, depth) < 130
    assert _peak_per_level(lambda: SessionLog.seed(wire, header=HEADER, now=3), depth) < 130
    assert _peak_per_level(lambda: SessionLog.restore(wire, header=HEADER), depth) < 130
    assert _peak_per_level(lambda: admit_parsed(inner, "event"), depth) < 130
    log = started.append("x/deep", {"d": inner}, time=2, ignorable=True)
    assert json_equal(log.events[1].data, {"d": inner})


def test_thawing_and_hashing_a_deep_value_cost_little_beside_the_copy() -> None:
    # thaw kept two tuples and a slot object per container (about 300 bytes a level);
    # the hash a tuple per open container (64).
    depth = 10_000
    data = _log(b"[" * depth + b"]" * depth)
    event = load_jsonl(data, now=5).events[1]
    # Built before measuring: whether the load left the payload lazy depends on the
    # recursion limit (under a raised one, as after mypy's API has run in-process, the
    # typed decode reads the line and the payload is built on first read, one copy more).
    raw(event.data)
    assert _peak_per_level(lambda: event_to_json(event), depth) < 120
    assert _peak_per_level(lambda: thaw(event.data), depth) < 120
    container = raw(event.data)
    assert _peak_per_level(lambda: hash(view(container)), depth) < 40
    assert hash(view(container)) == hash(view(thaw(container)))


@pytest.mark.parametrize("depth", [1, 2, 3, 1_500])
def test_a_run_of_closing_brackets_closes_only_the_arrays_it_matches(depth: int) -> None:
    # `]` closes a run of arrays at once when each holds the one value inside it; an array
    # that already holds a value, or the end of the run, stops it.
    assert json_equal(read_json_text("[" * depth + "]" * depth), _arrays(depth))
    assert json_equal(read_json_text("[" * depth + "7" + "]" * depth), _arrays(depth, 7))
    siblings = "[" * depth + "1]" + ",2]" * (depth - 1)
    expected: Any = [1]
    for _ in range(depth - 1):
        expected = [expected, 2]
    assert json_equal(read_json_text(siblings), expected)
    prefixed = "[0," * depth + "[" * depth + "]" * (2 * depth)
    expected = _arrays(depth)
    for _ in range(depth):
        expected = [0, expected]
    assert json_equal(read_json_text(prefixed), expected)
    mixed = '{"k":[' * depth + " ] }" * depth
    expected = []
    for _ in range(depth - 1):
        expected = [{"k": expected}]
    assert json_equal(read_json_text(mixed), {"k": expected})


_NO_END = "expected ',' or the end of the container"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 1_500 + "]" * 1_501, "extra data after the JSON value at char 3000"),
        ("[" * 1_500 + "}" + "]" * 1_500, "expected a JSON value at char 1500"),
        (
            "[" * 1_500 + "1" + "]" * 1_499 + "}",
            "expected ',' or the end of the container at char 3000",
        ),
        ('{"a":' * 1_500 + "1" + "]", "expected ',' or the end of the container at char 7501"),
        ("[" * 1_500 + "1" + "]" * 1_499, "expected ',' or the end of the container at char 3000"),
    ],
)
def test_deep_text_errors_name_the_offset_of_the_first_error(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        read_json_text(text)
    assert str(caught.value) == message


def test_a_cycle_found_deep_down_is_named_at_its_first_repeated_container() -> None:
    # The walks keep no set of open containers; the one that finds a cycle names the path
    # to its first repeated container, as one that kept them all did.
    chain: Any = []
    inner = chain
    for _ in range(39):
        inner.append([])
        inner = inner[0]
    inner.append(chain[0][0][0])  # the innermost list (depth 39) holds the one at depth 3
    with pytest.raises(NotLosslessJson) as caught:
        admit_json(chain)
    head, tail = "[0]" * 8, "[0]" * 8
    assert (
        str(caught.value) == f"{head} ... 24 more ... {tail}: a container contains itself (cycle)"
    )
    looped: dict[str, Any] = {"\ud83d\ude42": [], "🙂": 1}  # the pair joins to the next key
    looped["\ud83d\ude42"].append(looped)
    with pytest.raises(NotLosslessJson) as caught:
        admit_json(looped)
    assert str(caught.value) == "['🙂'][0]: a container contains itself (cycle)"
    with pytest.raises(NotLosslessJson, match="contains itself"):
        thaw(chain)
    with pytest.raises(NotLosslessJson, match="contains itself"):
        admit_parsed(chain, "event")


def test_a_list_held_twice_deep_down_is_copied_twice_not_refused() -> None:
    shared = _arrays(2_000, 1)
    value = [shared, [shared]]
    for copy in (admit_json(value), thaw(value), admit_parsed(value, "event")):
        assert json_equal(copy, value)
        assert copy[0] is not shared and copy[1][0] is not shared and copy[0] is not copy[1][0]


def test_the_exact_reader_gives_what_orjson_gives_when_told_the_text_is_deep() -> None:
    text = b'{"a":[1,-0,2.5,1e400,12345678901234567890,"\\u00e9\\ud83d\\ude42",null,true],"a":{}}'
    assert repr(parse_json(text, deep=True)) == repr(parse_json(text))


def test_a_deep_value_in_a_known_type_is_checked_and_kept() -> None:
    # The typed decoder runs out of recursion on the line; the exact reader and the payload
    # rules (R10) read it, and the value comes back as it was appended.
    meta: Any = 0
    for _ in range(3_000):
        meta = {"k": [meta]}
    message = {"id": "u1", "role": "user", "content": [], "source": {"kind": "user"}, "meta": meta}
    log = SessionLog.empty(header=HEADER).append("turn/start", {"turn": 1}, time=1)
    log = log.append("user/message", message, time=2, surface_op=APPEND, ignorable=False)
    log = log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, time=3)
    data = write_jsonl(HEADER, log.events)
    loaded = load_jsonl(data, now=5)
    assert loaded.events == tuple(log.events)
    assert write_jsonl(loaded.header, loaded.events) == data
