"""Storage records pass through (docs/format/events.md §7.2, §7.5) on plain wire objects too.

Decoding expands only valid chunk rows: any other stored value is handed on as
one not-yet-validated event, the very object given, for the loader to check.
Packing stores every ineligible event verbatim, a fractional `time` included,
whether the batch holds wire objects or `Event`s.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel import (
    Event,
    InvalidEnvelope,
    KernelError,
    SessionLog,
    event_from_json,
    event_to_json,
    expand_storage_records,
    pack_chunk_rows,
)
from kernel.values.json import FrozenArray, FrozenObject, thaw, view
from kernel.wire.jsontext import parse_json


def chunk(seq: int, time: Any = None, text: str = "t", **envelope: Any) -> dict[str, Any]:
    """An eligible `text-delta` wire chunk (plain dicts, writer member order)."""
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 1000 + seq if time is None else time,
        "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        **envelope,
    }


def text_row(seq0: int = 4, texts: tuple[str, ...] = ("a", "b", "c")) -> dict[str, Any]:
    data = {"turn": 1, "step": 1, "index": 0, "dt": [1] * (len(texts) - 1), "texts": list(texts)}
    return {"type": "text-chunks", "seq0": seq0, "time0": 7, "data": data}


# -- decoding: only valid rows expand --------------------------------------------------------------

NON_ROWS: dict[str, Any] = {
    "string": "turn/start",
    "null": None,
    "integer": 42,
    "fraction": 1.5,
    "nan": math.nan,
    "boolean": True,
    "array": [text_row()],
    "empty object": {},
    "object without a type": {"seq0": 0, "time0": 0, "data": {}},
    "object without a row tag": {"type": "turn/start", "seq": 0},
    "event-shaped object": chunk(0),
    "singular row-like tag": {**text_row(), "type": "text-chunk"},
    "unknown row-like tag": {**text_row(), "type": "image-chunks"},
    "capitalised row tag": {**text_row(), "type": "Text-Chunks"},
    "non-string tag": {**text_row(), "type": 3},
    "tag in a list": {**text_row(), "type": ["text-chunks"]},
}


@pytest.mark.parametrize("name", sorted(NON_ROWS))
def test_s7_5_a_stored_value_that_is_not_a_row_passes_through_as_one_event(name: str) -> None:
    value = NON_ROWS[name]
    before = copy.deepcopy(value)
    out = expand_storage_records([value])
    assert len(out) == 1 and out[0] is value
    if name != "nan":
        assert value == before, "nothing is normalised or copied into the value"


@pytest.mark.parametrize("name", sorted(NON_ROWS))
def test_s7_5_frozen_stored_values_pass_through_too(name: str) -> None:
    value = NON_ROWS[name]
    if name in ("nan",):
        pytest.skip("JSON text has no NaN")
    for stored in (parse_json(_json(value)), frozen(value)):
        out = expand_storage_records([stored])
        assert len(out) == 1 and out[0] is stored


def test_s7_5_rows_expand_in_place_among_passed_through_values() -> None:
    values = ["x", text_row(seq0=4), None, {"type": "turn/end"}]
    out = expand_storage_records(values)
    assert out[0] is values[0] and out[4] is values[2] and out[5] is values[3]
    assert [type(e) for e in out[1:4]] == [Event] * 3
    assert [(e.seq, e.time, e.data["chunk"]["text"]) for e in out[1:4]] == [
        (4, 7, "a"),
        (5, 8, "b"),
        (6, 9, "c"),
    ]


def test_s7_5_validation_is_the_loaders_later_check() -> None:
    for name in ("string", "null", "integer", "array", "object without a row tag"):
        with pytest.raises(InvalidEnvelope):
            SessionLog.restore(expand_storage_records([NON_ROWS[name]]))


def test_s7_6_a_malformed_row_is_refused_not_passed_through() -> None:
    row = text_row()
    row["data"]["dt"] = [1]
    with pytest.raises(KernelError) as info:
        expand_storage_records(["x", row])
    assert info.value.index == 1


# -- packing: every ineligible event is stored verbatim --------------------------------------------


def _set(record: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(record)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _drop(record: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(record)
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


INELIGIBLE: dict[str, Callable[[int], dict[str, Any]]] = {
    "fractional time": lambda s: chunk(s, time=1000.5 + s),
    "negative fractional time": lambda s: chunk(s, time=-0.25),
    "nan time": lambda s: chunk(s, time=math.nan),
    "infinite time": lambda s: chunk(s, time=math.inf),
    "unsafe time": lambda s: chunk(s, time=2**53),
    "string time": lambda s: chunk(s, time="1000"),
    "boolean time": lambda s: chunk(s, time=True),
    "negative seq": lambda s: _set(chunk(s), ("seq",), -1),
    "fractional seq": lambda s: _set(chunk(s), ("seq",), s + 0.5),
    "other type": lambda s: _set(chunk(s), ("type",), "assistant/message"),
    "ignorable": lambda s: chunk(s, ignorable=True),
    "surface op": lambda s: chunk(s, surfaceOp="append"),
    "source seqs": lambda s: chunk(s, sourceEventSeqs=[0]),
    "no data": lambda s: _drop(chunk(s), ("data",)),
    "data not an object": lambda s: _set(chunk(s), ("data",), [1]),
    "extra data key": lambda s: _set(chunk(s), ("data", "extra"), 1),
    "boolean turn": lambda s: _set(chunk(s), ("data", "turn"), True),
    "string step": lambda s: _set(chunk(s), ("data", "step"), "1"),
    "extra chunk key": lambda s: _set(chunk(s), ("data", "chunk", "extra"), 1),
    "text not a string": lambda s: _set(chunk(s), ("data", "chunk", "text"), 5),
    "index not a number": lambda s: _set(chunk(s), ("data", "chunk", "index"), None),
    "block-start chunk": lambda s: _set(chunk(s), ("data", "chunk", "type"), "block-start"),
    "unknown chunk type": lambda s: _set(chunk(s), ("data", "chunk", "type"), "image-delta"),
    "tool-call delta without id": lambda s: _set(
        chunk(s), ("data", "chunk"), {"type": "tool-call-delta", "index": 0, "argumentsDelta": ""}
    ),
}


@pytest.mark.parametrize("name", sorted(INELIGIBLE))
def test_s7_2_an_ineligible_wire_object_is_stored_verbatim_and_closes_the_run(name: str) -> None:
    odd = INELIGIBLE[name](3)
    before = copy.deepcopy(odd)
    batch = [chunk(0), chunk(1), chunk(2), odd, chunk(4), chunk(5), chunk(6)]
    records = pack_chunk_rows(batch)
    assert len(records) == 3, records
    assert records[1] is odd
    if name != "nan time":
        assert odd == before
    assert [thaw(records[k])["seq0"] for k in (0, 2)] == [0, 4]


@pytest.mark.parametrize("name", sorted(INELIGIBLE))
def test_s7_2_a_frozen_ineligible_wire_object_is_stored_verbatim(name: str) -> None:
    odd = frozen(INELIGIBLE[name](0))
    assert type(odd) is FrozenObject
    assert pack_chunk_rows([odd, odd, odd]) == (odd, odd, odd)


def test_s7_2_events_with_a_fractional_time_are_stored_verbatim() -> None:
    events = [event_from_json(chunk(s)) for s in range(7)]
    events[3] = Event("assistant/chunk", 3, 1003.5, events[3].data)
    records = pack_chunk_rows(events)
    assert len(records) == 3 and records[1] is events[3]
    only = [Event("assistant/chunk", s, 0.5 + s, events[0].data) for s in range(4)]
    assert all(a is b for a, b in zip(pack_chunk_rows(only), only, strict=True))


def test_s7_2_an_integral_float_time_packs_and_expands_to_the_same_number() -> None:
    batch = [chunk(s, time=float(10 + s)) for s in range(3)]
    (row,) = pack_chunk_rows(batch)
    assert thaw(row)["time0"] == 10
    assert [event_to_json(e) for e in expand_storage_records([row])] == batch


def test_s7_3_wire_objects_and_events_pack_into_the_same_rows() -> None:
    wire = [chunk(s, text=str(s)) for s in range(5)]
    events = [event_from_json(w) for w in wire]
    views = [frozen(w) for w in wire]
    from_events = pack_chunk_rows(events)
    assert pack_chunk_rows(wire) == from_events
    assert pack_chunk_rows(views) == from_events
    mixed = [wire[0], events[1], views[2], wire[3], events[4]]
    assert pack_chunk_rows(mixed) == from_events


def test_s7_3_a_short_run_of_wire_objects_is_stored_verbatim() -> None:
    wire = [chunk(0), chunk(1)]
    records = pack_chunk_rows(wire)
    assert records[0] is wire[0] and records[1] is wire[1]


# -- the round trip on wire batches ---------------------------------------------------------------

_TEXT = st.text(max_size=3)


@st.composite
def wire_batches(draw: st.DrawFn) -> list[tuple[bool, Any]]:
    """(eligible, wire object) pairs with contiguous seqs: delta chunks, some made ineligible."""
    out: list[tuple[bool, Any]] = []
    for seq in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 3)) == 0:
            name = draw(st.sampled_from(sorted(INELIGIBLE)))
            out.append((False, INELIGIBLE[name](seq)))
        else:
            out.append((True, chunk(seq, text=draw(_TEXT), time=draw(st.integers(0, 5)))))
    return out


@settings(max_examples=200)
@given(wire_batches(), st.booleans())
def test_wire_batches_round_trip_with_every_ineligible_object_kept_by_identity(
    pairs: list[tuple[bool, Any]], as_views: bool
) -> None:
    batch = [frozen(w) if as_views else w for _, w in pairs]
    out = expand_storage_records(pack_chunk_rows(batch))
    shown = "\n".join(map(repr, batch))
    assert len(out) == len(batch), f"packing then decoding changed the count:\n{shown}"
    for (eligible, _), original, decoded in zip(pairs, batch, out, strict=True):
        if not eligible:
            assert decoded is original, f"an ineligible object was not kept verbatim:\n{shown}"
        elif decoded is not original:
            assert type(decoded) is Event and event_to_json(decoded) == thaw(original), shown


def frozen(value: Any) -> Any:
    """A read-only view of a copy of `value`, as a reader hands out stored records."""
    result = view(copy.deepcopy(value))
    assert type(result) in (FrozenObject, FrozenArray) or not isinstance(value, (dict, list))
    return result


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
